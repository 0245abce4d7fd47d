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
The statements are ``storage.postgres.sql``'s, the migrations ``storage.postgres.schema``'s;
asyncpg is loaded when the store opens (``storage.postgres.driver``).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import storage.postgres.sql as sql
from parsers.links import url_origin
from storage.base import (
    PageRecord,
    QueuedUrl,
    RobotsRecord,
    RunSample,
    RunSummary,
    SkipRecord,
    StoreError,
    UrlRecord,
)
from storage.dsn import redact_dsn
from storage.postgres.driver import CONNECT_TIMEOUT_S, FAILURES, create_pool, reason
from storage.postgres.schema import migrate
from storage.schema import DEAD_RUN_COUNTS

if TYPE_CHECKING:
    import asyncpg

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


async def _no_reset(connection: asyncpg.Connection) -> None:
    """Pool connections keep no session state: skip the reset query on release."""


def _last_by_url(items: list[Any], key: Callable[[Any], str]) -> list[Any]:
    """One item per URL (the last, as sequential writes would leave it; at the place of the
    first): a statement may not touch a row twice."""
    by_url = {key(item): item for item in items}
    return list(by_url.values())


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
            self._pool = await create_pool(
                self.dsn,
                min_size=1,
                max_size=_POOL_SIZE,
                reset=_no_reset,
                timeout=CONNECT_TIMEOUT_S,
                server_settings={"application_name": "crawler"},
            )
        except FAILURES.connect as exc:
            raise StoreError(f"{self.name}: cannot connect: {reason(exc)}") from exc
        try:
            async with self.pool.acquire() as connection:
                await migrate(connection)
        except StoreError as exc:
            await self.close()
            raise StoreError(f"{self.name}: {exc}") from exc
        except FAILURES.errors as exc:
            await self.close()
            raise StoreError(f"{self.name}: cannot migrate the schema: {reason(exc)}") from exc

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 10)
            except FAILURES.close:
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
            except FAILURES.retry as exc:
                if attempt + 1 == _ATTEMPTS:
                    raise StoreError(f"{self.name}: cannot {what}: {reason(exc)}") from exc
                await asyncio.sleep(random.uniform(0.005, 0.02) * 2**attempt)
            except FAILURES.errors as exc:
                raise StoreError(f"{self.name}: cannot {what}: {reason(exc)}") from exc
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
                "UPDATE runs SET status = 'interrupted', reason = 'process died', ended_at = $1, "
                f"{DEAD_RUN_COUNTS} WHERE status = 'running' AND coalesce(heartbeat_at, 0) < $2",
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
                "pages_failed = $5, pages_unchanged = $6, bytes = $7, harvest = $8 WHERE id = $9",
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

        await self._transaction("record the end of the run", body)

    async def add_sample(self, run_id: int, sample: RunSample) -> None:
        async def body(connection: asyncpg.Connection) -> None:
            await connection.execute(sql.ADD_SAMPLE, run_id, sample.at, sample.elapsed_s,
                                     sample.done, sample.failed, sample.queued, sample.in_flight,
                                     sample.bytes)  # fmt: skip

        await self._transaction("record a progress sample", body)

    async def heartbeat(self, run_id: int, now: float) -> None:
        """Renew the run's liveness and its host leases."""

        async def body(connection: asyncpg.Connection) -> None:
            await connection.execute(sql.RENEW, run_id, now, self.lease_ttl_s)

        await self._transaction("renew leases", body)

    # -- the frontier -------------------------------------------------------------------------
    async def open_frontier(
        self, run_id: int, seeds: list[str], now: float, found_at: str, max_interval_s: float
    ) -> int:
        """Leases of dead runs freed (live runs' leases are theirs), due pages queued again,
        seeds queued. Returns how many URLs are queued and not leased."""
        seed_urls = sorted(set(seeds))

        async def body(connection: asyncpg.Connection) -> int:
            await connection.execute(sql.FREE_DEAD_LEASES, now - self.lease_ttl_s)
            await connection.execute(sql.REQUEUE_DUE, found_at, run_id, now, max_interval_s)
            if seed_urls:
                await connection.execute(
                    sql.SEED_URLS, seed_urls, [url_origin(u) for u in seed_urls], found_at, run_id
                )
            await connection.execute(sql.UNPARK_STRANDED)
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
        except FAILURES.errors as exc:
            raise StoreError(f"{self.name}: cannot read the frontier: {reason(exc)}") from exc

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
            held = {r[0] for r in await connection.fetch(sql.CLAIM_RENEW, run_id, now, ttl)}
            if held:
                drained = await connection.fetch(sql.RELEASE_DRAINED, run_id, free_at)
                held.difference_update(r[0] for r in drained)
            if limit <= 0:
                return []  # only a renewal
            census = await connection.fetchrow(sql.CENSUS, now, ttl)
            live, busy, free = max(1, census[0]), census[1], census[2]
            share = max(1, math.ceil((busy + free) / live))
            take = min(_HOSTS_PER_CLAIM, share - len(held))
            if not free and take > 0 and now - self._swept_at >= _SWEEP_S:
                self._swept_at = now
                swept = await connection.execute(sql.UNPARK_STRANDED)
                free = int(swept.rsplit(" ", 1)[-1]) and await connection.fetchval(sql.FREE, now)
            if free and take > 0:
                rows = await connection.fetch(sql.TAKE_HOSTS, run_id, now, ttl, take)
                held.update(r[0] for r in rows)
                # a host taken from an expired owner: its URLs' leases are stale
                stale = {r[1] for r in rows if r[1] is not None and r[1] != run_id}
                if stale:
                    taken = [r[0] for r in rows if r[1] in stale]
                    await connection.execute(sql.CLEAR_STALE, taken, sorted(stale))
            if not held:
                return []
            leased = {r[0]: int(r[1]) for r in await connection.fetch(sql.LEASED_BY_HOST, run_id)}
            draining: set[str] = set()
            if live > 1 and len(held) > share:
                # beyond the fair share: stop leasing the hosts with fewest URLs leased, and
                # give back those with none (others are waiting for hosts)
                by_load = sorted(held, key=lambda origin: (leased.get(origin, 0), origin))
                draining = set(by_load[: len(held) - share])
                idle = sorted(o for o in draining if leased.get(o, 0) == 0)
                if idle:
                    await connection.execute(sql.RELEASE, run_id, idle, free_at)
            origins, rooms = [], []
            for origin in sorted(held - draining):
                # topped up when half gone: fewer, larger claims
                room = _HOST_WINDOW - leased.get(origin, 0)
                if room >= _HOST_WINDOW // 2:
                    origins.append(origin)
                    rooms.append(room)
            if not origins:
                return []
            rows = await connection.fetch(sql.LEASE_URLS, run_id, origins, rooms, limit)
            return [QueuedUrl(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]

        return await self._transaction("claim queued URLs", body)

    async def outstanding(self) -> int:
        try:
            async with self.pool.acquire() as connection:
                count = await connection.fetchval(
                    "SELECT count(*) FROM urls WHERE state = 'queued'"
                )
        except FAILURES.errors as exc:
            raise StoreError(f"{self.name}: cannot read the frontier: {reason(exc)}") from exc
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
        page_arrays = sql.page_arrays(fresh) if fresh else None
        changes = sql.url_changes(page_list, urls, skips, run_id)

        async def body(connection: asyncpg.Connection) -> None:
            if page_arrays is not None:
                await connection.execute(sql.UPSERT_PAGES, *page_arrays, run_id)
            if touched:
                await connection.execute(
                    sql.TOUCH_PAGES,
                    [r.url for r in touched],
                    [r.fetched_at for r in touched],
                    [r.attempts for r in touched],
                    [r.etag for r in touched],
                    [r.last_modified for r in touched],
                    run_id,
                )
            # every urls row of the batch in one statement, last: row locks are taken in
            # URL order and held only until the commit
            await connection.execute(sql.URL_CHANGES, *changes, run_id)

        await self._transaction(f"write {len(pages)} pages", body)

    # -- robots.txt ---------------------------------------------------------------------------
    async def get_robots(self, origin: str) -> RobotsRecord | None:
        try:
            async with self.pool.acquire() as connection:
                row = await connection.fetchrow(
                    "SELECT status, body, fetched_at FROM robots WHERE origin = $1", origin
                )
        except FAILURES.errors as exc:
            raise StoreError(f"{self.name}: cannot read robots.txt cache: {reason(exc)}") from exc
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


def _setting(settings_json: str, name: str) -> float:
    """A number from the run's settings (JSON), 0 if absent."""
    try:
        value = json.loads(settings_json).get(name)
    except (ValueError, AttributeError):
        return 0.0
    return float(value) if isinstance(value, int | float) else 0.0
