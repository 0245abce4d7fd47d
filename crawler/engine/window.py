"""Window: the part of the frontier held in memory, and the store that holds the rest.

Owns: where a newly found URL goes (the memory window while it has room and this process
owns the frontier, else the store only), the URLs found since the last write (``take``),
the backlog of URLs queued in the store but not in memory, and bringing them in: a refill
from this process's own store, or a claim from a frontier shared by many processes
(PostgreSQL), with the heartbeat that keeps this process's leases.

Invariants:
- a URL is queued in at most one place, and written to the store with the next batch
  whichever it is (``found``);
- the window holds at most ``size`` queued URLs; a refill starts when it is under a quarter
  full and there is a backlog (or, shared, when the next claim is due);
- a shared frontier's fleet is done only when this process has nothing queued or running
  and the store has nothing outstanding for anyone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from crawler.engine.records import utc_now
from crawler.frontier.hosts import Frontier, Known
from storage.base import QueuedUrl, Store, UrlRecord

WINDOW = 10_000
"""Queued URLs held in memory; the rest wait in the store (bounded memory at any size)."""
CLAIM_BATCH = 10_000
CLAIM_POLL_S = 0.5
"""Shared frontier (PostgreSQL): how often an idle process asks the store for work."""


class Window:
    """The frontier's memory window over ``store``, for one run."""

    def __init__(self, store: Store, frontier: Frontier, wake: Callable[[], None]) -> None:
        self._store = store
        self._frontier = frontier
        self._wake = wake
        self.shared = not store.exclusive
        """Other processes crawl the same frontier: every URL goes through the store."""
        self.found: list[UrlRecord] = []
        self.backlog = 0
        """URLs queued in the store (or about to be written there) but not in memory."""
        self._spills = 0
        self.refilling: asyncio.Task[None] | None = None
        self.next_claim = 0.0
        self.fleet_done = False

    async def open(self, run_id: int, seeds: list[str], max_interval_s: float) -> None:
        """Queue the seeds and what is due in the store; know every URL the store knows."""
        store = self._store
        queued = await store.open_frontier(run_id, seeds, time.time(), utc_now(), max_interval_s)
        self.backlog = 0 if self.shared else queued  # a shared store is polled instead
        if store.exclusive:  # a shared frontier's store dedups what this process has not seen
            mark_seen = self._frontier.mark_seen
            async for url in store.known_urls():
                mark_seen(url)

    def waiting(self) -> int:
        """How many URLs found wait for the store's next write."""
        return len(self.found)

    def take(self) -> list[UrlRecord]:
        """The URLs found since the last call, for the store's next write."""
        found, self.found = self.found, []
        return found

    def enqueue(
        self, url: str, depth: int, now: float, priority: float = 0.0, *, known: bool = False
    ) -> bool:
        """Queue a new URL: in the memory window when there is room and this process owns
        the frontier, else in the store only (a later refill brings it in). ``False`` if it
        was seen before, unless ``known`` (a URL already marked seen, to be queued all the
        same: a redirect hop that must wait for its host)."""
        frontier = self._frontier
        if not self.shared and frontier.has_room:
            if known:
                frontier.load(url, depth, now, priority)
            elif not frontier.add(url, depth, now, priority=priority):
                return False
            self.found.append(UrlRecord(url, depth, priority, True, utc_now()))
            return True
        if not frontier.mark_seen(url) and not known:
            return False
        self.found.append(UrlRecord(url, depth, priority, False, utc_now()))
        if not self.shared:  # a shared store is polled instead (``claim``)
            self._spills += 1
            self.backlog += 1
        return True

    def maybe_refill(
        self,
        tasks: asyncio.TaskGroup,
        run_id: int,
        flush: Callable[[], Awaitable[None]],
        idle: Callable[[], bool],
        stopping: Callable[[], bool],
    ) -> None:
        """Start loading queued URLs from the store when the memory window runs low.
        ``flush`` writes what was found so far (so that the claim sees it); ``idle``: no
        job runs here; ``stopping``: the run is ending."""
        if self.refilling is not None or self._frontier.queued >= WINDOW // 4:
            return
        if self.shared:
            if not self.fleet_done and time.monotonic() >= self.next_claim:
                self.refilling = tasks.create_task(self._claim(run_id, flush, idle))
        elif self.backlog > 0:
            self.refilling = tasks.create_task(self._refill(run_id, flush, stopping))

    async def _claim(
        self, run_id: int, flush: Callable[[], Awaitable[None]], idle: Callable[[], bool]
    ) -> None:
        """One claim from a shared frontier. When nothing is left here nor in the store
        (no URL queued by any process), the fleet's crawl is over."""
        try:
            await flush()
            want = min(self._frontier.room, CLAIM_BATCH)
            rows = await self._store.claim(run_id, want, time.time())
            self._load(rows)
            if len(rows) >= want:  # there may be more at once
                self.next_claim = 0.0
                return
            self.next_claim = time.monotonic() + CLAIM_POLL_S
            if rows:
                return
            if idle() and self._frontier.empty:
                self.fleet_done = await self._store.outstanding() == 0
        finally:
            self.refilling = None
            self._wake()

    async def _refill(
        self, run_id: int, flush: Callable[[], Awaitable[None]], stopping: Callable[[], bool]
    ) -> None:
        try:
            while self.backlog > 0 and self._frontier.queued < WINDOW // 4:
                if stopping():
                    return
                spills_before = self._spills
                await flush()  # URLs found so far, visible to the claim
                want = min(self._frontier.room, CLAIM_BATCH)
                rows = await self._store.claim(run_id, want, time.time())
                self._load(rows)
                if len(rows) < want:  # the store is drained, but for URLs found meanwhile
                    self.backlog = self._spills - spills_before
                else:
                    self.backlog = max(0, self.backlog - len(rows))
                self._wake()
        finally:
            self.refilling = None
            self._wake()

    def _load(self, rows: list[QueuedUrl]) -> None:
        now, load = time.monotonic(), self._frontier.load
        for row in rows:
            known = None
            if row.content_hash is not None or row.etag or row.last_modified:
                known = Known(row.etag, row.last_modified, row.content_hash, row.interval_s)
            elif row.interval_s is not None:
                known = Known(None, None, None, row.interval_s)
            load(row.url, row.depth, now, row.priority, known)

    async def heartbeat(self, run_id: int, lease_ttl_s: float) -> None:
        """Keep this process's leases (hosts, URLs) alive in a shared frontier."""
        while True:
            await asyncio.sleep(lease_ttl_s / 3)
            await self._store.heartbeat(run_id, time.time())
