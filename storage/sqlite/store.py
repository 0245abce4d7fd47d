"""SQLiteStore: the embedded default store (aiosqlite, WAL, one writer, batched transactions).

Owns: the connection to one SQLite file, its settings and its transactions (the statements
are ``storage.sqlite.sql``'s). Invariants:
- one connection, used by one writer; every batch of pages is one transaction
  (a handful of thread hops per batch, never one await per page), its rows written by
  multi-row statements (``storage.sqlite.sql.Rows``), not one statement step per row;
- WAL with ``synchronous=NORMAL``: every committed transaction survives ``kill -9``;
- migrations are applied on open, each in a transaction with its ``schema_migrations`` row.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator

import aiosqlite

from parsers.links import url_origin
from storage.base import (
    PageRecord,
    QueuedUrl,
    RobotsRecord,
    RunSample,
    RunSummary,
    SkipRecord,
    StoreError,
    StoreRefused,
    UrlRecord,
)
from storage.schema import DEAD_RUN_COUNTS
from storage.sqlite.migrate import prepare
from storage.sqlite.sql import (
    ADD_SAMPLE,
    CLAIM,
    FETCHED_URL,
    NEW_URL,
    SEED_URL,
    SKIPPED_URL,
    UPSERT_PAGE,
    fetched_url_row,
    page_row,
    touch_statements,
)

_ONE_HOP = True
"""Run a transaction in one hop (``_in_transaction``); off, one hop per statement (the
tests compare the two)."""
_IDS_PER_UPDATE = 998
"""Ids in one ``UPDATE ... WHERE id IN (...)``: with the lease, 999 parameters at most."""
STATEMENT_CACHE = 32
"""Prepared statements the store's connection keeps (``sqlite3.connect``'s default: 128)."""


def _in_transaction(
    connection: sqlite3.Connection,
    statements: list[tuple[str, list[tuple]]],
    unbind: list[tuple[str, tuple]] = (),  # type: ignore[assignment]
) -> None:
    """In the connection's thread: ``executemany`` of each (sql, rows), in one transaction.

    One hop for the whole batch: each ``await`` of an aiosqlite call is a round trip between
    the event loop's thread and the connection's, and either may wait for the GIL. Run by
    ``aiosqlite.Connection._execute`` (the queue its public methods use; private, but in
    every aiosqlite release this project allows, and ``open`` needs it too)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for sql, rows in statements:
            if rows:
                connection.executemany(sql, rows)
        if unbind:
            _unbind(connection, unbind)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _unbind(connection: sqlite3.Connection, unbind: list[tuple[str, tuple]]) -> None:
    """Run each (sql, NULLs) of ``Rows.unbinding`` in a savepoint rolled back whatever
    happens: its only effect is that the cached statement holds NULLs instead of the
    values it last bound. (A page upsert stops at its first row, whose NULL url fails
    NOT NULL; nothing of it would be kept in any case.)"""
    connection.execute("SAVEPOINT unbind")
    try:
        for sql, nulls in unbind:
            with contextlib.suppress(sqlite3.DatabaseError):
                connection.execute(sql, nulls)
    finally:
        connection.execute("ROLLBACK TO unbind")
        connection.execute("RELEASE unbind")


def check_location(path: str) -> None:
    """Refuse early, with a clear message (``StoreRefused``), an empty path, a folder, or a
    path whose folder is missing or read-only: before a crawl takes its lock beside it.

    (Also sidesteps an aiosqlite flaw: a failed connect leaves its thread calling back into
    the event loop after it closed.)
    """
    if path == ":memory:" or path.startswith("file:"):
        return
    if not path.strip():
        raise StoreRefused("--db: an empty name (a file name or a PostgreSQL DSN is needed)")
    if os.path.isdir(path):
        raise StoreRefused(f"{path}: cannot open database: it is a folder")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise StoreRefused(f"{path}: cannot open database: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise StoreRefused(f"{path}: cannot open database: not writable")


def _not_sqlite(exc: BaseException) -> bool:
    """Whether opening failed because the file is not a SQLite database (or not one SQLite
    can open at all): the input's fault, not the disk's."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CANTOPEN)


class SQLiteStore:
    """A ``Store`` on one SQLite file. Its operations are serialised (one at a time), so a
    transaction's statements never interleave with another task's."""

    exclusive = True
    """The run lock makes one process the owner of the whole frontier."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError(f"{self.path}: store is not open")
        return self._db

    async def open(self) -> None:
        check_location(self.path)
        try:
            # A prepared statement of a hundred rows' VALUES is ~90 KB of SQLite's memory, and
            # each batch's last chunk has a size of its own: the default cache of 128
            # statements grew to ~12 MB of them at a million URLs. Those used every batch
            # (the full chunks, the crawl's own queries) stay cached in 32.
            self._db = await aiosqlite.connect(
                self.path, isolation_level=None, cached_statements=STATEMENT_CACHE
            )
            # the settings and the schema in one hop to the connection's thread (see there),
            # through aiosqlite's own queue (private, in every release this project allows)
            await self._db._execute(prepare, self._db._conn, self.path)
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            error = StoreRefused if _not_sqlite(exc) else StoreError
            raise error(f"{self.path}: cannot open database: {exc}") from exc
        except StoreRefused:
            await self.close()
            raise

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def _transaction(
        self,
        what: str,
        statements: list[tuple[str, list[tuple]]],
        unbind: list[tuple[str, tuple]] = (),  # type: ignore[assignment]
    ) -> None:
        """Run ``executemany`` of each (sql, rows) in one transaction, in one hop to the
        connection's thread (``_in_transaction``); then ``unbind`` (``_unbind``)."""
        db = self.db
        async with self._lock:
            try:
                if _ONE_HOP:  # aiosqlite's own queue, as ``open`` uses it
                    await db._execute(_in_transaction, db._conn, statements, unbind)
                else:  # one hop per statement, through the public calls (the tests' check)
                    await db.execute("BEGIN IMMEDIATE")
                    try:
                        for sql, rows in statements:
                            if rows:
                                await db.executemany(sql, rows)
                        if unbind:
                            await db.execute("SAVEPOINT unbind")
                            for sql, nulls in unbind:
                                with contextlib.suppress(sqlite3.DatabaseError):
                                    await db.execute(sql, nulls)
                            await db.execute("ROLLBACK TO unbind")
                            await db.execute("RELEASE unbind")
                    except BaseException:
                        await db.execute("ROLLBACK")
                        raise
                    await db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot {what}: {exc}") from exc

    async def start_run(self, seeds: int, settings_json: str, started_at: str) -> int:
        """Record a new run. Runs still marked ``running`` belong to processes that died
        (the caller holds the run lock): they are closed as ``interrupted``."""
        async with self._lock:
            try:
                await self.db.execute(
                    "UPDATE runs SET status = 'interrupted', reason = 'process died', "
                    f"ended_at = ?, {DEAD_RUN_COUNTS} WHERE status = 'running'",
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

    async def open_frontier(
        self, run_id: int, seeds: list[str], now: float, found_at: str, max_interval_s: float
    ) -> int:
        await self._transaction(
            "prepare the frontier",
            [
                # the caller holds the run lock: every lease left belongs to a dead run
                ("UPDATE urls SET lease = NULL WHERE lease IS NOT NULL", [()]),
                (
                    "UPDATE urls SET state = 'queued', updated_at = ?, run_id = ? "
                    "WHERE state IN ('done', 'failed') AND (next_fetch_at <= ? "
                    "OR next_fetch_at - interval_s + ? <= ?)",
                    [(found_at, run_id, now, max_interval_s, now)],
                ),
                (SEED_URL, [(url, url_origin(url), found_at, run_id) for url in seeds]),
            ],
        )
        return await self._count(
            "SELECT count(*) FROM urls WHERE state = 'queued' AND lease IS NULL"
        )

    async def _count(self, sql: str) -> int:
        """A ``count(*)`` over the frontier."""
        async with self._lock:
            try:
                async with self.db.execute(sql) as cursor:
                    row = await cursor.fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot read the frontier: {exc}") from exc
        return int(row[0]) if row is not None else 0

    async def known_urls(self) -> AsyncIterator[str]:
        async with self._lock:
            try:
                async with self.db.execute("SELECT url FROM urls") as cursor:
                    while rows := await cursor.fetchmany(20_000):
                        for (url,) in rows:
                            yield url
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot read the frontier: {exc}") from exc

    async def claim(self, run_id: int, limit: int, now: float) -> list[QueuedUrl]:
        db = self.db
        async with self._lock:
            try:
                await db.execute("BEGIN IMMEDIATE")
                try:
                    async with db.execute(CLAIM, (limit,)) as cursor:
                        rows = list(await cursor.fetchall())
                    ids = [r[0] for r in rows]
                    for start in range(0, len(ids), _IDS_PER_UPDATE):  # not a step per row
                        chunk = ids[start : start + _IDS_PER_UPDATE]
                        marks = ", ".join("?" * len(chunk))
                        await db.execute(
                            f"UPDATE urls SET lease = ? WHERE id IN ({marks})", (run_id, *chunk)
                        )
                except BaseException:
                    await db.execute("ROLLBACK")
                    raise
                await db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot claim queued URLs: {exc}") from exc
        return [QueuedUrl(r[1], r[2], r[3], r[5], r[6], r[7], r[4]) for r in rows]

    async def outstanding(self) -> int:
        return await self._count("SELECT count(*) FROM urls WHERE state = 'queued'")

    async def heartbeat(self, run_id: int, now: float) -> None:
        """Nothing to renew: the run lock makes this process the only one."""

    async def save(
        self,
        pages: list[PageRecord],
        urls: list[UrlRecord],
        skips: list[SkipRecord],
        run_id: int,
    ) -> None:
        if not pages and not urls and not skips:
            return
        fresh = [page_row(r, run_id) for r in pages if not r.unchanged]
        touched = [
            (r.fetched_at, run_id, r.attempts, r.etag, r.last_modified, r.url)
            for r in pages
            if r.unchanged
        ]
        new_urls = [
            (u.url, url_origin(u.url), run_id if u.leased else None, u.depth, u.priority,
             u.found_at, run_id)
            for u in urls
        ]  # fmt: skip
        urls.clear()  # the store's now (``Store.save``): not held through the write
        skipped = [
            (s.url, url_origin(s.url), s.depth or 0, s.reason, s.decided_at, run_id) for s in skips
        ]
        page_statements = UPSERT_PAGE.statements(fresh)
        statements = [
            *NEW_URL.statements(new_urls),
            *page_statements,
            *touch_statements(touched),
            *FETCHED_URL.statements([fetched_url_row(r, run_id) for r in pages]),
            *SKIPPED_URL.statements(skipped),
        ]
        # The statements hold the values flattened: neither the records nor the rows need to
        # be kept through the write, which may be long (a bound counts its URLs as held).
        del fresh, touched, new_urls, skipped
        await self._transaction(
            f"write {len(pages)} pages", statements, UPSERT_PAGE.unbinding(page_statements)
        )

    async def add_sample(self, run_id: int, sample: RunSample) -> None:
        row = (run_id, sample.at, sample.elapsed_s, sample.done, sample.failed, sample.queued,
               sample.in_flight, sample.bytes)  # fmt: skip
        await self._transaction("record a progress sample", [(ADD_SAMPLE, [row])])

    async def get_robots(self, origin: str) -> RobotsRecord | None:
        async with self._lock:
            try:
                async with self.db.execute(
                    "SELECT status, body, fetched_at FROM robots WHERE origin = ?", (origin,)
                ) as cursor:
                    row = await cursor.fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot read robots.txt cache: {exc}") from exc
        return RobotsRecord(origin, row[0], row[1], row[2]) if row is not None else None

    async def put_robots(self, record: RobotsRecord) -> None:
        async with self._lock:
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
        """Record the run's end and give back its leases (its window goes back to the queue)."""
        await self._transaction(
            "record the end of the run",
            [
                ("UPDATE urls SET lease = NULL WHERE lease = ?", [(run_id,)]),
                (
                    "UPDATE runs SET ended_at = ?, status = ?, reason = ?, pages_ok = ?, "
                    "pages_failed = ?, pages_unchanged = ?, bytes = ?, harvest = ? WHERE id = ?",
                    [
                        (
                            ended_at,
                            summary.status,
                            summary.reason,
                            summary.pages_ok,
                            summary.pages_failed,
                            summary.pages_unchanged,
                            summary.bytes,
                            summary.harvest,
                            run_id,
                        )
                    ],
                ),
            ],
        )
