"""What a crawl tells its caller: live progress snapshots, each stored page as a
``CrawledPage``, and the final ``CrawlReport``.

Owns: the counters of one run (``RunCounters``, mutated only by the engine) and their frozen
views. Pure: the engine passes the times in. A leaf: it imports nothing of the crawler's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.base import PageRecord


@dataclass(frozen=True, slots=True)
class Progress:
    """A snapshot for progress displays."""

    done: int
    queued: int
    in_flight: int
    errors: int
    bytes: int
    elapsed_s: float
    parse_busy: int = 0

    @property
    def pages_per_s(self) -> float:
        """Average rate since the run started."""
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def bytes_per_s(self) -> float:
        """Average download rate (body bytes) since the run started."""
        return self.bytes / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class CrawlReport:
    """The outcome of one run.

    ``status`` is ``finished`` (nothing left to do, or a limit reached), ``interrupted``
    (stopped by a signal or ``Crawler.stop()``) or ``failed``; ``reason`` says why it ended.
    """

    run_id: int
    db: str
    status: str
    reason: str
    started_at: str
    ended_at: str
    elapsed_s: float
    seeds: int
    pages_ok: int
    pages_failed: int
    bytes: int
    by_status: dict[int, int]
    errors: dict[str, int]
    skipped: dict[str, int]
    queued_left: int
    pages_unchanged: int = 0
    """Recrawled pages found unchanged (304 or the same body): not stored again."""
    harvest: tuple[tuple[int, ...], ...] = ()
    """With a query: the scored pages of each quarter of the run (in the order they came)
    by relevance band, ``parsers.priority.BAND_NAMES`` order (none, low, mid, high)."""

    @property
    def harvest_json(self) -> str | None:
        """``harvest`` as JSON (``runs.harvest``), ``None`` without a query."""
        return json.dumps(self.harvest) if self.harvest else None

    @property
    def pages(self) -> int:
        """URLs fetched in this run: ok, failed and unchanged."""
        return self.pages_ok + self.pages_failed + self.pages_unchanged

    @property
    def pages_per_s(self) -> float:
        """Average rate of the run."""
        return self.pages / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(slots=True)
class RunCounters:
    """Mutable tallies kept by the engine while it runs."""

    pages_ok: int = 0
    pages_failed: int = 0
    pages_unchanged: int = 0
    bytes: int = 0
    retries: int = 0
    by_status: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    scored: bytearray = field(default_factory=bytearray)
    """With a query: each scored page's relevance band (``parsers.priority.band``), in the
    order the pages came (a byte a page)."""

    def harvest(self) -> tuple[tuple[int, ...], ...]:
        """``CrawlReport.harvest`` of the pages scored so far."""
        return harvest_quarters(self.scored)

    def count_page(
        self,
        status: int | None,
        error: str | None,
        body_bytes: int | None,
        unchanged: bool = False,
    ) -> None:
        if unchanged:  # a recrawl found the stored version current (304 or the same body)
            self.pages_unchanged += 1
            self.by_status[status or 0] += 1
            self.bytes += body_bytes or 0
            return
        if status is not None:
            self.by_status[status] += 1
        if error is not None:
            self.errors[error] += 1
        if error is None and status is not None and 200 <= status < 400:
            self.pages_ok += 1
        else:
            self.pages_failed += 1
        self.bytes += body_bytes or 0

    @property
    def done(self) -> int:
        return self.pages_ok + self.pages_failed + self.pages_unchanged


BAND_NAMES = ("none", "low", "mid", "high")
"""A page's relevance band (``parsers.priority.page_relevance``, in [0, 1)) for a focused
crawl's harvest shape: no query word; below ``BAND_CUTS[0]``; below ``BAND_CUTS[1]``; above."""
BAND_CUTS = (0.1, 0.25)


def band(relevance: float) -> int:
    """The index in ``BAND_NAMES`` of a page of ``relevance``."""
    if relevance <= 0.0:
        return 0
    return 1 if relevance < BAND_CUTS[0] else 2 if relevance < BAND_CUTS[1] else 3


def harvest_quarters(bands: bytes | bytearray) -> tuple[tuple[int, ...], ...]:
    """Pages by relevance band (``parsers.priority.BAND_NAMES``) in each quarter of
    ``bands`` (the pages in the order they came); ``()`` for none. A focused crawl that
    keeps its focus has as many high pages in its last quarter as in its first."""
    if not bands:
        return ()
    edges = [round(len(bands) * k / 4) for k in range(5)]
    return tuple(
        tuple(bands.count(b, edges[k], edges[k + 1]) for b in range(len(BAND_NAMES)))
        for k in range(4)
    )


def harvest_text(harvest: tuple[tuple[int, ...], ...] | list[list[int]]) -> str:
    """``harvest`` in a line: ``high 70 72 75 73, mid 3 2 1 2, ...`` (bands without pages left
    out), quarters of the run left to right."""
    parts = []
    for index in reversed(range(len(BAND_NAMES))):
        counts = [quarter[index] for quarter in harvest]
        if any(counts):
            parts.append(f"{BAND_NAMES[index]} {' '.join(map(str, counts))}")
    return ", ".join(parts)


ProgressCallback = Callable[[Progress], None]
"""Called by the engine with a fresh ``Progress`` about twice a second."""


@dataclass(frozen=True, slots=True)
class CrawledPage:
    """One URL the crawl fetched, as stored: a parsed page, another response or a failure."""

    url: str
    final_url: str
    status: int | None
    """HTTP status; ``None`` when there was no response (then ``error`` says why)."""
    error: str | None
    content_type: str | None
    title: str | None
    text: str | None
    lang: str | None
    canonical: str | None
    depth: int
    fetched_at: str
    links: tuple[str, ...]
    """Every outlink (normalised, absolute), followed or not."""
    score: float | None
    duplicate_of: str | None
    near_duplicate_of: str | None
    extract: Any
    """The ``extract`` hook's result (``None`` without a hook)."""
    unchanged: bool
    """A recrawl found the stored version current: ``title``/``text`` are not repeated."""

    @classmethod
    def from_record(cls, record: PageRecord) -> CrawledPage:
        """The public view of a stored record (``storage.base.PageRecord``)."""
        return cls(
            url=record.url,
            final_url=record.final_url,
            status=record.status,
            error=record.error,
            content_type=record.content_type,
            title=record.title,
            text=record.text,
            lang=record.lang,
            canonical=record.canonical,
            depth=record.depth,
            fetched_at=record.fetched_at,
            links=tuple(json.loads(record.links_json)) if record.links_json != "[]" else (),
            score=record.score,
            duplicate_of=record.duplicate_of,
            near_duplicate_of=record.near_duplicate_of,
            extract=json.loads(record.extract) if record.extract is not None else None,
            unchanged=record.unchanged,
        )
