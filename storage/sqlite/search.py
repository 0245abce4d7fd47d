"""The search index's tables in a SQLite crawl database: segments of postings, and the log
of pages to index (``search_pending``, kept by triggers: migration 3, ``storage.schema``).

``catch_up`` indexes what the log names, in one write transaction: the pages' token blobs
become a new segment (``parsers.postings.build``; one a CPU for many pages), the log is
emptied; past ``MAX_SEGMENTS`` segments, or when the log names most pages, every live page
is built anew (a merge: dead postings go).
A page's postings count only in the newest segment that names it, in its ``docs`` (live
there) or its ``removed`` (gone: no tokens any more, a duplicate, deleted).

``load`` reads each segment's small arrays (documents, lengths, terms, offsets); postings
are read by byte range from the blob (``Postings``), the query's terms only.
"""

from __future__ import annotations

import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from parsers.postings import build, unpack_blobs
from storage.base import StoreError
from storage.schema import LATEST_VERSION, MIGRATIONS_TABLE, pending, split_statements

MAX_SEGMENTS = 8
"""More segments than this are merged (each query reads every segment's runs)."""
PARALLEL_PAGES = 20_000
"""A catch-up of this many pages or more builds one segment a CPU, in parallel."""
_READ_CHUNK = 2000


@dataclass(frozen=True, slots=True, eq=False)
class Segment:
    """One segment's arrays (postings stay in the database)."""

    id: int
    docs: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.uint32]
    removed: npt.NDArray[np.int64]
    terms: npt.NDArray[np.uint32]
    df: npt.NDArray[np.uint32]
    starts: npt.NDArray[np.int64]

    @property
    def postings_bytes(self) -> int:
        return int(self.starts[-1]) if self.starts.size else 0


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
            connection = sqlite3.connect(path, isolation_level=None, timeout=30)
            connection.execute("PRAGMA busy_timeout=30000")
            _migrate(connection)
        else:
            connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        connection.execute("SELECT 1 FROM pages LIMIT 1")
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: not a crawl database ({exc})") from exc
    return connection, writable


def _migrate(connection: sqlite3.Connection) -> None:
    connection.execute(MIGRATIONS_TABLE)
    applied = {row[0] for row in connection.execute("SELECT version FROM schema_migrations")}
    if not applied:
        return  # not made by a crawl (or empty): the store's first open migrates it
    if max(applied) > LATEST_VERSION:
        raise StoreError(f"database schema version {max(applied)} is newer than this crawler")
    for migration in pending(applied):
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in split_statements(migration.sql):
                connection.execute(statement)
            connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")


def has_index(connection: sqlite3.Connection) -> bool:
    return (
        connection.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('search_segments', 'search_pending')"
        ).fetchone()[0]
        == 2
    )


def pending_count(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT count(*) FROM search_pending").fetchone()[0])


def catch_up(connection: sqlite3.Connection) -> int:
    """Index the pages the log names (and merge, past ``MAX_SEGMENTS``); how many pages
    the new segment holds or removes. One write transaction: a crawl writing meanwhile waits
    (its busy timeout), and nothing it writes is missed."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        ids = [row[0] for row in connection.execute(
            "SELECT page_id FROM search_pending ORDER BY page_id")]  # fmt: skip
        if not ids:
            connection.execute("COMMIT")
            return 0
        segments = connection.execute("SELECT count(*) FROM search_segments").fetchone()[0]
        pages = segments_pages(connection)
        if segments >= MAX_SEGMENTS or len(ids) * 2 > pages:
            # a merge, or most pages new: every live page anew, in one scan of the table
            connection.execute("DELETE FROM search_segments")
            present = _rebuild(connection, pages)
        else:
            present = _write_segments(connection, _tokens_of(connection, ids))
        removed = [page_id for page_id in ids if page_id not in present]
        if removed:
            _insert(connection, ([], [], [], [], [], np.empty(0, np.uint8)), removed)
        connection.execute("DELETE FROM search_pending")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return len(ids)


def segments_pages(connection: sqlite3.Connection) -> int:
    """How many pages have tokens (a count that reads no blob)."""
    return int(connection.execute("SELECT count(*) FROM pages WHERE tokens IS NOT NULL")
               .fetchone()[0])  # fmt: skip


def token_rows(connection: sqlite3.Connection) -> list[tuple[int, bytes]]:
    """(page id, token blob) of every page with tokens, by page id."""
    return connection.execute(
        "SELECT id, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id").fetchall()  # fmt: skip


def _tokens_of(connection: sqlite3.Connection, ids: list[int]) -> list[tuple[int, bytes]]:
    rows: list[tuple[int, bytes]] = []
    for start in range(0, len(ids), _READ_CHUNK):
        chunk = ids[start : start + _READ_CHUNK]
        marks = ",".join("?" * len(chunk))
        rows += connection.execute(
            f"SELECT id, tokens FROM pages WHERE id IN ({marks}) AND tokens IS NOT NULL"
            " ORDER BY id",
            chunk,
        ).fetchall()
    return rows


def _parts(pages: int) -> int:
    return 1 if pages < PARALLEL_PAGES else min(os.cpu_count() or 1, 8)


def _write_segments(connection: sqlite3.Connection, rows: list[tuple[int, bytes]]) -> set[int]:
    """``rows`` as segments: one, or past ``PARALLEL_PAGES`` one a CPU, built in parallel
    (the kernels run without the GIL); the page ids written."""
    size = max(1, -(-len(rows) // _parts(len(rows))))
    chunks = [rows[start : start + size] for start in range(0, len(rows), size)] or [[]]
    with ThreadPoolExecutor(len(chunks)) as pool:
        return _inserted(connection, [pool.submit(_built, chunk) for chunk in chunks])


def _rebuild(connection: sqlite3.Connection, pages: int) -> set[int]:
    """Every page with tokens as segments, one a CPU past ``PARALLEL_PAGES``: each part is
    built (without the GIL) while the next is read. One reader: two connections reading
    at once measured 1.7x slower (they contend for the GIL)."""
    rows = connection.execute(
        "SELECT id, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id")  # fmt: skip
    size = max(1, -(-pages // _parts(pages)))
    with ThreadPoolExecutor(_parts(pages)) as pool:
        futures: list[Any] = []
        while True:
            chunk = rows.fetchmany(size)
            if chunk or not futures:
                futures.append(pool.submit(_built, chunk))
            if len(chunk) < size:
                break
        return _inserted(connection, futures)


def _inserted(connection: sqlite3.Connection, futures: list[Any]) -> set[int]:
    """Insert each built segment as it comes (in order); the page ids written."""
    present: set[int] = set()
    for future in futures:
        built = future.result()
        present.update(built[0].tolist())
        if built[0].size:
            _insert(connection, built, [])
    return present


def _insert(connection: sqlite3.Connection, built: tuple[Any, ...], removed: list[int]) -> None:
    docs, lengths, terms, df, starts, postings = (np.asarray(a) for a in built)
    connection.execute(
        "INSERT INTO search_segments (docs, lengths, removed, terms, df, starts, postings,"
        " built_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (docs.astype("<i8").tobytes(), lengths.astype("<u4").tobytes(),
         np.asarray(removed, dtype="<i8").tobytes(), terms.astype("<u4").tobytes(),
         df.astype("<u4").tobytes(), starts.astype("<i8").tobytes(),
         np.ascontiguousarray(postings, dtype=np.uint8).data, datetime.now(UTC).isoformat()),
    )  # fmt: skip


def _built(rows: list[tuple[int, bytes]]) -> tuple[Any, ...]:
    docs = np.fromiter((page_id for page_id, _ in rows), dtype=np.int64, count=len(rows))
    try:
        ids, counts, offsets, lengths = unpack_blobs([blob for _, blob in rows])
    except ValueError as exc:
        raise StoreError(f"cannot index pages.tokens: {exc}") from exc
    terms, df, starts, postings = build(ids, counts, offsets, overwrite=True)
    return docs, lengths, terms, df, starts, postings


def load(connection: sqlite3.Connection) -> list[Segment]:
    """Every segment's arrays, oldest first."""
    segments = []
    for row in connection.execute(
        "SELECT id, docs, lengths, removed, terms, df, starts FROM search_segments ORDER BY id"
    ):
        segment_id, docs, lengths, removed, terms, df, starts = row
        segments.append(Segment(
            segment_id, np.frombuffer(docs, "<i8").astype(np.int64),
            np.frombuffer(lengths, "<u4").astype(np.uint32),
            np.frombuffer(removed, "<i8").astype(np.int64),
            np.frombuffer(terms, "<u4").astype(np.uint32),
            np.frombuffer(df, "<u4").astype(np.uint32),
            np.frombuffer(starts, "<i8").astype(np.int64),
        ))  # fmt: skip
    return segments


class Postings:
    """Byte ranges of segments' postings, read in place. A blob handle stays open per
    segment: SQLite finds an offset in a large blob by walking its overflow pages, once per
    handle (a fresh handle a read cost ~7 ms on a 58 MB blob, a kept one ~0.03 ms)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._blobs: dict[int, sqlite3.Blob] = {}

    def read(self, segment: int, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of segment ``segment``'s postings."""
        if end <= start:
            return b""
        blob = self._blobs.get(segment)
        if blob is None:
            blob = self._connection.blobopen("search_segments", "postings", segment,
                                             readonly=True)  # fmt: skip
            self._blobs[segment] = blob
        blob.seek(start)
        return blob.read(end - start)

    def close(self) -> None:
        for blob in self._blobs.values():
            blob.close()
        self._blobs.clear()


def titles_urls(
    connection: sqlite3.Connection, page_ids: list[int]
) -> dict[int, tuple[str, str | None]]:
    """(url, title) of each page id."""
    found: dict[int, tuple[str, str | None]] = {}
    for start in range(0, len(page_ids), _READ_CHUNK):
        chunk = page_ids[start : start + _READ_CHUNK]
        marks = ",".join("?" * len(chunk))
        for page_id, url, title in connection.execute(
            f"SELECT id, url, title FROM pages WHERE id IN ({marks})", chunk
        ):
            found[page_id] = (url, title)
    return found
