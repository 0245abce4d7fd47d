"""The read side of a SQLite crawl database: the ``Reader`` that exports, WARC, ``crawl
runs``, ``rank`` and ``crawl stats`` use.

Owns: read-only access to a SQLite file (``connect_readonly``) and the queries those
readers run. Invariants: every connection is opened read-only (``mode=ro``), so a reader
runs while a crawl writes and never changes the file; each call opens its own connection
and closes it before it returns (a generator: once exhausted or closed); rows are streamed
in chunks, and stored bodies read one at a time.
"""

from __future__ import annotations

import os
import pathlib
import sqlite3
from collections.abc import Generator
from datetime import UTC, datetime

from storage.base import STORED_COLUMNS, ExportFilter, StoreError

_CHUNK = 500
"""Rows fetched at a time."""
_STORED = f"SELECT {', '.join(STORED_COLUMNS)} FROM pages WHERE id = ?"


def read_only_uri(path: str) -> str:
    """The ``mode=ro`` URI of the file at ``path``, percent-encoded: a path with ``?``,
    ``#`` or ``%`` in it would otherwise name another file (and create it)."""
    return pathlib.Path(path).absolute().as_uri() + "?mode=ro"


def connect_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection to the crawl database at ``path``; ``StoreError`` if there is
    no such file or it is not a crawl database."""
    if not os.path.exists(path):
        raise StoreError(f"{path}: no such database")
    try:
        return _connect(read_only_uri(path))
    except sqlite3.Error as exc:
        if not _on_read_only_disk(path, exc):
            raise StoreError(f"{path}: not a crawl database ({exc})") from exc
    # A WAL database whose folder cannot be written (a read-only mount, a backup): SQLite
    # cannot make the -shm file a reader needs. With no WAL left over (a crawl that ended
    # checkpointed and removed it) the file alone is the database: read it as immutable.
    try:
        return _connect(read_only_uri(path) + "&immutable=1")
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: not a crawl database ({exc})") from exc


def _connect(uri: str) -> sqlite3.Connection:
    connection = sqlite3.connect(uri, uri=True)
    try:
        connection.execute("SELECT 1 FROM pages LIMIT 1")
    except BaseException:
        connection.close()
        raise
    return connection


def _on_read_only_disk(path: str, exc: sqlite3.Error) -> bool:
    """Whether opening ``path`` failed for its read-only folder, with no WAL to replay."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    folder = os.path.dirname(os.path.abspath(path))
    wal = f"{path}-wal"
    left_over = os.path.exists(wal) and os.path.getsize(wal) > 0
    return code in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY) and not (
        os.access(folder, os.W_OK) or left_over
    )


class SQLiteReader:
    """A ``Reader`` of the SQLite file at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = path

    def iter_rows(
        self, columns: tuple[str, ...], selection: ExportFilter
    ) -> Generator[tuple[object, ...], None, None]:
        connection = connect_readonly(self.path)
        where, params = selection.where()
        try:
            cursor = connection.execute(
                f"SELECT {', '.join(columns)} FROM pages{where} ORDER BY id", params
            )
            while rows := cursor.fetchmany(_CHUNK):
                yield from rows
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read pages: {exc}") from exc
        finally:
            connection.close()

    def iter_stored(
        self, selection: ExportFilter
    ) -> Generator[tuple[object, ...] | None, None, None]:
        """Only ids are read in chunks; each body is read alone, with its headers."""
        connection: sqlite3.Connection | None = None
        try:
            for page_id, has_body in self.iter_rows(("id", "body IS NOT NULL"), selection):
                if not has_body:
                    yield None
                    continue
                if connection is None:
                    connection = connect_readonly(self.path)
                yield connection.execute(_STORED, (page_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read pages: {exc}") from exc
        finally:
            if connection is not None:
                connection.close()

    def read_runs(self) -> list[tuple[object, ...]]:
        connection = connect_readonly(self.path)
        try:
            columns = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
            unchanged = "pages_unchanged" if "pages_unchanged" in columns else "0"  # schema 1
            harvest = "harvest" if "harvest" in columns else "NULL"  # before schema 4
            return connection.execute(
                "SELECT id, started_at, ended_at, status, reason, pages_ok, pages_failed, "
                f"{unchanged}, bytes, {harvest} "
                "FROM runs ORDER BY id"
            ).fetchall()
        finally:
            connection.close()

    def read_tokens(self) -> list[tuple[str, str | None, bytes]]:
        connection = connect_readonly(self.path)
        try:
            return connection.execute(
                "SELECT url, title, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id"
            ).fetchall()
        finally:
            connection.close()

    def read_stats(self, now: float) -> dict[str, object]:
        path = self.path
        connection = connect_readonly(path)
        try:

            def one(sql: str, *args: object) -> int:
                return connection.execute(sql, args).fetchone()[0]  # type: ignore[no-any-return]

            version = one("SELECT max(version) FROM schema_migrations")
            if version < 2:
                raise StoreError(f"{path}: schema version {version}: run a crawl on it to upgrade")
            urls = dict(connection.execute("SELECT state, count(*) FROM urls GROUP BY state"))
            by_status = {
                ("none" if status is None else str(status)): count
                for status, count in connection.execute(
                    "SELECT status, count(*) FROM pages GROUP BY status ORDER BY status"
                )
            }
            skipped = dict(
                connection.execute(
                    "SELECT reason, count(*) FROM urls WHERE state = 'skipped' GROUP BY reason "
                    "ORDER BY count(*) DESC"
                )
            )
            next_due = one("SELECT min(next_fetch_at) FROM urls WHERE state IN ('done', 'failed')")
            last = connection.execute(
                "SELECT id, started_at, status, reason FROM runs ORDER BY id DESC LIMIT 1"
            ).fetchone()
            return {
                "db": path,
                "size_bytes": _size(path),
                "schema_version": version,
                "urls": urls,
                "due": one(
                    "SELECT count(*) FROM urls WHERE state IN ('done', 'failed') "
                    "AND next_fetch_at <= ?",
                    now,
                )
                + urls.get("queued", 0),
                "next_due": _iso(next_due),
                "pages": one("SELECT count(*) FROM pages"),
                "pages_with_text": one("SELECT count(*) FROM pages WHERE text IS NOT NULL"),
                "duplicates": one(
                    "SELECT count(*) FROM pages WHERE duplicate_of IS NOT NULL "
                    "OR near_duplicate_of IS NOT NULL"
                ),
                "changed": one("SELECT count(*) FROM pages WHERE previous_hash IS NOT NULL"),
                "by_status": by_status,
                "skipped": skipped,
                "hosts": one("SELECT count(DISTINCT origin) FROM urls WHERE state != 'skipped'"),
                "runs": one("SELECT count(*) FROM runs"),
                "last_run": f"#{last[0]} {last[1]} {last[2]} ({last[3] or '-'})" if last else None,
            }
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: cannot read statistics: {exc}") from exc
        finally:
            connection.close()


def _size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds")
