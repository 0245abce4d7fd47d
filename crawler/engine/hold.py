"""Hold: in a best-first crawl, wait a moment for a promising page's links before fetching
the poor URLs that are all the frontier has now.

A crawl with a query starts where nothing is known: the seed's few good links go out, and
while their pages are fetched and parsed (the parse workers still starting) the free slots
would take whatever else is queued, the seed's off-topic links. On a 300-page budget that
spent 5-15 % of it on pages the next second would have ranked last (bench/harvest_bench.py).
So while a page fetched at a promising priority is unfinished and the best URL that may
start now is poor, the dispatcher waits, for at most ``HOLD_MAX_S`` in a row; a page that
finishes wakes it. With no promising page in flight (a crawl tunnelling through off-topic
pages) nothing waits.
"""

from __future__ import annotations

from crawler.frontier.hosts import PAGE, FetchJob, Frontier

PROMISING = 0.5
"""A URL queued at this priority or more (``parsers.priority``: a relevant linking page, or a
query word in the anchor) is likely to bring better links than the poor ones waiting."""
HOLD_MAX_S = 1.0
"""The longest wait in a row: a slow promising page does not idle the crawl for long."""


class Hold:
    """The wait before poor URLs while promising pages are unfinished, for one run."""

    def __init__(self, frontier: Frontier) -> None:
        self._frontier = frontier
        self._promising = 0
        self._since: float | None = None

    def started(self, job: FetchJob) -> None:
        if job.kind == PAGE and job.priority >= PROMISING:
            self._promising += 1

    def finished(self, job: FetchJob) -> None:
        if job.kind == PAGE and job.priority >= PROMISING:
            self._promising -= 1

    def next(self, now: float) -> FetchJob | float | None:
        """``Frontier.next``, or the time to wait until (or a wake-up) while held."""
        held = self.until(now)
        return self._frontier.next(now) if held is None else held

    def until(self, now: float) -> float | None:
        """The time to wait until (or a wake-up) instead of taking a job now; ``None``: take."""
        if self._promising:
            best = self._frontier.best_due(now)
            if best is not None and best < PROMISING:
                if self._since is None:
                    self._since = now
                end = self._since + HOLD_MAX_S
                return end if now < end else None
        self._since = None
        return None
