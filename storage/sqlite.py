"""SQLiteStore: the embedded default store (aiosqlite, WAL, one writer, batched transactions).

Owns: the connection to one SQLite file. Invariants:
- one connection, used by one writer; every batch of pages is one transaction
  (``executemany``, a handful of thread hops per batch, never one await per page);
- WAL with ``synchronous=NORMAL``: every committed transaction survives ``kill -9``;
- migrations are applied on open, each in a transaction with its ``schema_migrations`` row.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime

import aiosqlite

from storage.base import PageRecord, RobotsRecord, RunSummary, SkipRecord, StoreError
from storage.schema import LATEST_VERSION, MIGRATIONS_TABLE, pending, split_statements

_UPSERT_PAGE = """
INSERT INTO pages (url, final_url, status, error, content_type, title, text, lang, canonical,
                   meta_robots, depth, body_bytes, content_hash, fetched_at, run_id, outlinks,
                   attempts, duplicate_of, score, tokens, simhash, near_duplicate_of)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (url) DO UPDATE SET
    final_url = excluded.final_url, status = excluded.status, error = excluded.error,
    content_type = excluded.content_type, title = excluded.title, text = excluded.text,
    lang = excluded.lang, canonical = excluded.canonical, meta_robots = excluded.meta_robots,
    depth = MIN(pages.depth, excluded.depth), body_bytes = excluded.body_bytes,
    content_hash = excluded.content_hash, fetched_at = excluded.fetched_at,
    run_id = excluded.run_id, outlinks = excluded.outlinks, attempts = excluded.attempts,
    duplicate_of = excluded.duplicate_of, score = excluded.score, tokens = excluded.tokens,
    simhash = excluded.simhash, near_duplicate_of = excluded.near_duplicate_of
"""
_UPSERT_SKIP = """
INSERT INTO skipped (url, reason, depth, decided_at, run_id) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (url) DO UPDATE SET reason = excluded.reason, decided_at = excluded.decided_at,
    run_id = excluded.run_id
"""


def _page_row(record: PageRecord, run_id: int) -> tuple[object, ...]:
    return (
        record.url, record.final_url, record.status, record.error, record.content_type,
        record.title, record.text, record.lang, record.canonical, record.meta_robots,
        record.depth, record.body_bytes, record.content_hash, record.fetched_at, run_id,
        record.links_json, record.attempts, record.duplicate_of, record.score, record.tokens,
        _signed64(record.simhash), record.near_duplicate_of,
    )  # fmt: skip


def _signed64(value: int | None) -> int | None:
    """SQLite integers are signed 64-bit: store an unsigned hash as the same bits."""
    if value is None:
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


async def _migrate(db: aiosqlite.Connection) -> None:
    """Bring the database to the latest schema, one transaction per migration."""
    await db.execute(MIGRATIONS_TABLE)
    async with db.execute("SELECT version FROM schema_migrations") as cursor:
        applied = {row[0] async for row in cursor}
    if applied and max(applied) > LATEST_VERSION:
        raise StoreError(
            f"database schema version {max(applied)} is newer than this crawler "
            f"({LATEST_VERSION}); upgrade the crawler"
        )
    for migration in pending(applied):
        await db.execute("BEGIN IMMEDIATE")
        try:
            for statement in split_statements(migration.sql):
                await db.execute(statement)
            await db.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
        except BaseException:
            await db.execute("ROLLBACK")
            raise
        await db.execute("COMMIT")


def _check_location(path: str) -> None:
    """Refuse early, with a clear message, a path whose folder is missing or read-only.

    (Also sidesteps an aiosqlite flaw: a failed connect leaves its thread calling back into
    the event loop after it closed.)
    """
    if path == ":memory:" or path.startswith("file:"):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise StoreError(f"{path}: cannot open database: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise StoreError(f"{path}: cannot open database: not writable")


class SQLiteStore:
    """A ``Store`` on one SQLite file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError(f"{self.path}: store is not open")
        return self._db

    async def open(self) -> None:
        _check_location(self.path)
        try:
            self._db = await aiosqlite.connect(self.path, isolation_level=None)
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute("PRAGMA synchronous=NORMAL")
            await self._db.execute("PRAGMA busy_timeout=10000")
            await self._db.execute("PRAGMA foreign_keys=ON")
            await _migrate(self._db)
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreError(f"{self.path}: cannot open database: {exc}") from exc

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def start_run(self, seeds: int, settings_json: str, started_at: str) -> int:
        """Record a new run. Runs still marked ``running`` belong to processes that died
        (the caller holds the run lock): they are closed as ``interrupted``."""
        try:
            await self.db.execute(
                "UPDATE runs SET status = 'interrupted', reason = 'process died', "
                "ended_at = ? WHERE status = 'running'",
                (started_at,),
            )
            cursor = await self.db.execute(
                "INSERT INTO runs (started_at, status, seeds, settings) "
                "VALUES (?, 'running', ?, ?)",
                (started_at, seeds, settings_json),
            )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot record the run: {exc}") from exc
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    async def save(self, pages: list[PageRecord], skips: list[SkipRecord], run_id: int) -> None:
        if not pages and not skips:
            return
        db = self.db
        try:
            await db.execute("BEGIN")
            try:
                if pages:
                    await db.executemany(_UPSERT_PAGE, [_page_row(r, run_id) for r in pages])
                if skips:
                    await db.executemany(
                        _UPSERT_SKIP,
                        [(s.url, s.reason, s.depth, s.decided_at, run_id) for s in skips],
                    )
            except BaseException:
                await db.execute("ROLLBACK")
                raise
            await db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot write {len(pages)} pages: {exc}") from exc

    async def get_robots(self, origin: str) -> RobotsRecord | None:
        try:
            async with self.db.execute(
                "SELECT status, body, fetched_at FROM robots WHERE origin = ?", (origin,)
            ) as cursor:
                row = await cursor.fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read robots.txt cache: {exc}") from exc
        return RobotsRecord(origin, row[0], row[1], row[2]) if row is not None else None

    async def put_robots(self, record: RobotsRecord) -> None:
        try:
            await self.db.execute(
                "INSERT INTO robots (origin, status, body, fetched_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (origin) DO UPDATE SET status = excluded.status, "
                "body = excluded.body, fetched_at = excluded.fetched_at",
                (record.origin, record.status, record.body, record.fetched_at),
            )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot cache robots.txt: {exc}") from exc

    async def finish_run(self, run_id: int, summary: RunSummary, ended_at: str) -> None:
        try:
            await self.db.execute(
                "UPDATE runs SET ended_at = ?, status = ?, reason = ?, pages_ok = ?, "
                "pages_failed = ?, bytes = ? WHERE id = ?",
                (ended_at, summary.status, summary.reason, summary.pages_ok,
                 summary.pages_failed, summary.bytes, run_id),
            )  # fmt: skip
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot record the end of the run: {exc}") from exc
