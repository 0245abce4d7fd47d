"""Requests: every request of the crawl, between a frontier job and its outcome.

Owns: the SSRF check of IP literals before a request, the host's pace as the request is
sent (``Frontier.sending``) and for its redirect hops (``Admission.pace_hop``), what the
outcome teaches the host's pace (only the server's distress slows it:
``FetchError.slows_host``; a ``Retry-After`` pauses it, for ``--max-delay`` at most), the
job's global slot, and the retry decision (``crawler.policy.retry.classify``).

Invariants: a job's slot and its host's place are given back exactly once, whatever happens
(a result, an error, a retry, a cancellation after a stop).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from crawler.engine.admission import Admission
from crawler.errors import FetchError, TooManyRedirects
from crawler.frontier.hosts import ROBOTS, FetchJob, Frontier
from crawler.net.fetch import Fetcher, FetchResult, RedirectCheck
from crawler.policy.retry import RetryPolicy, classify, parse_retry_after
from crawler.report import RunCounters

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Fetched:
    """What ``Requests.fetch`` got: a result, or an error reason, or a retry was scheduled.
    Not frozen (built per request; see ``FetchJob``)."""

    result: FetchResult | None
    error: str | None
    retried: bool = False
    redirects: bool = False
    """The error was a redirect loop, or too many hops (``TooManyRedirects``)."""


class Requests:
    """The requests of one run, made with ``fetcher``."""

    def __init__(
        self,
        *,
        fetcher: Fetcher,
        frontier: Frontier,
        admission: Admission,
        retry_policy: RetryPolicy,
        max_delay_s: float,
        slots: asyncio.Semaphore,
        counters: RunCounters,
        wake: Callable[[], None],
        stopping: Callable[[], bool],
    ) -> None:
        self._fetcher = fetcher
        self._frontier = frontier
        self._admission = admission
        self._retry_policy = retry_policy
        self._max_delay_s = max_delay_s
        self._slots = slots
        self._counters = counters
        self._wake = wake
        self._stopping = stopping

    def release_unfetched(self, job: FetchJob) -> None:
        """Give back the slots of a job that needed no request (a cached robots.txt)."""
        self._frontier.release(job, time.monotonic())
        self._slots.release()
        self._wake()

    async def fetch(
        self,
        job: FetchJob,
        *,
        any_type: bool = False,
        check_redirect: RedirectCheck | None = None,
        prefix: int | None = None,
        max_redirects: int | None = None,
    ) -> Fetched:
        """Make the request for ``job`` and free its slots; classify the outcome.
        ``check_redirect``: the hops' vetting (a page's, ``Admission.check_redirect``, by
        default); ``prefix``, ``max_redirects``: ``Fetcher.fetch``'s."""
        admission = self._admission
        start = time.monotonic()
        result: FetchResult | None = None
        error: str | None = admission.ssrf_check(job.url)
        distress = redirects = False
        known = job.known
        if error is None:
            try:
                send_at = self._frontier.sending(job, start)
                if send_at > start:  # the host's previous request went out late
                    await asyncio.sleep(send_at - start)
                    start = time.monotonic()
                check = check_redirect or partial(admission.check_redirect, depth=job.depth)
                result = await self._fetcher.fetch(
                    job.url, check, any_type=any_type,
                    pace_hop=partial(admission.pace_hop, depth=job.depth,
                                     queue=job.kind != ROBOTS),
                    etag=known.etag if known else None,
                    last_modified=known.last_modified if known else None, prefix=prefix,
                    max_redirects=max_redirects,
                )  # fmt: skip
            except FetchError as exc:
                error, distress = exc.reason, exc.slows_host
                redirects = isinstance(exc, TooManyRedirects)
                log.info("failed %s: %s", job.url, exc.message)
            except asyncio.CancelledError:
                # cancelled after a stop: free the slots; the URL stays queued in the store
                self._frontier.release(job, time.monotonic())
                self._slots.release()
                raise
        now = time.monotonic()
        status = result.status if result is not None else None
        retry_after_s = _retry_after_s(result, self._max_delay_s)
        paused = now + retry_after_s if retry_after_s is not None and status in (429, 503) else None
        self._frontier.release(job, now, latency_s=now - start, status=status,
                               paused_until=paused, failed=distress)  # fmt: skip
        self._slots.release()
        self._wake()
        outcome = classify(status, error, job.attempt, self._retry_policy,
                           retry_after_s=retry_after_s)  # fmt: skip
        if outcome.kind == "retry" and not self._stopping():
            if job.kind == ROBOTS:
                self._frontier.robots_retry(job, now + outcome.delay_s, now)
            else:
                self._frontier.retry(job, now + outcome.delay_s, now)
            self._counters.retries += 1
            return Fetched(None, None, retried=True)
        return Fetched(result, error, redirects=redirects)


def _retry_after_s(result: FetchResult | None, max_s: float) -> float | None:
    """The response's ``Retry-After``, at most ``max_s`` (``--max-delay``: a server cannot
    hold a host, and the crawl, longer than the slowest pace the crawl keeps)."""
    if result is None or not result.retry_after:
        return None
    return parse_retry_after(result.retry_after, time.time(), max_s)
