"""The search index's tables in a SQLite crawl database (``SQLiteIndexTables``; what they
hold and how a catch-up works: ``storage.segments``).

A catch-up runs in one ``BEGIN IMMEDIATE`` transaction: a crawl writing meanwhile waits (its
busy timeout), and nothing it writes is missed. Postings are read by byte range from the
blob (``SQLiteIndexTables.read``), the query's terms only.
"""

from __future__ import annotations

import os
import sqlite3

from storage import segments
from storage.base import StoreError
from storage.sqlite.migrate import migrate
from storage.sqlite.read import connect_readonly

_READ_CHUNK = 2000


def connect(path: str, read_only: bool = False) -> tuple[sqlite3.Connection, bool]:
    """(a connection to the crawl database at ``path``, whether it may write: not with
    ``read_only``, nor where the file or its folder is). A database at an older schema
    version is migrated, if it may be written."""
    if not os.path.exists(path):
        raise StoreError(f"{path}: no such database")
    writable = not read_only and os.access(path, os.W_OK)
    writable = writable and os.access(os.path.dirname(path) or ".", os.W_OK)
    try:
        if writable:
            # shared with the thread a catch-up builds in (``catch_up``), one at a time
            connection = sqlite3.connect(path, isolation_level=None, timeout=30,
                                         check_same_thread=False)  # fmt: skip
            connection.execute("PRAGMA busy_timeout=30000")
            # not made by a crawl (or empty): the store's first open migrates it
            migrate(connection, path, new_too=False)
            connection.execute("SELECT 1 FROM pages LIMIT 1")
        else:
            connection = connect_readonly(path)  # a read-only disk too
            connection.isolation_level = None
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: not a crawl database ({exc})") from exc
    return connection, writable


class SQLiteIndexTables:
    """The index's tables of the SQLite crawl database at ``path`` (``read_only``: never
    written, as where the file or its folder is not writable)."""

    def __init__(self, path: str, read_only: bool = False) -> None:
        self._connection, self.writable = connect(path, read_only)
        self._blobs: dict[int, sqlite3.Blob] = {}

    def has_index(self) -> bool:
        names = "('search_segments', 'search_pending')"
        found = self._connection.execute(
            f"SELECT count(*) FROM sqlite_master WHERE name IN {names}").fetchone()  # fmt: skip
        return bool(found[0] == 2)

    def pending_count(self) -> int:
        return int(self._connection.execute("SELECT count(*) FROM search_pending").fetchone()[0])

    def catch_up(self) -> int:
        self._connection.execute("BEGIN IMMEDIATE")
        try:
            done = segments.catch_up(_Writer(self._connection))
            self._connection.execute("COMMIT")
        except BaseException:
            self._connection.execute("ROLLBACK")
            raise
        return done

    def catch_up_on_snapshot(self, build: segments.Builder) -> int | None:
        """``catch_up`` with its reads and build, nearly all of its CPU, run by ``build`` (in
        a thread at idle priority, say: the background warmer) on a read snapshot, holding
        no lock; the writes follow on that snapshot. How many pages the log named; None if
        another connection has written since the snapshot began: SQLite refuses a stale
        snapshot's writes, and nothing of it is kept. None too, with nothing done, for a
        database not in WAL mode, where a reader holds writers off."""
        mode = self._connection.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":  # a rollback journal: the reads would block writers
            return None
        writer = _Writer(self._connection)
        self._connection.execute("BEGIN DEFERRED")
        try:
            planned = build(lambda: segments.plan(writer))
            segments.apply(writer, planned)  # the first write: refused on a stale snapshot
            self._connection.execute("COMMIT")
        except BaseException as exc:
            if self._connection.in_transaction:  # not if SQLite ended it (it may, on errors)
                self._connection.execute("ROLLBACK")
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if isinstance(exc, sqlite3.OperationalError) and code == sqlite3.SQLITE_BUSY:
                return None
            raise
        return len(planned.ids)

    def load(self) -> list[segments.Segment]:
        return [segments.segment_of(row) for row in self._connection.execute(
            "SELECT id, docs, lengths, removed, terms, df, starts FROM search_segments"
            " ORDER BY id")]  # fmt: skip

    def read(self, ranges: list[tuple[int, int, int]]) -> list[bytes]:
        """A blob handle stays open per segment: SQLite finds an offset in a large blob by
        walking its overflow pages, once per handle (a fresh handle a read cost ~7 ms on a
        58 MB blob, a kept one ~0.03 ms)."""
        out = []
        for segment, start, end in ranges:
            if end <= start:
                out.append(b"")
                continue
            blob = self._blobs.get(segment)
            if blob is None:
                try:
                    blob = self._connection.blobopen("search_segments", "postings", segment,
                                                     readonly=True)  # fmt: skip
                except sqlite3.OperationalError as exc:
                    raise LookupError(f"search segment {segment} is gone") from exc
                self._blobs[segment] = blob
            blob.seek(start)
            out.append(blob.read(end - start))
        return out

    def token_rows(self) -> list[segments.TokenRow]:
        return self._connection.execute(
            "SELECT id, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id").fetchall()  # fmt: skip

    def titles_urls(self, page_ids: list[int]) -> dict[int, tuple[str, str | None]]:
        found: dict[int, tuple[str, str | None]] = {}
        for start in range(0, len(page_ids), _READ_CHUNK):
            chunk = page_ids[start : start + _READ_CHUNK]
            marks = ",".join("?" * len(chunk))
            for page_id, url, title in self._connection.execute(
                f"SELECT id, url, title FROM pages WHERE id IN ({marks})", chunk
            ):
                found[page_id] = (url, title)
        return found

    def close(self) -> None:
        for blob in self._blobs.values():
            blob.close()
        self._blobs.clear()
        self._connection.close()


class _Writer:
    """``segments.Writer`` inside ``BEGIN IMMEDIATE``: no other writer runs meanwhile."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def take_pending(self) -> list[int]:
        return [row[0] for row in self._connection.execute(
            "SELECT page_id FROM search_pending ORDER BY page_id")]  # fmt: skip

    def counts(self) -> tuple[int, int]:
        found = self._connection.execute(
            "SELECT (SELECT count(*) FROM search_segments),"
            " (SELECT count(*) FROM pages WHERE tokens IS NOT NULL)").fetchone()  # fmt: skip
        return int(found[0]), int(found[1])

    def clear_segments(self) -> None:
        self._connection.execute("DELETE FROM search_segments")

    def rows_of(self, page_ids: list[int]) -> list[segments.TokenRow]:
        rows: list[segments.TokenRow] = []
        for start in range(0, len(page_ids), _READ_CHUNK):
            chunk = page_ids[start : start + _READ_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows += self._connection.execute(
                f"SELECT id, tokens FROM pages WHERE id IN ({marks}) AND tokens IS NOT NULL"
                " ORDER BY id",
                chunk,
            ).fetchall()
        return rows

    def all_rows(self) -> sqlite3.Cursor:
        return self._connection.execute(
            "SELECT id, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id")  # fmt: skip

    def insert(self, columns: segments.Columns) -> None:
        self._connection.execute(
            f"INSERT INTO search_segments ({segments.COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            columns,
        )

    def clear_pending(self) -> None:
        self._connection.execute("DELETE FROM search_pending")
