"""SQLiteStore: the embedded default store (aiosqlite, WAL, one writer, batched transactions).

Owns: the connection to one SQLite file. Invariants:
- one connection, used by one writer; every batch of pages is one transaction
  (a handful of thread hops per batch, never one await per page), its rows written by
  multi-row statements (``_Rows``), not one statement step per row;
- WAL with ``synchronous=NORMAL``: every committed transaction survives ``kill -9``;
- migrations are applied on open, each in a transaction with its ``schema_migrations`` row.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime

import aiosqlite

from parsers.links import url_origin
from storage.base import (
    PageRecord,
    QueuedUrl,
    RobotsRecord,
    RunSummary,
    SkipRecord,
    StoreError,
    UrlRecord,
)
from storage.schema import (
    LATEST_VERSION,
    MIGRATIONS_TABLE,
    page_upsert_set,
    pending,
    split_statements,
)


class _Rows:
    """A statement written for many rows at once: ``head``, then ``VALUES`` with ``row``
    repeated, then ``tail`` (an ``INSERT``'s upsert clause, which SQLite applies row by row,
    in order; or the rest of an ``UPDATE ... FROM (VALUES ...)``).

    ``executemany`` of a one-row statement steps the statement once per row, and each step
    releases the GIL and takes it back: with the event loop thread busy, taking it back
    waits up to the switch interval (5 ms). Measured: 24,000 rows in 40 transactions, 0.14 s
    alone, 33 s beside a busy thread. Rows go in chunks of at most 999 parameters (the
    smallest limit an SQLite build may have), so a batch of pages costs a few steps.
    """

    def __init__(
        self,
        head: str,
        row: str,
        tail: str = "",
        weigh: Callable[[tuple[object, ...]], int] | None = None,
        max_bytes: int = 8 << 20,
    ) -> None:
        self.head = head
        self.row = row
        self.tail = tail
        self.width = row.count("?")
        self.chunk = min(128, 999 // self.width)
        self.weigh = weigh
        """The size of a row's large values: SQLite copies every bound value when binding,
        so a chunk holds at most ``max_bytes`` of them (pages of a few MB each stay a few to
        a statement)."""
        self.max_bytes = max_bytes

    @functools.cache  # noqa: B019 -- a few module-level instances, a few sizes each
    def sql(self, rows: int) -> str:
        return f"{self.head}\nVALUES {', '.join([self.row] * rows)}\n{self.tail}"

    def statements(self, rows: Sequence[tuple[object, ...]]) -> list[tuple[str, list[tuple]]]:
        """(sql, parameter lists) for ``rows``, in order: chunks of at most ``chunk`` rows
        and ``max_bytes``, consecutive chunks of one size sharing their statement."""
        out: list[tuple[str, list[tuple]]] = []
        flat = itertools.chain.from_iterable
        weigh, start, count = self.weigh, 0, len(rows)
        while start < count:
            end = min(start + self.chunk, count)
            if weigh is not None:
                size = 0
                for i in range(start, end):
                    size += weigh(rows[i])
                    if size > self.max_bytes and i > start:
                        end = i
                        break
            sql = self.sql(end - start)
            parameters = tuple(flat(rows[start:end]))
            if out and out[-1][0] == sql:
                out[-1][1].append(parameters)
            else:
                out.append((sql, [parameters]))
            start = end
        return out


def _page_weight(row: tuple[object, ...]) -> int:
    """A page row's large values: text, outlinks, tokens, body, headers, extract."""
    values = (row[6], row[15], row[19], row[24], row[25], row[26])
    return sum(len(value) for value in values if isinstance(value, str | bytes))


_UPSERT_PAGE = _Rows(
    """INSERT INTO pages (url, final_url, status, error, content_type, title, text, lang,
                   canonical, meta_robots, depth, body_bytes, content_hash, fetched_at, run_id,
                   outlinks, attempts, duplicate_of, score, tokens, simhash, near_duplicate_of,
                   etag, last_modified, body, headers, extract, changed_at)""",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "ON CONFLICT (url) DO UPDATE SET" + page_upsert_set(least="MIN", differs="IS NOT"),
    weigh=_page_weight,
)
_TOUCH_PAGE = _Rows(
    """UPDATE pages SET fetched_at = v.column1, run_id = v.column2, attempts = v.column3,
    etag = coalesce(v.column4, pages.etag),
    last_modified = coalesce(v.column5, pages.last_modified)
FROM (""",
    "(?, ?, ?, ?, ?, ?)",
    ") AS v WHERE pages.url = v.column6",
)
"""A recrawl's unchanged pages (``UPDATE ... FROM`` needs SQLite 3.33)."""
_TOUCH_PAGE_ONE = """
UPDATE pages SET fetched_at = ?, run_id = ?, attempts = ?, etag = coalesce(?, etag),
    last_modified = coalesce(?, last_modified)
WHERE url = ?
"""
_UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)


def _touch_statements(rows: Sequence[tuple[object, ...]]) -> list[tuple[str, list[tuple]]]:
    """``_TOUCH_PAGE`` for ``rows`` (the URL last); one statement a row where ``UPDATE ...
    FROM`` is missing, or a URL repeats (``FROM`` would apply one of its rows, not each)."""
    if _UPDATE_FROM and len({row[-1] for row in rows}) == len(rows):
        return _TOUCH_PAGE.statements(rows)
    return [(_TOUCH_PAGE_ONE, list(rows))]


_FETCHED_URL = _Rows(
    """INSERT INTO urls (url, origin, state, depth, attempts, next_fetch_at, interval_s,
                  updated_at, run_id)""",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    """ON CONFLICT (url) DO UPDATE SET
    state = excluded.state, lease = NULL, attempts = excluded.attempts,
    next_fetch_at = excluded.next_fetch_at, interval_s = excluded.interval_s,
    updated_at = excluded.updated_at, run_id = excluded.run_id, reason = NULL""",
)
_NEW_URL = _Rows(
    "INSERT INTO urls (url, origin, state, lease, depth, priority, updated_at, run_id)",
    "(?, ?, 'queued', ?, ?, ?, ?, ?)",
    "ON CONFLICT (url) DO NOTHING",
)
_SKIPPED_URL = _Rows(
    "INSERT INTO urls (url, origin, state, depth, reason, updated_at, run_id)",
    "(?, ?, 'skipped', ?, ?, ?, ?)",
    """ON CONFLICT (url) DO UPDATE SET
    state = 'skipped', lease = NULL, reason = excluded.reason, updated_at = excluded.updated_at,
    run_id = excluded.run_id
WHERE urls.state = 'queued'""",
)
_SEED_URL = """
INSERT INTO urls (url, origin, state, depth, updated_at, run_id) VALUES (?, ?, 'queued', 0, ?, ?)
ON CONFLICT (url) DO UPDATE SET state = 'queued', depth = 0, reason = NULL,
    updated_at = excluded.updated_at, run_id = excluded.run_id
WHERE urls.state = 'skipped'
"""
_CLAIM = """
SELECT u.id, u.url, u.depth, u.priority, u.interval_s, p.etag, p.last_modified, p.content_hash
FROM urls AS u LEFT JOIN pages AS p ON p.url = u.url
WHERE u.state = 'queued' AND u.lease IS NULL
ORDER BY u.priority DESC, u.id
LIMIT ?
"""


def _page_row(record: PageRecord, run_id: int) -> tuple[object, ...]:
    return (
        record.url,
        record.final_url,
        record.status,
        record.error,
        record.content_type,
        record.title,
        record.text,
        record.lang,
        record.canonical,
        record.meta_robots,
        record.depth,
        record.body_bytes,
        record.content_hash,
        record.fetched_at,
        run_id,
        record.links_json,
        record.attempts,
        record.duplicate_of,
        record.score,
        record.tokens,
        _signed64(record.simhash),
        record.near_duplicate_of,
        record.etag,
        record.last_modified,
        record.body,
        record.headers,
        record.extract,
        record.fetched_at,
    )


def _fetched_url_row(record: PageRecord, run_id: int) -> tuple[object, ...]:
    return (
        record.url,
        url_origin(record.url),
        record.state,
        record.depth,
        record.attempts,
        record.next_fetch_at,
        record.interval_s,
        record.fetched_at,
        run_id,
    )


_ONE_HOP = True
"""Run a transaction in one hop (``_in_transaction``) where aiosqlite allows it."""
_IDS_PER_UPDATE = 998
"""Ids in one ``UPDATE ... WHERE id IN (...)``: with the lease, 999 parameters at most."""


def _in_transaction(
    connection: sqlite3.Connection, statements: list[tuple[str, list[tuple]]]
) -> None:
    """In the connection's thread: ``executemany`` of each (sql, rows), in one transaction.

    One hop for the whole batch: each ``await`` of an aiosqlite call is a round trip between
    the event loop's thread and the connection's, and either may wait for the GIL. Run by
    ``aiosqlite.Connection._execute`` (the queue its public methods use; private, so
    ``_transaction`` falls back to those methods where it is missing)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for sql, rows in statements:
            if rows:
                connection.executemany(sql, rows)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


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
        _check_location(self.path)
        try:
            self._db = await aiosqlite.connect(self.path, isolation_level=None)
            # 16 KiB pages for a new database (no effect on an existing one): a page's
            # ~20 KB of text spans 2 pages instead of 6, which cuts SQLite's CPU for writing
            # pages by about a third (bench/RESULTS.md), for a ~6 % larger file.
            await self._db.execute("PRAGMA page_size=16384")
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute("PRAGMA synchronous=NORMAL")
            await self._db.execute("PRAGMA busy_timeout=10000")
            # 8 MiB of page cache (default 2 MiB): the urls table's unique index takes
            # random inserts; with millions of URLs a small cache turns each into a read.
            # bench/memory_bench.py (1 M URLs): 32 MiB no faster than 16 and 20 MB bigger;
            # 8 MiB ~5 % slower than 16 there, and 8 MB smaller (the tree stays < 300 MB).
            await self._db.execute("PRAGMA cache_size=-8192")
            await self._db.execute("PRAGMA foreign_keys=ON")
            # Statement journals in memory: a multi-row upsert inside a transaction keeps one
            # (the rows before it, should a constraint abort it), which SQLite spills to a temp
            # file past 64 KiB: with 16 KiB pages, 353 MB of writes to deleted files a
            # 10,000-page crawl (strace), none with this.
            await self._db.execute("PRAGMA temp_store=MEMORY")
            await _migrate(self._db)
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreError(f"{self.path}: cannot open database: {exc}") from exc

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def _transaction(self, what: str, statements: list[tuple[str, list[tuple]]]) -> None:
        """Run ``executemany`` of each (sql, rows) in one transaction, in one hop to the
        connection's thread (``_in_transaction``)."""
        db = self.db
        async with self._lock:
            try:
                run_in_thread = getattr(db, "_execute", None)  # aiosqlite's own queue
                if _ONE_HOP and run_in_thread is not None and hasattr(db, "_conn"):
                    await run_in_thread(_in_transaction, db._conn, statements)
                else:  # an aiosqlite without them: one hop per statement
                    await db.execute("BEGIN IMMEDIATE")
                    try:
                        for sql, rows in statements:
                            if rows:
                                await db.executemany(sql, rows)
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
                (_SEED_URL, [(url, url_origin(url), found_at, run_id) for url in seeds]),
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
                    async with db.execute(_CLAIM, (limit,)) as cursor:
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
        fresh = [_page_row(r, run_id) for r in pages if not r.unchanged]
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
        skipped = [
            (s.url, url_origin(s.url), s.depth or 0, s.reason, s.decided_at, run_id) for s in skips
        ]
        await self._transaction(
            f"write {len(pages)} pages",
            [
                *_NEW_URL.statements(new_urls),
                *_UPSERT_PAGE.statements(fresh),
                *_touch_statements(touched),
                *_FETCHED_URL.statements([_fetched_url_row(r, run_id) for r in pages]),
                *_SKIPPED_URL.statements(skipped),
            ],
        )

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
                    "pages_failed = ?, pages_unchanged = ?, bytes = ? WHERE id = ?",
                    [
                        (
                            ended_at,
                            summary.status,
                            summary.reason,
                            summary.pages_ok,
                            summary.pages_failed,
                            summary.pages_unchanged,
                            summary.bytes,
                            run_id,
                        )
                    ],
                ),
            ],
        )
