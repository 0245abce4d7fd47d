"""The contracts of storage: what the engine needs from a store, what the readers of a
database (exports, ``crawl runs``, ``rank``, ``crawl stats``) need from it, and the records
and selections that cross those boundaries.

Owns: the ``Store`` and ``Reader`` protocols, the records a store takes and gives
(``PageRecord``, ``UrlRecord``, ``QueuedUrl``, ``SkipRecord``, ``RobotsRecord``,
``RunSummary``), the page selection a reader applies (``ExportFilter``) and ``StoreError``.
Implementations: ``storage.sqlite`` and ``storage.postgres``; ``storage.factory`` picks one
for a ``--db`` value. Invariant: this module imports nothing of the project, so every other
module of storage may import it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol


@dataclass(slots=True, kw_only=True)
class PageRecord:
    """One fetched URL as stored: a parsed page, a non-HTML response or a failure.

    The parsed-page fields default to ``None``: records of responses that were not parsed
    leave them out. Not frozen: one is built per page, which a frozen dataclass makes
    costlier, and the engine fills in the schedule fields once; treat a record handed over
    as read-only.
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
    harvest: str | None = None
    """JSON: with a query, the scored pages of each quarter of the run by relevance band."""


@dataclass(frozen=True, slots=True)
class RunSample:
    """A running crawl's progress at one moment (``run_samples``: ``crawl serve`` charts it)."""

    at: float
    """Unix time."""
    elapsed_s: float
    done: int
    failed: int
    queued: int
    in_flight: int
    bytes: int


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
        schedule, and skip decisions. ``urls`` is the store's: it may empty the list once
        read, so that a write holds its statements, not the records as well."""
        ...

    async def add_sample(self, run_id: int, sample: RunSample) -> None:
        """Record the run's progress at one moment (``run_samples``)."""
        ...

    async def get_robots(self, origin: str) -> RobotsRecord | None: ...

    async def put_robots(self, record: RobotsRecord) -> None: ...

    async def finish_run(self, run_id: int, summary: RunSummary, ended_at: str) -> None: ...


class StoreError(Exception):
    """The database could not be opened, migrated, read or written. The message names it
    (a DSN without its password).

    Storage's own error, raised by every store and reader. The crawler maps it to its
    ``crawler.errors.StorageError`` at its boundary (storage imports nothing of the crawler).
    """


class StoreRefused(StoreError):
    """The database named is not one a crawl can use: a folder, a missing or read-only
    folder, a file that is not SQLite, a newer schema. The user's input, not a failure: the
    crawler maps it to its ``ConfigError`` (exit 2)."""


@dataclass(frozen=True, slots=True)
class ExportFilter:
    """Which pages a read selects (an export, a WARC). ``since``: ISO-8601 UTC, compared
    with ``fetched_at``."""

    dedup: bool = False
    """Leave out exact duplicates (``duplicate_of``) and near-duplicates."""
    since: str | None = None
    min_score: float | None = None

    @classmethod
    def parse(
        cls, *, dedup: bool = False, since: str | None = None, min_score: float | None = None
    ) -> ExportFilter:
        """From user input; ``StoreError`` naming ``--since`` if it is not a date."""
        stamp = None
        if since is not None:
            try:
                moment = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
            except ValueError:
                raise StoreError(
                    f"--since {since!r}: not an ISO-8601 date or time (e.g. 2026-11-29)"
                ) from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            stamp = moment.astimezone(UTC).isoformat(timespec="seconds")
        return cls(dedup, stamp, min_score)

    def where(self) -> tuple[str, tuple[object, ...]]:
        """A SQL ``WHERE`` clause (or ``""``) over ``pages`` and its parameters, with ``?``
        placeholders (a PostgreSQL reader numbers them)."""
        clauses: list[str] = []
        params: list[object] = []
        if self.dedup:
            clauses.append("duplicate_of IS NULL AND near_duplicate_of IS NULL")
        if self.since is not None:
            clauses.append("fetched_at >= ?")
            params.append(self.since)
        if self.min_score is not None:
            clauses.append("score >= ?")
            params.append(self.min_score)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), tuple(params)


STORED_COLUMNS = ("url", "final_url", "fetched_at", "headers", "body")
"""The columns of a stored response (``--store-body``), as ``Reader.iter_stored`` gives them."""


class Reader(Protocol):
    """Read-only access to one crawl database from synchronous code: what exports, WARC,
    ``crawl runs``, ``rank`` and ``crawl stats`` read. ``storage.factory.open_reader`` gives
    the one for a ``--db`` value, so none of them asks which kind of database it is.

    Each call opens its own read-only connection and closes it before it returns (a
    generator: once exhausted or closed), so a reader holds nothing between calls and may
    read while a crawl writes. Rows come in the order pages were first stored. Errors are
    ``StoreError`` naming the database (``name``).
    """

    name: str
    """The database as messages name it: the path, or the DSN without its password."""

    def iter_rows(
        self, columns: tuple[str, ...], selection: ExportFilter
    ) -> Generator[tuple[object, ...], None, None]:
        """``columns`` (names of ``pages`` columns, or SQL expressions over them) of the
        selected pages, streamed: one chunk of rows in memory at a time."""
        ...

    def iter_stored(
        self, selection: ExportFilter
    ) -> Generator[tuple[object, ...] | None, None, None]:
        """``STORED_COLUMNS`` of each selected page, or ``None`` for a page known to have no
        stored body; a row's headers or body may still be ``None`` (the page may have changed
        since it was selected). Bodies are large: few are held in memory at a time."""
        ...

    def read_runs(self) -> list[tuple[object, ...]]:
        """The run history, oldest first: (id, started_at, ended_at, status, reason,
        pages_ok, pages_failed, pages_unchanged, bytes)."""
        ...

    def read_tokens(self) -> list[tuple[str, str | None, bytes]]:
        """(url, title, token blob) of every page that has tokens, in storage order."""
        ...

    def read_stats(self, now: float) -> dict[str, object]:
        """The summary ``crawl stats`` prints (``storage.stats.read_stats``)."""
        ...
