"""Frontier: which URL to fetch next, and when. Sans-IO: time comes in as ``now``; no clock read.

Owns: URL deduplication, per-host queues (breadth-first within a host, or best-first by a
priority when the crawl has a query: highest first, FIFO among equals), per-host
politeness (at most ``per_host`` requests in flight; request starts spaced by a delay that
adapts to the server, ``crawler.frontier.pace.HostPace``; ``Retry-After`` pauses), retries
(re-queued at the head of their host's queue, not before their backoff), the robots.txt gate
(a host's robots.txt is fetched before anything else on it) and the per-host page budget.

A "host" here is an origin, ``scheme://host[:port]``: the unit robots.txt applies to.

Invariants (tested as properties):
- never more than ``per_host`` jobs of one host in flight;
- never a job started on a host before its ``next_start``, but for ``EARLY_S`` early when the
  host has no floor delay, no pause and no retry waiting (its starts still come no faster
  than its delay allows over any stretch of time, but for a burst of ``EARLY_S`` worth);
- requests of a host go out at least ``min_delay_s`` apart (``--delay``, ``Crawl-delay``) as
  sent, not only as handed out: a job whose task ran late holds back the next (``sending``);
- every URL is handed out at most once, except as an explicit retry;
- a redirect hop (``hop``) keeps its host's pace like a job: it waits for the host's next
  start, and the host's next start waits for it;
- ``next(now)`` is O(log hosts) amortised: a heap of hosts ordered by when they may start;
  one call drops at most ``MAX_REFUSALS_PER_CALL`` refused URLs before it returns ``now``
  (come back at once): a host whose queue robots.txt refuses by the thousand never holds
  the event loop.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple, Protocol

from crawler.frontier.pace import HostPace, distress
from crawler.frontier.seen import SeenSet
from crawler.policy.scope import url_origin

PAGE, ROBOTS, SITEMAP = "page", "robots", "sitemap"

EARLY_S = 0.001
"""How long before its host's next start a job may start when the host has no floor delay
(``--delay 0``, no ``Crawl-delay``), no ``Retry-After`` pause and no retry's backoff pending
(``_early_s``): the adaptive delay of a fast server is a fraction of a millisecond, and a
dispatcher that waited on a timer for each such gap spent more on the timer than on the
request (``bench/RESULTS.md``, dispatch). A start made early moves the next one on from the planned start, not from
``now``, so the delay still holds on average."""


MAX_REFUSALS_PER_CALL = 256
"""Refused URLs (robots.txt, the per-host budget, ``gate``) one ``next`` call drops at most."""
_YIELD = object()
"""``_take``'s answer after ``MAX_REFUSALS_PER_CALL`` refusals: more may follow, later."""


class RobotsState(Enum):
    UNKNOWN = 0
    PENDING = 1
    READY = 2


class Known(NamedTuple):
    """What an earlier fetch of a URL left: validators for a conditional GET, the content
    hash to tell an unchanged body, and the recrawl interval that made it due."""

    etag: str | None
    last_modified: str | None
    content_hash: str | None
    interval_s: float | None


class Rules(Protocol):
    """What the frontier needs of robots.txt rules (``crawler.policy.robots.RobotsRules``)."""

    def is_allowed(self, user_agent: str, url: str) -> bool: ...


@dataclass(slots=True)
class FetchJob:
    """One request to make: a page, a host's ``/robots.txt`` or a sitemap.

    Not frozen, though read-only by convention: one is built per request, and a frozen
    dataclass's ``__init__`` costs ~10x as much (an ``object.__setattr__`` per field).
    """

    url: str
    depth: int
    origin: str
    kind: str = PAGE
    attempt: int = 0
    """Retries already made for this URL."""
    known: Known | None = None
    """Set when the URL was fetched before (a recrawl)."""
    priority: float = 0.0
    """The priority it was queued at when it was taken (best-first crawls)."""

    @property
    def robots(self) -> bool:
        return self.kind == ROBOTS


_Entry = tuple[float, int, str, int, str, int, "Known | None"]
"""A host's queue entry: (-priority, sequence, url, depth, kind, attempt, known)."""


@dataclass(slots=True)
class _Host:
    origin: str
    pace: HostPace
    queue: list[_Entry] = field(default_factory=list)
    """A heap of (-priority, sequence, url, depth, kind, attempt, known)."""
    in_flight: int = 0
    next_start: float = 0.0
    held_until: float = 0.0
    """No job before this, not even ``EARLY_S`` early: a retry's backoff (``retry``)."""
    sent_at: float = -math.inf
    """When the host's latest request was (or will be) sent: ``sending``."""
    scheduled: bool = False
    robots: RobotsState = RobotsState.UNKNOWN
    rules: Rules | None = None
    robots_reason: str = "robots"
    robots_attempt: int = 0
    pages_issued: int = 0
    due_key: float | None = None
    """Best-first: the key of the host's live entry in ``BestFirstFrontier._due`` (minus
    its best queued priority when it went in); ``None`` when it has none."""


class Frontier:
    """Per-host queues and politeness. ``add``, ``next``, ``release``, ``retry``, ``robots_done``."""

    def __init__(
        self,
        *,
        per_host: int,
        delay_s: float,
        max_delay_s: float = 60.0,
        user_agent: str = "*",
        check_robots: bool = True,
        max_crawl_delay_s: float = 30.0,
        max_pages_per_host: int | None = None,
        window: int = 1 << 62,
    ) -> None:
        self._per_host = per_host
        self._delay_s = delay_s
        self._max_delay_s = max(max_delay_s, delay_s)
        self._user_agent = user_agent
        self._check_robots = check_robots
        self._max_crawl_delay_s = max_crawl_delay_s
        self._max_pages_per_host = max_pages_per_host
        self._hosts: dict[str, _Host] = {}
        self._ready: list[tuple[float, int, str]] = []
        self._seq = 0
        self._window = window
        self._seen = SeenSet()
        """``hash()`` of every URL known: a million URLs in ~10 MB (their strings would
        take ~100 MB, a Python set of the hashes ~66 MB). A collision (p ~ 3e-8 at 1 M
        URLs) skips a URL."""
        self.queued = 0
        self.in_flight = 0
        self.skipped: list[tuple[str, int, str]] = []
        self._live: dict[str, _Entry] | None = None
        """Best-first only: each queued page URL's live heap entry (``BestFirstFrontier``)."""
        self.gate: Callable[[str], str | None] | None = None
        """Asked about each queued page URL as it is taken, if set: ``None`` to fetch it,
        or why not (it is then dropped, like a robots.txt refusal)."""

    # -- adding -----------------------------------------------------------------------------
    def seen(self, url: str) -> bool:
        return hash(url) in self._seen

    def missing(self, urls: Iterable[str]) -> list[bool]:
        """For each URL, whether it was not seen before (one pass over the seen set)."""
        return self._seen.missing(map(hash, urls))

    def unseen(self, urls: Iterable[str]) -> list[str]:
        """The URLs not seen before, in order (a fast pre-filter before scope checks)."""
        urls = list(urls)
        missing = self._seen.missing(hash(url) for url in urls)
        return [url for url, new in zip(urls, missing, strict=True) if new]

    def mark_seen(self, url: str) -> bool:
        """Record ``url`` as known without queueing it; ``False`` if it already was."""
        return self._seen.add(hash(url))

    @property
    def has_room(self) -> bool:
        """Whether the memory window takes more queued URLs (the rest wait in the store)."""
        return self.queued < self._window

    @property
    def room(self) -> int:
        return max(0, self._window - self.queued)

    def add(
        self, url: str, depth: int, now: float, kind: str = PAGE, priority: float = 0.0
    ) -> bool:
        """Queue a normalised URL unless it was seen before. Returns whether it was queued.

        Within a host, higher ``priority`` goes first; equal priorities go in FIFO order.
        """
        if not self._seen.add(hash(url)):
            return False
        self._push(url, depth, now, kind, priority, None)
        return True

    def load(
        self, url: str, depth: int, now: float, priority: float = 0.0, known: Known | None = None
    ) -> None:
        """Queue a URL claimed from the store (known already: no seen-check)."""
        self._seen.add(hash(url))
        self._push(url, depth, now, PAGE, priority, known)

    def _push(
        self, url: str, depth: int, now: float, kind: str, priority: float, known: Known | None
    ) -> None:
        host = self._host(url_origin(url))
        self._seq += 1
        entry = (-priority, self._seq, url, depth, kind, 0, known)
        heapq.heappush(host.queue, entry)
        if self._live is not None and kind == PAGE:
            self._queued_live(host, entry)
        self.queued += 1
        self._schedule(host, now)

    def _queued_live(self, host: _Host, entry: _Entry) -> None:
        """A best-first frontier's (``crawler.frontier.best_first``) record of a new entry."""

    def raise_priority(self, url: str, by: float, now: float) -> bool:
        """Best-first only (``BestFirstFrontier``): here nothing moves."""
        return False

    def raise_priorities(self, raises: Iterable[tuple[str, float]], now: float) -> bool:
        """Best-first only (``BestFirstFrontier``): here nothing moves."""
        return False

    def best_due(self, now: float) -> float | None:
        """Best-first only (``BestFirstFrontier``): here ``None``."""
        return None

    def _host(self, origin: str) -> _Host:
        host = self._hosts.get(origin)
        if host is None:
            pace = HostPace(self._delay_s, self._max_delay_s, target_concurrency=self._per_host)
            host = self._hosts[origin] = _Host(origin, pace)
            if not self._check_robots:
                host.robots = RobotsState.READY
        return host

    # -- taking -----------------------------------------------------------------------------
    def next(self, now: float) -> FetchJob | float | None:
        """The next job to start now; else the time the next one may start (a float); else
        ``None`` when nothing is queued on any host that may start (more may come when jobs
        in flight finish)."""
        ready = self._ready
        while ready:
            start_at, _, origin = ready[0]
            host = self._hosts[origin]
            if start_at > now and start_at > now + self._early_s(host, now):
                return start_at
            heapq.heappop(ready)
            host.scheduled = False
            if host.next_start > now + self._early_s(host, now):  # pushed back after it was
                self._schedule(host, now)  # scheduled (a retry, a pause)
                continue
            job = self._take(host, now)
            if job is _YIELD:
                return now
            if job is not None:
                return job  # type: ignore[return-value]
        return None

    def _take(self, host: _Host, now: float) -> FetchJob | object | None:
        if host.robots is RobotsState.UNKNOWN:
            host.robots = RobotsState.PENDING
            url = host.origin + "/robots.txt"
            return self._start(
                host, FetchJob(url, 0, host.origin, ROBOTS, host.robots_attempt), now
            )
        refused = 0
        live = self._live
        while host.queue and host.in_flight < self._per_host:
            entry = heapq.heappop(host.queue)
            _, _, url, depth, kind, attempt, known = entry
            if live is not None and kind == PAGE and not attempt:
                if live.get(url) is not entry:
                    continue  # replaced by a higher-priority entry (``raise_priority``)
                del live[url]
            self.queued -= 1
            reason = self._refusal(host, url, kind, attempt)
            if reason is not None:
                self.skipped.append((url, depth, reason))
                refused += 1
                if refused >= MAX_REFUSALS_PER_CALL:
                    self._schedule(host, now)
                    return _YIELD
                continue
            if kind == PAGE and attempt == 0:
                host.pages_issued += 1
            job = FetchJob(url, depth, host.origin, kind, attempt, known, -entry[0])
            self._start(host, job, now)
            self._schedule(host, now)
            return job
        return None

    @staticmethod
    def _early_s(host: _Host, now: float) -> float:
        """How early a job of ``host`` may start: ``EARLY_S``, or 0 under a floor delay, a
        pause or a retry's backoff."""
        pace = host.pace
        if pace.min_delay_s == 0 and pace.paused_until <= now and host.held_until <= now:
            return EARLY_S
        return 0.0

    def _refusal(self, host: _Host, url: str, kind: str, attempt: int) -> str | None:
        if host.rules is not None and not host.rules.is_allowed(self._user_agent, url):
            return host.robots_reason
        if kind != PAGE or attempt:
            return None
        limit = self._max_pages_per_host
        if limit is not None and host.pages_issued >= limit:
            return "host-limit"
        return self.gate(url) if self.gate is not None else None

    def _start(self, host: _Host, job: FetchJob, now: float) -> FetchJob:
        host.in_flight += 1
        self.in_flight += 1
        # From the planned start when this one is early (``EARLY_S``): the delay holds on average.
        host.next_start = host.pace.next_start_after(max(now, host.next_start))
        return job

    def _schedule(self, host: _Host, now: float) -> None:
        if host.scheduled or host.robots is RobotsState.PENDING:
            return
        if not host.queue or host.in_flight >= self._per_host:
            return
        host.scheduled = True
        self._seq += 1
        heapq.heappush(self._ready, (max(host.next_start, now), self._seq, host.origin))

    def sending(self, job: FetchJob, now: float) -> float:
        """The request of ``job`` (handed out by ``next``) is about to be sent at ``now``:
        the time it may be sent, ``now`` or later.

        ``next`` spaces jobs as it hands them out; the task that sends one can still run late
        (a busy event loop, a starved process) while the next one runs on time. This keeps
        the host's floor delay (``--delay``, ``Crawl-delay``) between requests as sent, and
        pushes the host's next start back to match.
        """
        host = self._hosts[job.origin]
        min_delay = host.pace.min_delay_s
        at = max(now, host.sent_at + min_delay)
        host.sent_at = at
        if min_delay:
            host.next_start = max(host.next_start, at + min_delay)
        return at

    def hop(self, url: str, now: float, limit_s: float) -> float | None:
        """A job in flight follows a redirect to ``url``: the seconds its request must wait
        for the pace of ``url``'s host (its next start, its floor delay since its latest
        request as sent, a ``Retry-After`` pause, a retry's backoff), which then counts as
        the host's latest start; ``None`` (nothing recorded) when that wait is longer than
        ``limit_s``, the time the fetch has left."""
        host = self._host(url_origin(url))
        pace = host.pace
        at = max(now, host.next_start, host.sent_at + pace.min_delay_s, pace.paused_until,
                 host.held_until)  # fmt: skip
        if at - now > limit_s:
            return None
        host.sent_at = at
        host.next_start = max(host.next_start, pace.next_start_after(at))
        return at - now

    # -- finishing --------------------------------------------------------------------------
    def release(
        self,
        job: FetchJob,
        now: float,
        *,
        latency_s: float | None = None,
        status: int | None = None,
        paused_until: float | None = None,
        failed: bool = False,
    ) -> None:
        """The request for ``job`` ended: free its slot and let its outcome pace the host.

        ``status`` with ``latency_s``: a response; ``failed``: no response, for the server's
        sake (a timeout, a connection refused or reset), which slows the host down; neither:
        no request was made, or the crawler itself refused to go on (nothing to learn of the
        server's pace). ``paused_until``: the server's ``Retry-After``, as a time on the
        ``now`` clock.
        """
        host = self._hosts[job.origin]
        host.in_flight -= 1
        self.in_flight -= 1
        if status is not None:
            host.pace.on_response(latency_s if latency_s is not None else 0.0, status, now)
            failed = distress(status)
        elif failed:
            host.pace.on_error(now)
        if failed and paused_until is None:
            # The next request waits the delay the distress taught, from now (unless the
            # server said when to come back: ``Retry-After``).
            host.next_start = max(host.next_start, now + host.pace.delay_s)
        if paused_until is not None:
            host.pace.pause_until(paused_until)
        host.next_start = max(host.next_start, host.pace.paused_until)
        self._schedule(host, now)

    def retry(self, job: FetchJob, at: float, now: float) -> None:
        """Queue ``job`` again at the head of its host's queue, not to start before ``at``.

        Call after ``release``. The whole host waits: a server that needs a retry is one to
        be gentle with.
        """
        host = self._hosts[job.origin]
        self._seq += 1
        entry = (-math.inf, self._seq, job.url, job.depth, job.kind, job.attempt + 1, job.known)
        heapq.heappush(host.queue, entry)
        self.queued += 1
        host.next_start = max(host.next_start, at)
        host.held_until = max(host.held_until, at)
        self._schedule(host, now)

    def robots_done(
        self,
        job: FetchJob,
        rules: Rules | None,
        crawl_delay_s: float | None,
        now: float,
        *,
        reason: str = "robots",
    ) -> None:
        """The robots.txt of ``job.origin`` is known (``rules=None``: allow everything).
        Call after ``release`` of the robots job (or instead of a request, after it).

        ``reason`` is recorded for the URLs the rules refuse (``robots``, or
        ``robots-unavailable`` when the rules stand for an unreachable robots.txt).
        """
        host = self._hosts[job.origin]
        host.robots = RobotsState.READY
        host.rules = rules
        host.robots_reason = reason
        if crawl_delay_s is not None:
            host.pace.raise_min_delay(min(crawl_delay_s, self._max_crawl_delay_s))
            host.next_start = max(host.next_start, host.pace.next_start_after(now))
        self._schedule(host, now)

    def robots_retry(self, job: FetchJob, at: float, now: float) -> None:
        """robots.txt could not be had yet: ask again at ``at``; the host's URLs wait.
        (Call after ``release``.)"""
        host = self._hosts[job.origin]
        host.robots = RobotsState.UNKNOWN
        host.robots_attempt = job.attempt + 1
        host.next_start = max(host.next_start, at)
        host.held_until = max(host.held_until, at)
        self._schedule(host, now)

    def drain_skipped(self) -> list[tuple[str, int, str]]:
        """URLs dropped since the last call, with their depth and the reason."""
        skipped, self.skipped = self.skipped, []
        return skipped

    def allowed_by_robots(self, url: str) -> bool | None:
        """Whether the known robots.txt of ``url``'s origin allows it; ``None`` if not known."""
        host = self._hosts.get(url_origin(url))
        if host is None or host.robots is not RobotsState.READY:
            return None if self._check_robots else True
        return host.rules is None or host.rules.is_allowed(self._user_agent, url)

    @property
    def hosts(self) -> int:
        return len(self._hosts)

    @property
    def empty(self) -> bool:
        """Nothing queued and nothing in flight."""
        return self.queued == 0 and self.in_flight == 0
