"""What the engine needs from a store, and the records it hands over.

Owns: the ``Store`` protocol and ``PageRecord``. Implementations: ``storage.sqlite``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True, kw_only=True)
class PageRecord:
    """One fetched URL as stored: a parsed page, a non-HTML response or a failure.

    The parsed-page fields default to ``None``: records of responses that were not parsed
    leave them out. Not frozen: building one per page is 3x cheaper that way, and the
    engine fills in the schedule fields once; treat a record handed over as read-only.
    """

    url: str
    final_url: str
    status: int | None
    error: str | None
    content_type: str | None
    depth: int
    body_bytes: int | None
    fetched_at: str
    title: str | None = None
    text: str | None = None
    lang: str | None = None
    canonical: str | None = None
    meta_robots: str | None = None
    content_hash: str | None = None
    links_json: str = "[]"
    """Every outlink, as a JSON array of normalised URLs."""
    attempts: int = 1
    duplicate_of: str | None = None
    score: float | None = None
    tokens: bytes | None = None
    simhash: int | None = None
    """Unsigned 64-bit; stored as the signed integer with the same bits."""
    near_duplicate_of: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    """The response's validators, sent back as ``If-None-Match`` / ``If-Modified-Since``."""
    unchanged: bool = False
    """A recrawl found the stored version current (304, or the same body): only the fetch
    time, validators and schedule are updated; the stored content stays."""
    next_fetch_at: float | None = None
    """Unix time the URL is due again; ``interval_s`` the interval that gave it."""
    interval_s: float | None = None
    body: bytes | None = None
    """``--store-body``: the body as received (zlib-compressed); ``headers`` its JSON."""
    headers: str | None = None
    extract: str | None = None
    """JSON of the ``extract`` hook's result."""

    @property
    def state(self) -> str:
        """The URL's state after this fetch: ``done``, or ``failed`` (no response, >= 400)."""
        if self.error is not None or self.status is None or self.status >= 400:
            return "failed"
        return "done"


@dataclass(slots=True)
class UrlRecord:
    """A URL newly found and queued. ``leased``: the run holds it in its memory window
    already; otherwise it waits in the store until a run claims it. Not frozen, like
    ``PageRecord`` (one per link queued); treat it as read-only."""

    url: str
    depth: int
    priority: float
    leased: bool
    found_at: str


@dataclass(frozen=True, slots=True)
class QueuedUrl:
    """A queued URL claimed from the store, with what a conditional recrawl needs."""

    url: str
    depth: int
    priority: float
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    interval_s: float | None = None


@dataclass(slots=True)
class SkipRecord:
    """A URL the crawler decided not to fetch, and why. Not frozen, like ``PageRecord`` (one
    per link refused: several a page); treat it as read-only."""

    url: str
    reason: str
    depth: int | None
    decided_at: str


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """A robots.txt as fetched: kept so that later runs reuse it for a while."""

    origin: str
    status: int
    body: bytes | None
    fetched_at: str


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The counters a run ends with."""

    status: str
    reason: str
    pages_ok: int
    pages_failed: int
    bytes: int
    pages_unchanged: int = 0


class Store(Protocol):
    """Persistence for one crawl. Opened with ``open()`` and closed with ``close()``.

    ``exclusive``: one process owns the whole frontier (it holds the run lock), so URLs it
    finds may go straight to its memory window; otherwise every URL goes through the store.
    """

    exclusive: bool

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def start_run(self, seeds: int, settings_json: str, started_at: str) -> int: ...

    async def open_frontier(
        self, run_id: int, seeds: list[str], now: float, found_at: str, max_interval_s: float
    ) -> int:
        """Make the stored frontier ready for a run: leases of dead runs freed, pages due
        for a recrawl queued again (``next_fetch_at <= now``, or last fetched more than
        ``max_interval_s`` ago), new seeds queued. Returns how many URLs are queued."""
        ...

    def known_urls(self) -> AsyncIterator[str]:
        """Every URL in the frontier, whatever its state (to prime the run's seen-set)."""
        ...

    async def claim(self, run_id: int, limit: int, now: float) -> list[QueuedUrl]:
        """Lease up to ``limit`` queued URLs to the run, highest priority first.

        A shared store first leases whole hosts (one run per host at a time, so per-host
        politeness holds across processes; a dead run's hosts are taken over when their
        lease expires) and returns queued URLs of the hosts the run holds."""
        ...

    async def outstanding(self) -> int:
        """URLs queued and not yet fetched, leased by any run (0: the crawl is complete)."""
        ...

    async def heartbeat(self, run_id: int, now: float) -> None:
        """Keep the run's leases alive (shared frontiers; a no-op for an exclusive one)."""
        ...

    async def save(
        self,
        pages: list[PageRecord],
        urls: list[UrlRecord],
        skips: list[SkipRecord],
        run_id: int,
    ) -> None:
        """In one transaction: new URLs queued, pages stored with their URL's new state and
        schedule, and skip decisions."""
        ...

    async def get_robots(self, origin: str) -> RobotsRecord | None: ...

    async def put_robots(self, record: RobotsRecord) -> None: ...

    async def finish_run(self, run_id: int, summary: RunSummary, ended_at: str) -> None: ...


class StoreError(Exception):
    """The database could not be opened, migrated, read or written. The message names it."""
