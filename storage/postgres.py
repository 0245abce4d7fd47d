"""PostgresStore: one PostgreSQL database as the shared frontier and store of many processes.

Owns: the connections (an asyncpg pool) to one database, and the coordination of the runs
that crawl it together. Invariants:
- one run at a time holds a host (``hosts``: owner, lease_until): only the holder leases the
  host's queued URLs, so per-host politeness (in flight, delay) holds across processes. A
  lease lasts ``lease_ttl_s`` and is renewed by every claim and heartbeat; the hosts of a run
  that stops beating are taken over when their lease expires, and their URLs' stale leases
  cleared, so a dead process loses nothing but its uncommitted pages;
- a run takes hosts up to its fair share (hosts with work / live runs), and gives back
  hosts beyond it once it holds none of their URLs; it holds at most ``_HOST_WINDOW`` URLs
  of a host at a time, so a host it gives back drains quickly;
- a host is released when it has no queued URL left (none leased either: nothing of it in
  flight) and parked until URLs of it are queued again; a released host may be taken again
  after a short cool-down. Looking for hosts to take costs O(hosts with work), not O(hosts);
- URLs are deduplicated by the database (unique constraints, ``INSERT ... ON CONFLICT``);
  a batch is one transaction of two or three statements over ``unnest`` arrays: its pages,
  then all its urls rows (new, fetched, skipped) in one statement, each in URL order (a
  stable lock order between processes); a deadlock or serialisation failure retries it;
- errors become ``StoreError`` naming the database, its password left out.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg

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
from storage.factory import redact_dsn
from storage.postgres_schema import (
    ADVISORY_LOCK_KEY,
    LATEST_VERSION,
    MIGRATIONS_TABLE,
    pending,
)
from storage.schema import page_upsert_set

T = TypeVar("T")

_COOLDOWN_S = 1.0
"""A released host waits this long (or the run's ``--delay`` if longer) before another run
may take it: the last request of its previous holder is not followed at once by the next
one's first."""
_HOSTS_PER_CLAIM = 16
"""Hosts one claim takes at most."""
_HOST_WINDOW = 200
"""URLs of one host a run holds leased at most (in memory or in flight); a claim tops a
host up when half of them are gone."""
_DEAD_AFTER_TTLS = 3
"""``start_run`` closes as interrupted the runs that have not beaten for this many TTLs."""
_CENSUS_PROBE = 1000
"""Free hosts with work counted at most, for the fair share."""
_CLAIM_GAP_S = 0.2
"""A claim sooner than this after the previous one returns nothing without asking the
database (the engine claims again at once after a claim that returned URLs, which with URLs
trickling in would make a claim transaction every few milliseconds)."""
_SWEEP_S = 10.0
"""A run that wants hosts and finds none looks this often for parked hosts with queued
URLs (queued while the host was being parked: a race the writers cannot see)."""
_ATTEMPTS = 6
"""Tries of a transaction that hits a deadlock or a serialisation failure."""
_POOL_SIZE = 6
_CONNECT_TIMEOUT_S = 10.0

_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)
_CONNECT_ERRORS: tuple[type[BaseException], ...] = (*_ERRORS, ValueError)
_CLOSE_ERRORS: tuple[type[BaseException], ...] = (*_ERRORS, asyncio.CancelledError)
_RETRY: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.SerializationError,
)


async def _no_reset(connection: asyncpg.Connection) -> None:
    """Pool connections keep no session state: skip the reset query on release."""


def _signed64(value: int | None) -> int | None:
    """BIGINT is signed 64-bit: store an unsigned hash as the same bits."""
    if value is None:
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


def _last_by_url(items: list[Any], key: Callable[[Any], str]) -> list[Any]:
    """One item per URL (the last, as sequential writes would leave it; at the place of the
    first): a statement may not touch a row twice."""
    by_url = {key(item): item for item in items}
    return list(by_url.values())


# -- statements ------------------------------------------------------------------------------
_PAGE_COLUMNS = (
    ("url", "text"), ("final_url", "text"), ("status", "int"), ("error", "text"),
    ("content_type", "text"), ("title", "text"), ("text", "text"), ("lang", "text"),
    ("canonical", "text"), ("meta_robots", "text"), ("depth", "int"), ("body_bytes", "bigint"),
    ("content_hash", "text"), ("fetched_at", "text"), ("outlinks", "text"), ("attempts", "int"),
    ("duplicate_of", "text"), ("score", "float8"), ("tokens", "bytea"), ("simhash", "bigint"),
    ("near_duplicate_of", "text"), ("etag", "text"), ("last_modified", "text"),
    ("body", "bytea"), ("headers", "text"), ("extract", "text"),
)  # fmt: skip
_RUN_PARAM = len(_PAGE_COLUMNS) + 1
_UPSERT_PAGES = f"""
INSERT INTO pages ({", ".join(name for name, _ in _PAGE_COLUMNS)}, run_id, changed_at)
SELECT t.*, ${_RUN_PARAM}::bigint, t.fetched_at
FROM unnest({", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(_PAGE_COLUMNS, 1))})
     AS t({", ".join(name for name, _ in _PAGE_COLUMNS)})
ON CONFLICT (url) DO UPDATE SET""" + page_upsert_set(least="LEAST", differs="IS DISTINCT FROM")
_TOUCH_PAGES = """
UPDATE pages AS p SET fetched_at = t.fetched_at, run_id = $6, attempts = t.attempts,
    etag = coalesce(t.etag, p.etag), last_modified = coalesce(t.last_modified, p.last_modified)
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[])
     AS t(url, fetched_at, attempts, etag, last_modified)
WHERE p.url = t.url
"""
# The hosts of URLs newly queued (a CTE ``fresh(origin)``): a parked host (released when it
# had no work: lease_until infinite) may be taken again; a new one is inserted. (Only when
# missing: an INSERT that conflicts with a row another transaction is updating waits for it,
# and holders renew their hosts' rows.)
_HOSTS_OF_FRESH = """, unparked AS (
    UPDATE hosts SET lease_until = hosts.released_at FROM fresh
    WHERE hosts.origin = fresh.origin AND hosts.lease_until = 'Infinity'
)
INSERT INTO hosts (origin)
SELECT f.origin FROM fresh AS f
WHERE NOT EXISTS (SELECT 1 FROM hosts AS h WHERE h.origin = f.origin)
ORDER BY f.origin
ON CONFLICT (origin) DO NOTHING
"""
_URL_CHANGES = (
    """
WITH t AS (  -- ids in the order of discovery; rows written in URL order (a stable lock order)
    SELECT nextval('urls_id_seq') AS id, t.*
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::int[], $6::float8[],
                $7::int[], $8::float8[], $9::float8[], $10::text[], $11::text[])
         AS t(url, origin, state, lease, depth, priority, attempts, next_fetch_at, interval_s,
              reason, updated_at)
), written AS (
    INSERT INTO urls AS u (id, url, origin, state, lease, depth, priority, attempts,
                           next_fetch_at, interval_s, reason, updated_at, run_id)
    SELECT t.*, $12::bigint FROM t ORDER BY t.url
    ON CONFLICT (url) DO UPDATE SET
        state = excluded.state, lease = NULL, reason = excluded.reason,
        attempts = CASE WHEN excluded.state = 'skipped' THEN u.attempts
                        ELSE excluded.attempts END,
        next_fetch_at = CASE WHEN excluded.state = 'skipped' THEN u.next_fetch_at
                             ELSE excluded.next_fetch_at END,
        interval_s = CASE WHEN excluded.state = 'skipped' THEN u.interval_s
                          ELSE excluded.interval_s END,
        updated_at = excluded.updated_at, run_id = excluded.run_id
    -- a new URL known already: nothing; a skip: only over a queued URL; a fetch: always
    WHERE excluded.state <> 'queued' AND (excluded.state <> 'skipped' OR u.state = 'queued')
    RETURNING u.origin, u.state
), fresh AS (
    SELECT DISTINCT origin FROM written WHERE state = 'queued'
)"""
    + _HOSTS_OF_FRESH
)
_SEED_URLS = (
    """
WITH seeded AS (
    INSERT INTO urls (url, origin, state, depth, updated_at, run_id)
    SELECT t.url, t.origin, 'queued', 0, $3, $4
    FROM unnest($1::text[], $2::text[]) AS t(url, origin)
    ON CONFLICT (url) DO UPDATE SET state = 'queued', depth = 0, reason = NULL,
        updated_at = excluded.updated_at, run_id = excluded.run_id
    WHERE urls.state = 'skipped'
    RETURNING origin
), fresh AS (
    SELECT DISTINCT origin FROM seeded
)"""
    + _HOSTS_OF_FRESH
)
_REQUEUE_DUE = (
    """
WITH due AS (
    UPDATE urls SET state = 'queued', updated_at = $1, run_id = $2
    WHERE state IN ('done', 'failed')
      AND (next_fetch_at <= $3 OR next_fetch_at - interval_s + $4::float8 <= $3)
    RETURNING origin
), fresh AS (
    SELECT DISTINCT origin FROM due
)"""
    + _HOSTS_OF_FRESH
)
_FREE_DEAD_LEASES = """
UPDATE urls SET lease = NULL
WHERE lease IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM runs AS r
    WHERE r.id = urls.lease AND r.status = 'running' AND r.heartbeat_at >= $1
)
"""
_RENEW = """
WITH beat AS (UPDATE runs SET heartbeat_at = $2 WHERE id = $1)
UPDATE hosts SET lease_until = $2::float8 + $3::float8 WHERE owner = $1 RETURNING origin
"""
# Whether a host has work: one probe of the urls_queued_origin index per host (a LATERAL
# with LIMIT, which the planner cannot turn into a join over every queued URL).
_HAS_WORK = """CROSS JOIN LATERAL (
        SELECT 1 FROM urls AS u WHERE u.origin = h.origin AND u.state = 'queued' LIMIT 1
    ) AS work"""
_RELEASE_DRAINED = """
UPDATE hosts SET owner = NULL, lease_until = 'Infinity', released_at = $2
FROM hosts AS h LEFT JOIN LATERAL (
    SELECT 1 AS one FROM urls AS u WHERE u.origin = h.origin AND u.state = 'queued' LIMIT 1
) AS work ON true
WHERE hosts.origin = h.origin AND h.owner = $1 AND hosts.owner = $1 AND work.one IS NULL
RETURNING hosts.origin
"""
_UNPARK_STRANDED = f"""
UPDATE hosts SET lease_until = hosts.released_at
FROM hosts AS h {_HAS_WORK}
WHERE hosts.origin = h.origin AND h.lease_until = 'Infinity' AND hosts.lease_until = 'Infinity'
"""
_CLAIM_RENEW = """
WITH beat AS (
    UPDATE runs SET heartbeat_at = $2 WHERE id = $1 AND heartbeat_at < $2::float8 - $3::float8 / 3
), renewed AS (
    UPDATE hosts SET lease_until = $2::float8 + $3::float8
    WHERE owner = $1 AND lease_until < $2::float8 + $3::float8 * 2 / 3
)
SELECT origin FROM hosts WHERE owner = $1
"""
_CENSUS = f"""
SELECT
    (SELECT count(*) FROM runs
     WHERE status = 'running' AND heartbeat_at >= $1::float8 - $2::float8),
    (SELECT count(*) FROM hosts WHERE owner IS NOT NULL AND lease_until >= $1),
    (SELECT count(*) FROM (
        SELECT 1 FROM hosts AS h {_HAS_WORK}
        WHERE h.lease_until < $1
        LIMIT {_CENSUS_PROBE}) AS free)
"""
_FREE = f"""
SELECT count(*) FROM (
    SELECT 1 FROM hosts AS h {_HAS_WORK} WHERE h.lease_until < $1 LIMIT {_CENSUS_PROBE}
) AS free
"""
_TAKE_HOSTS = f"""
WITH candidate AS (
    SELECT h.origin, h.owner FROM hosts AS h {_HAS_WORK}
    WHERE h.lease_until < $2
    ORDER BY h.lease_until
    LIMIT $4
    FOR UPDATE OF h SKIP LOCKED
)
UPDATE hosts SET owner = $1, lease_until = $2::float8 + $3::float8, claimed_at = $2,
    takeovers = hosts.takeovers + (candidate.owner IS NOT NULL AND candidate.owner <> $1)::int
FROM candidate WHERE hosts.origin = candidate.origin
RETURNING hosts.origin, candidate.owner
"""
_CLEAR_STALE = """
UPDATE urls SET lease = NULL WHERE lease = ANY($2::bigint[]) AND origin = ANY($1::text[])
"""
_LEASED_BY_HOST = """
SELECT origin, count(*) FROM urls WHERE lease = $1 GROUP BY origin
"""
_RELEASE = """
UPDATE hosts SET owner = NULL, lease_until = $3 WHERE owner = $1 AND origin = ANY($2::text[])
"""
_LEASE_URLS = """
WITH pick AS (
    SELECT x.id FROM unnest($2::text[], $3::int[]) AS h(origin, room)
    CROSS JOIN LATERAL (
        SELECT u.id, u.priority FROM urls AS u
        WHERE u.origin = h.origin AND u.state = 'queued' AND u.lease IS NULL
        ORDER BY u.priority DESC, u.id
        LIMIT h.room
    ) AS x
    ORDER BY x.priority DESC, x.id
    LIMIT $4
), leased AS (
    -- rows by primary key (no state test here: with it the planner may prefer scanning the
    -- whole queue through its partial index); a row no longer queued is not returned
    UPDATE urls SET lease = $1 FROM pick WHERE urls.id = pick.id AND urls.lease IS NULL
    RETURNING urls.id, urls.url, urls.depth, urls.priority, urls.interval_s, urls.state
)
SELECT l.url, l.depth, l.priority, p.etag, p.last_modified, p.content_hash, l.interval_s
FROM leased AS l LEFT JOIN pages AS p ON p.url = l.url
WHERE l.state = 'queued'
ORDER BY l.priority DESC, l.id
"""


class PostgresStore:
    """A ``Store`` on a PostgreSQL database that many processes share (``exclusive`` is
    false: every URL found goes through the database, and runs claim hosts to crawl)."""

    exclusive = False

    def __init__(
        self, dsn: str, *, lease_ttl_s: float = 30.0, claim_gap_s: float = _CLAIM_GAP_S
    ) -> None:
        if lease_ttl_s <= 0:
            raise ValueError(f"lease_ttl_s must be positive, got {lease_ttl_s}")
        self.dsn = dsn
        self.name = redact_dsn(dsn)
        self.lease_ttl_s = lease_ttl_s
        self.claim_gap_s = claim_gap_s
        self._claimed_at = -math.inf
        self._pool: asyncpg.Pool | None = None
        self._cooldown_s = _COOLDOWN_S
        self._swept_at = 0.0

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError(f"{self.name}: store is not open")
        return self._pool

    # -- opening ------------------------------------------------------------------------------
    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=_POOL_SIZE,
                reset=_no_reset,
                timeout=_CONNECT_TIMEOUT_S,
                server_settings={"application_name": "crawler"},
            )
        except _CONNECT_ERRORS as exc:
            raise StoreError(f"{self.name}: cannot connect: {_reason(exc)}") from exc
        try:
            async with self.pool.acquire() as connection:
                await migrate(connection)
        except StoreError as exc:
            await self.close()
            raise StoreError(f"{self.name}: {exc}") from exc
        except _ERRORS as exc:
            await self.close()
            raise StoreError(f"{self.name}: cannot migrate the schema: {_reason(exc)}") from exc

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 10)
            except _CLOSE_ERRORS:
                pool.terminate()

    async def _transaction(
        self, what: str, body: Callable[[asyncpg.Connection], Awaitable[T]]
    ) -> T:
        """Run ``body`` in a transaction on a pooled connection; retried on a deadlock or a
        serialisation failure, other errors as ``StoreError``."""
        pool = self.pool
        for attempt in range(_ATTEMPTS):
            try:
                async with pool.acquire() as connection, connection.transaction():
                    return await body(connection)
            except _RETRY as exc:
                if attempt + 1 == _ATTEMPTS:
                    raise StoreError(f"{self.name}: cannot {what}: {_reason(exc)}") from exc
                await asyncio.sleep(random.uniform(0.005, 0.02) * 2**attempt)
            except _ERRORS as exc:
                raise StoreError(f"{self.name}: cannot {what}: {_reason(exc)}") from exc
        raise AssertionError("unreachable")

    # -- runs ---------------------------------------------------------------------------------
    async def start_run(self, seeds: int, settings_json: str, started_at: str) -> int:
        """Record a new run. Runs still ``running`` that have not beaten for a few lease TTLs
        belong to dead processes: they are closed as ``interrupted``; live ones are left."""
        now = time.time()
        dead_before = now - _DEAD_AFTER_TTLS * self.lease_ttl_s
        self._cooldown_s = max(_COOLDOWN_S, _setting(settings_json, "delay"))

        async def body(connection: asyncpg.Connection) -> int:
            await connection.execute(
                "UPDATE runs SET status = 'interrupted', reason = 'process died', ended_at = $1 "
                "WHERE status = 'running' AND coalesce(heartbeat_at, 0) < $2",
                started_at,
                dead_before,
            )
            run_id = await connection.fetchval(
                "INSERT INTO runs (started_at, status, seeds, settings, heartbeat_at) "
                "VALUES ($1, 'running', $2, $3, $4) RETURNING id",
                started_at,
                seeds,
                settings_json,
                now,
            )
            return int(run_id)

        return await self._transaction("record the run", body)

    async def finish_run(self, run_id: int, summary: RunSummary, ended_at: str) -> None:
        """Record the run's end and give back its URL leases and its hosts."""
        free_at = time.time() + self._cooldown_s

        async def body(connection: asyncpg.Connection) -> None:
            await connection.execute("UPDATE urls SET lease = NULL WHERE lease = $1", run_id)
            await connection.execute(
                "UPDATE hosts SET owner = NULL, lease_until = $2 WHERE owner = $1", run_id, free_at
            )
            await connection.execute(
                "UPDATE runs SET ended_at = $1, status = $2, reason = $3, pages_ok = $4, "
                "pages_failed = $5, pages_unchanged = $6, bytes = $7 WHERE id = $8",
                ended_at,
                summary.status,
                summary.reason,
                summary.pages_ok,
                summary.pages_failed,
                summary.pages_unchanged,
                summary.bytes,
                run_id,
            )

        await self._transaction("record the end of the run", body)

    async def heartbeat(self, run_id: int, now: float) -> None:
        """Renew the run's liveness and its host leases."""

        async def body(connection: asyncpg.Connection) -> None:
            await connection.execute(_RENEW, run_id, now, self.lease_ttl_s)

        await self._transaction("renew leases", body)

    # -- the frontier -------------------------------------------------------------------------
    async def open_frontier(
        self, run_id: int, seeds: list[str], now: float, found_at: str, max_interval_s: float
    ) -> int:
        """Leases of dead runs freed (live runs' leases are theirs), due pages queued again,
        seeds queued. Returns how many URLs are queued and not leased."""
        seed_urls = sorted(set(seeds))

        async def body(connection: asyncpg.Connection) -> int:
            await connection.execute(_FREE_DEAD_LEASES, now - self.lease_ttl_s)
            await connection.execute(_REQUEUE_DUE, found_at, run_id, now, max_interval_s)
            if seed_urls:
                await connection.execute(
                    _SEED_URLS, seed_urls, [url_origin(u) for u in seed_urls], found_at, run_id
                )
            await connection.execute(_UNPARK_STRANDED)
            count = await connection.fetchval(
                "SELECT count(*) FROM urls WHERE state = 'queued' AND lease IS NULL"
            )
            return int(count)

        return await self._transaction("prepare the frontier", body)

    async def known_urls(self) -> AsyncIterator[str]:
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                async for record in connection.cursor("SELECT url FROM urls", prefetch=20_000):
                    yield record[0]
        except _ERRORS as exc:
            raise StoreError(f"{self.name}: cannot read the frontier: {_reason(exc)}") from exc

    async def claim(self, run_id: int, limit: int, now: float) -> list[QueuedUrl]:
        """Renew this run's hosts, give back drained ones (and ones beyond its fair share
        that it holds no URL of), take free or expired hosts up to its share, then lease up
        to ``limit`` queued URLs of the hosts it holds, highest priority first."""
        ttl = self.lease_ttl_s
        free_at = now + self._cooldown_s
        if limit > 0:
            clock = time.monotonic()
            if clock - self._claimed_at < self.claim_gap_s:
                return []  # too soon: the caller polls again later (leases: the heartbeat)
            self._claimed_at = clock

        async def body(connection: asyncpg.Connection) -> list[QueuedUrl]:
            held = {r[0] for r in await connection.fetch(_CLAIM_RENEW, run_id, now, ttl)}
            if held:
                drained = await connection.fetch(_RELEASE_DRAINED, run_id, free_at)
                held.difference_update(r[0] for r in drained)
            if limit <= 0:
                return []  # only a renewal
            census = await connection.fetchrow(_CENSUS, now, ttl)
            live, busy, free = max(1, census[0]), census[1], census[2]
            share = max(1, math.ceil((busy + free) / live))
            take = min(_HOSTS_PER_CLAIM, share - len(held))
            if not free and take > 0 and now - self._swept_at >= _SWEEP_S:
                self._swept_at = now
                swept = await connection.execute(_UNPARK_STRANDED)
                free = int(swept.rsplit(" ", 1)[-1]) and await connection.fetchval(_FREE, now)
            if free and take > 0:
                rows = await connection.fetch(_TAKE_HOSTS, run_id, now, ttl, take)
                held.update(r[0] for r in rows)
                # a host taken from an expired owner: its URLs' leases are stale
                stale = {r[1] for r in rows if r[1] is not None and r[1] != run_id}
                if stale:
                    taken = [r[0] for r in rows if r[1] in stale]
                    await connection.execute(_CLEAR_STALE, taken, sorted(stale))
            if not held:
                return []
            leased = {r[0]: int(r[1]) for r in await connection.fetch(_LEASED_BY_HOST, run_id)}
            draining: set[str] = set()
            if live > 1 and len(held) > share:
                # beyond the fair share: stop leasing the hosts with fewest URLs leased, and
                # give back those with none (others are waiting for hosts)
                by_load = sorted(held, key=lambda origin: (leased.get(origin, 0), origin))
                draining = set(by_load[: len(held) - share])
                idle = sorted(o for o in draining if leased.get(o, 0) == 0)
                if idle:
                    await connection.execute(_RELEASE, run_id, idle, free_at)
            origins, rooms = [], []
            for origin in sorted(held - draining):
                # topped up when half gone: fewer, larger claims
                room = _HOST_WINDOW - leased.get(origin, 0)
                if room >= _HOST_WINDOW // 2:
                    origins.append(origin)
                    rooms.append(room)
            if not origins:
                return []
            rows = await connection.fetch(_LEASE_URLS, run_id, origins, rooms, limit)
            return [QueuedUrl(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]

        return await self._transaction("claim queued URLs", body)

    async def outstanding(self) -> int:
        try:
            async with self.pool.acquire() as connection:
                count = await connection.fetchval(
                    "SELECT count(*) FROM urls WHERE state = 'queued'"
                )
        except _ERRORS as exc:
            raise StoreError(f"{self.name}: cannot read the frontier: {_reason(exc)}") from exc
        return int(count)

    # -- pages --------------------------------------------------------------------------------
    async def save(
        self,
        pages: list[PageRecord],
        urls: list[UrlRecord],
        skips: list[SkipRecord],
        run_id: int,
    ) -> None:
        if not pages and not urls and not skips:
            return
        page_list: list[PageRecord] = _last_by_url(pages, lambda r: r.url)
        # pages are written in URL order (a stable lock order; within a batch, the order
        # pages are stored in is that of their URLs)
        fresh = sorted((r for r in page_list if not r.unchanged), key=lambda r: r.url)
        touched = sorted((r for r in page_list if r.unchanged), key=lambda r: r.url)
        page_arrays = _page_arrays(fresh) if fresh else None
        changes = _url_changes(page_list, urls, skips, run_id)

        async def body(connection: asyncpg.Connection) -> None:
            if page_arrays is not None:
                await connection.execute(_UPSERT_PAGES, *page_arrays, run_id)
            if touched:
                await connection.execute(
                    _TOUCH_PAGES,
                    [r.url for r in touched],
                    [r.fetched_at for r in touched],
                    [r.attempts for r in touched],
                    [r.etag for r in touched],
                    [r.last_modified for r in touched],
                    run_id,
                )
            # every urls row of the batch in one statement, last: row locks are taken in
            # URL order and held only until the commit
            await connection.execute(_URL_CHANGES, *changes, run_id)

        await self._transaction(f"write {len(pages)} pages", body)

    # -- robots.txt ---------------------------------------------------------------------------
    async def get_robots(self, origin: str) -> RobotsRecord | None:
        try:
            async with self.pool.acquire() as connection:
                row = await connection.fetchrow(
                    "SELECT status, body, fetched_at FROM robots WHERE origin = $1", origin
                )
        except _ERRORS as exc:
            raise StoreError(f"{self.name}: cannot read robots.txt cache: {_reason(exc)}") from exc
        return RobotsRecord(origin, row[0], row[1], row[2]) if row is not None else None

    async def put_robots(self, record: RobotsRecord) -> None:
        async def body(connection: asyncpg.Connection) -> None:
            await connection.execute(
                "INSERT INTO robots (origin, status, body, fetched_at) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (origin) DO UPDATE SET status = excluded.status, "
                "body = excluded.body, fetched_at = excluded.fetched_at",
                record.origin,
                record.status,
                record.body,
                record.fetched_at,
            )

        await self._transaction("cache robots.txt", body)


def _url_changes(
    pages: list[PageRecord], urls: list[UrlRecord], skips: list[SkipRecord], run_id: int
) -> list[list[object]]:
    """The batch's urls rows as the arrays of ``_URL_CHANGES``: one row per URL, with the
    effect the statements of the SQLite store have in sequence (new URLs, then fetches, then
    skips): a fetch wins over a skip, which wins over a new URL; ids in discovery order."""
    rows: dict[str, tuple[object, ...]] = {}
    kinds: dict[str, int] = {}

    def put(url: str, kind: int, row: tuple[object, ...]) -> None:
        current = kinds.get(url)
        if current is None or kind > current or (kind == current and kind > 0):
            rows[url] = row  # (a new URL found twice: the first)
            kinds[url] = kind

    for u in urls:
        put(u.url, 0, (u.url, url_origin(u.url), "queued", run_id if u.leased else None,
                       u.depth, u.priority, 0, None, None, None, u.found_at))  # fmt: skip
    for s in skips:
        put(s.url, 1, (s.url, url_origin(s.url), "skipped", None, s.depth or 0, 0.0, 0,
                       None, None, s.reason, s.decided_at))  # fmt: skip
    for r in pages:
        put(r.url, 2, (r.url, url_origin(r.url), r.state, None, r.depth, 0.0, r.attempts,
                       r.next_fetch_at, r.interval_s, None, r.fetched_at))  # fmt: skip
    return [list(column) for column in zip(*rows.values(), strict=True)] or [[]] * 11


def _page_arrays(records: list[PageRecord]) -> list[list[object]]:
    """One array per column of ``_PAGE_COLUMNS``, in order."""
    return [
        [r.url for r in records],
        [r.final_url for r in records],
        [r.status for r in records],
        [r.error for r in records],
        [r.content_type for r in records],
        [r.title for r in records],
        [r.text for r in records],
        [r.lang for r in records],
        [r.canonical for r in records],
        [r.meta_robots for r in records],
        [r.depth for r in records],
        [r.body_bytes for r in records],
        [r.content_hash for r in records],
        [r.fetched_at for r in records],
        [r.links_json for r in records],
        [r.attempts for r in records],
        [r.duplicate_of for r in records],
        [r.score for r in records],
        [r.tokens for r in records],
        [_signed64(r.simhash) for r in records],
        [r.near_duplicate_of for r in records],
        [r.etag for r in records],
        [r.last_modified for r in records],
        [r.body for r in records],
        [r.headers for r in records],
        [r.extract for r in records],
    ]


def _setting(settings_json: str, name: str) -> float:
    """A number from the run's settings (JSON), 0 if absent."""
    try:
        value = json.loads(settings_json).get(name)
    except (ValueError, AttributeError):
        return 0.0
    return float(value) if isinstance(value, int | float) else 0.0


def _reason(exc: BaseException) -> str:
    """An exception as a short message (some asyncpg and OS errors have an empty str)."""
    text = str(exc).strip()
    return text or type(exc).__name__


async def migrate(connection: asyncpg.Connection) -> None:
    """Bring the database to the latest schema: each migration in one transaction with its
    ``schema_migrations`` row, under a transaction-level advisory lock (processes starting
    at once wait for each other; the second finds the work done)."""
    if await _applied_versions(connection, lock=False) == {m.version for m in pending(set())}:
        return  # up to date: no lock taken
    while True:
        async with connection.transaction():
            applied = await _applied_versions(connection, lock=True)
            if applied and max(applied) > LATEST_VERSION:
                raise StoreError(
                    f"database schema version {max(applied)} is newer than this crawler "
                    f"({LATEST_VERSION}); upgrade the crawler"
                )
            todo = pending(applied)
            if not todo:
                return
            migration = todo[0]
            await connection.execute(migration.sql)
            await connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                datetime.now(UTC).isoformat(),
            )


async def _applied_versions(connection: asyncpg.Connection, *, lock: bool) -> set[int]:
    if lock:
        await connection.execute("SELECT pg_advisory_xact_lock($1)", ADVISORY_LOCK_KEY)
        await connection.execute(MIGRATIONS_TABLE)
    elif await connection.fetchval("SELECT to_regclass('schema_migrations')") is None:
        return set()
    return {r[0] for r in await connection.fetch("SELECT version FROM schema_migrations")}
