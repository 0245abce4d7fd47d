"""Batch: the pages of one parse request, and what its answer, a timeout or the death of its
worker does to each page's future.

Owns: the pages' outcomes (a ``Page``, or ``ParseError`` / ``ParseTimeout`` / ``ParseCrash``)
and the search for the page a request failed on: a batch that timed out or whose worker died
is sent again one page a request (``split``); a page that times out alone fails with
``ParseTimeout``, and a page that two workers died on alone fails with ``ParseCrash``. A
first death may have another cause (memory, a signal): the page gets a second worker. Before
any worker has parsed a page, deaths are the pool's to judge (``ParsePool._fail``): workers
may not work on this machine at all.
"""

from __future__ import annotations

import asyncio
import heapq
from typing import TYPE_CHECKING, Any

from crawler.errors import ParseCrash, ParseError, ParseTimeout
from parsers.page import Page, ParseFailure, ParseJob

if TYPE_CHECKING:
    from crawler.pool.parse_pool import ParsePool


PAGE_COST_BYTES = 16 << 10
"""What a page costs a worker beyond its body, in body bytes (lexbor's document, the head,
the reply): a body's bytes are most of a parse's work, but not all of it."""


def shares(jobs: list[ParseJob], parts: int) -> list[list[int]]:
    """``jobs`` (their indexes) in at most ``parts`` shares of about equal work, each in the
    jobs' order: the heaviest job first to the lightest share (LPT). Shares of equal counts
    leave one worker parsing a page of megabytes and its share while another, done with
    small ones, waits: at a crawl's start and end, where this is how pages go."""
    weight = [len(job.body or b"") + PAGE_COST_BYTES for job in jobs]
    loads = [(0, k) for k in range(max(1, min(parts, len(jobs))))]
    taken: list[list[int]] = [[] for _ in loads]
    for i in sorted(range(len(jobs)), key=weight.__getitem__, reverse=True):
        load, k = heapq.heappop(loads)
        taken[k].append(i)
        heapq.heappush(loads, (load + weight[i], k))
    return [sorted(share) for share in taken if share]


class Batch:
    """``jobs`` sent as one request, ``waiters`` their futures (in order)."""

    __slots__ = ("jobs", "pool", "waiters")

    def __init__(
        self, pool: ParsePool, jobs: list[ParseJob], waiters: list[asyncio.Future[Page]]
    ) -> None:
        self.pool = pool
        self.jobs = jobs
        self.waiters = waiters
        # No reference to the request that carries it: the request holds ``reply`` (this
        # batch), so the two would be a cycle, its bodies left to the cyclic collector,
        # which a crawl runs seldom (``crawler.cli.tuning``): every page's body, kept.

    def reply(self, ok: bool, results: Any) -> None:
        """The worker's answer: a result per page, or one error for every page."""
        self.pool.busy -= 1
        if not ok:  # handed to every page of the batch: their tasks decide
            for waiter in self.waiters:
                if not waiter.done():
                    waiter.set_exception(results)
            return
        self.pool.batches += 1
        for waiter, result in zip(self.waiters, results, strict=True):
            if waiter.done():
                continue
            if isinstance(result, ParseFailure):
                error = ParseTimeout if result.timed_out else ParseError
                waiter.set_exception(error(result.url, result.message))
            else:
                waiter.set_result(result)

    def split(self) -> bool:
        """Each page of the batch alone, to find out which one it was (``False``: handled,
        not to be sent again as it is)."""
        self.pool.busy -= 1
        for job, waiter in zip(self.jobs, self.waiters, strict=True):
            if not waiter.done():
                self.pool.send_batch([job], [waiter])
        return False

    def timed_out(self) -> None:
        """Its worker spent the pool's time limit on it (and was replaced)."""
        if len(self.jobs) > 1:
            self.split()
            return
        self.pool.busy -= 1
        if not self.waiters[0].done():
            limit = self.pool.timeout_s
            message = f"not parsed within {limit:g} s (its worker was replaced)"
            self.waiters[0].set_exception(ParseTimeout(self.jobs[0].url, message))

    def crashed(self, deaths: int) -> bool | None:
        """Its worker died working on it, the ``deaths``-th to (``Request.on_crash``):
        ``None``, send it again; ``False``, split; ``True``, failed as the page two workers
        died on."""
        if len(self.jobs) > 1:
            return self.split()
        if deaths < 2 or not self.pool.batches:
            return None
        self.pool.busy -= 1
        if not self.waiters[0].done():
            message = "two parse workers died on it"
            self.waiters[0].set_exception(ParseCrash(self.jobs[0].url, message))
        return True
