"""Frontier: which URL to fetch next, and when. Sans-IO: time comes in as ``now``; no clock read.

Owns: URL deduplication, per-host FIFO queues (breadth-first within a host), per-host
politeness (at most ``per_host`` requests in flight, ``delay`` seconds between request
starts), and the robots.txt gate (a host's robots.txt is fetched before anything else on it).

A "host" here is an origin, ``scheme://host[:port]``: the unit robots.txt applies to.

Invariants (tested as properties):
- never more than ``per_host`` jobs of one host in flight;
- never a job started on a host before its ``next_start``;
- every URL is handed out at most once;
- ``next(now)`` is O(log hosts) amortised: a heap of hosts ordered by when they may start.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from crawler.urls import url_origin


class RobotsState(Enum):
    UNKNOWN = 0
    PENDING = 1
    READY = 2


class Rules(Protocol):
    """What the frontier needs of robots.txt rules (``crawler.robots.RobotsRules``)."""

    def is_allowed(self, user_agent: str, url: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class FetchJob:
    """One request to make. ``robots`` jobs fetch ``/robots.txt`` and are not pages."""

    url: str
    depth: int
    origin: str
    robots: bool = False


@dataclass(slots=True)
class _Host:
    origin: str
    delay_s: float
    queue: deque[tuple[str, int]] = field(default_factory=deque)
    in_flight: int = 0
    next_start: float = 0.0
    scheduled: bool = False
    robots: RobotsState = RobotsState.UNKNOWN
    rules: Rules | None = None


class Frontier:
    """Per-host queues and politeness. Use ``add``, ``next``, ``release``, ``robots_done``."""

    def __init__(
        self,
        *,
        per_host: int,
        delay_s: float,
        user_agent: str = "*",
        check_robots: bool = True,
        max_crawl_delay_s: float = 30.0,
    ) -> None:
        self._per_host = per_host
        self._delay_s = delay_s
        self._user_agent = user_agent
        self._check_robots = check_robots
        self._max_crawl_delay_s = max_crawl_delay_s
        self._hosts: dict[str, _Host] = {}
        self._ready: list[tuple[float, int, str]] = []
        self._seq = 0
        self._seen: set[str] = set()
        self.queued = 0
        self.in_flight = 0
        self.skipped: list[tuple[str, int, str]] = []

    # -- adding -----------------------------------------------------------------------------
    def seen(self, url: str) -> bool:
        return url in self._seen

    def unseen(self, urls: Iterable[str]) -> list[str]:
        """The URLs not seen before, in order (a fast pre-filter before scope checks)."""
        seen = self._seen
        return [url for url in urls if url not in seen]

    def mark_seen(self, url: str) -> bool:
        """Record ``url`` as known without queueing it; ``False`` if it already was."""
        if url in self._seen:
            return False
        self._seen.add(url)
        return True

    def add(self, url: str, depth: int, now: float) -> bool:
        """Queue a normalised URL unless it was seen before. Returns whether it was queued."""
        if url in self._seen:
            return False
        self._seen.add(url)
        origin = url_origin(url)
        host = self._hosts.get(origin)
        if host is None:
            host = self._hosts[origin] = _Host(origin, self._delay_s)
            if not self._check_robots:
                host.robots = RobotsState.READY
        host.queue.append((url, depth))
        self.queued += 1
        self._schedule(host, now)
        return True

    # -- taking -----------------------------------------------------------------------------
    def next(self, now: float) -> FetchJob | float | None:
        """The next job to start now; else the time the next one may start (a float); else
        ``None`` when nothing is queued on any host that may start (more may come when jobs
        in flight finish)."""
        ready = self._ready
        while ready:
            start_at, _, origin = ready[0]
            if start_at > now:
                return start_at
            heapq.heappop(ready)
            host = self._hosts[origin]
            host.scheduled = False
            job = self._take(host, now)
            if job is not None:
                return job
        return None

    def _take(self, host: _Host, now: float) -> FetchJob | None:
        if host.robots is RobotsState.UNKNOWN:
            host.robots = RobotsState.PENDING
            return self._start(
                host, FetchJob(host.origin + "/robots.txt", 0, host.origin, True), now
            )
        while host.queue and host.in_flight < self._per_host:
            url, depth = host.queue.popleft()
            self.queued -= 1
            if host.rules is not None and not host.rules.is_allowed(self._user_agent, url):
                self.skipped.append((url, depth, "robots"))
                continue
            job = self._start(host, FetchJob(url, depth, host.origin), now)
            self._schedule(host, now)
            return job
        return None

    def _start(self, host: _Host, job: FetchJob, now: float) -> FetchJob:
        host.in_flight += 1
        self.in_flight += 1
        host.next_start = now + host.delay_s
        return job

    def _schedule(self, host: _Host, now: float) -> None:
        if host.scheduled or host.robots is RobotsState.PENDING:
            return
        if not host.queue or host.in_flight >= self._per_host:
            return
        host.scheduled = True
        self._seq += 1
        heapq.heappush(self._ready, (max(host.next_start, now), self._seq, host.origin))

    # -- finishing --------------------------------------------------------------------------
    def release(self, job: FetchJob, now: float) -> None:
        """The request for ``job`` ended (whatever its outcome): free its per-host slot."""
        host = self._hosts[job.origin]
        host.in_flight -= 1
        self.in_flight -= 1
        self._schedule(host, now)

    def robots_done(
        self, job: FetchJob, rules: Rules | None, crawl_delay_s: float | None, now: float
    ) -> None:
        """The robots.txt of ``job.origin`` is known (``rules=None``: allow everything)."""
        host = self._hosts[job.origin]
        host.robots = RobotsState.READY
        host.rules = rules
        if crawl_delay_s is not None:
            host.delay_s = max(host.delay_s, min(crawl_delay_s, self._max_crawl_delay_s))
            host.next_start = max(host.next_start, now + host.delay_s)
        self.release(job, now)

    def drain_skipped(self) -> list[tuple[str, int, str]]:
        """URLs dropped since the last call, with their depth and the reason."""
        skipped, self.skipped = self.skipped, []
        return skipped

    @property
    def hosts(self) -> int:
        return len(self._hosts)

    @property
    def empty(self) -> bool:
        """Nothing queued and nothing in flight."""
        return self.queued == 0 and self.in_flight == 0
