"""Engine: the event-loop glue between frontier, fetcher, parse pool and store.

Owns: the one run of a crawl. It is the only module that schedules tasks; all of them live
in one ``asyncio.TaskGroup``:
- the dispatcher (``_dispatch``) takes a global slot (``concurrency``), then a job from the
  frontier, and starts a job task;
- a job task fetches, frees its slot and per-host place, has HTML parsed in the pool, feeds
  the outlinks back to the frontier and puts the page record on the bounded write queue;
- the writer saves records in batches (one transaction each);
- the ticker reports progress.
Backpressure: at most ``concurrency`` fetches and ``pipeline`` pages between fetch and store.

Per-job errors: a ``CrawlerError`` becomes a stored outcome; anything else is a bug and
fails the crawl (the TaskGroup cancels the rest).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
import zlib
from collections.abc import Iterable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING

from crawler.api import CrawledPage
from crawler.engine.discovery import Discovery
from crawler.engine.records import failure_record, page_record, plain_record, unchanged_record
from crawler.errors import CrawlerError, FetchError, ParseError, StorageError
from crawler.frontier.hosts import PAGE, ROBOTS, SITEMAP, FetchJob, Frontier, Known
from crawler.hooks import Hooks
from crawler.lock import RunLock
from crawler.net.fetch import Fetcher, FetchResult, RedirectCheck, open_session
from crawler.net.guard import HostAllowed, allow_all, allow_origins, check_url_host
from crawler.policy.recrawl import CHANGED, FAILED, FIRST, UNCHANGED, next_interval
from crawler.policy.retry import RetryPolicy, classify, parse_retry_after
from crawler.policy.scope import Scope, normalize_url, strip_userinfo, url_origin
from crawler.policy.traps import (
    TemplateBudget,
    TrapLimits,
    strip_session_ids,
    trap_reason,
    url_template,
)
from crawler.pool.forkserver import main_importable, main_needed, prestart, unguarded_line
from crawler.pool.parse_pool import ParsePool, costly
from crawler.relevance.neardup import NearDuplicates
from crawler.report import CrawlReport, Progress, ProgressCallback, RunCounters
from crawler.settings import Settings
from parsers.page import Page, ParseJob, same_content
from parsers.worker import text_terms
from storage.base import (
    PageRecord,
    QueuedUrl,
    RunSummary,
    SkipRecord,
    Store,
    StoreError,
    UrlRecord,
)
from storage.factory import is_postgres, make_store, redact_dsn

if TYPE_CHECKING:
    from crawler.relevance.focus import Focus

log = logging.getLogger(__name__)

_NEAR_DUPLICATE_MIN_CHARS = 200
"""Shorter texts make SimHash too coarse to call two pages near-duplicates."""
_ANCHOR_BONUS = 2.0
"""Priority added per query word in a link's anchor text (BM25 scores are ~0-20)."""
_HERE_MAX_BYTES = 256 << 10
"""Bodies up to this are parsed in this process while no worker is up: a few ms of the event
loop a page, ~12 ms for a link-dense one of this size (the docs' contents page cut to it;
~25 ms at 512 KiB), which a service that runs the crawl on its own loop would feel; bigger
ones wait for a worker."""


_WRITE_BATCH = 256
_WRITE_IDLE_S = 0.1
_WINDOW = 30_000
"""Queued URLs held in memory; the rest wait in the store (bounded memory at any size)."""
_CLAIM_BATCH = 10_000
_CLAIM_POLL_S = 0.5
"""Shared frontier (PostgreSQL): how often an idle process asks the store for work."""
_FOLLOW_STEP = 1000
_HOP_PRIORITY = 1e9
"""A redirect target queued because its host's pace would make it wait too long goes first
among that host's URLs."""
_STOP_GRACE_S = 5.0
"""After a stop (signal, --max-time), requests still running after this are cancelled;
their URLs stay queued in the store for the next run. A ``--max-time`` stop waits a tenth of
the budget, between 1 s and this: a 3 s budget is not stretched to 8 s by a silent server."""


_clock_cache: list[object] = [0, ""]


def utc_now() -> str:
    """Wall-clock time for storage and reports: ISO-8601, UTC, seconds (cached per second)."""
    second = int(time.time())
    if _clock_cache[0] != second:
        stamp = datetime.fromtimestamp(second, UTC).isoformat(timespec="seconds")
        _clock_cache[0], _clock_cache[1] = second, stamp
    return _clock_cache[1]  # type: ignore[return-value]


class Engine:
    """One crawl run. ``await Engine(settings, seeds).run()`` returns a ``CrawlReport``."""

    def __init__(
        self,
        settings: Settings,
        seeds: Iterable[str],
        *,
        store: Store | None = None,
        on_progress: ProgressCallback | None = None,
        progress_interval_s: float = 0.5,
        hooks: Hooks | None = None,
    ) -> None:
        self.settings = settings
        self.hooks = hooks or Hooks()
        self._main = main_needed(self.hooks.extract)
        """Parse workers import ``__main__``: the ``extract`` hook is defined there."""
        self._workers_unusable = self._main and not main_importable()
        if self._main and not self._workers_unusable and (line := unguarded_line()):
            raise SystemExit(
                f"crawler: {sys.modules['__main__'].__file__}:{line}: start the crawl under "
                '`if __name__ == "__main__":` (the parse workers import this script to find '
                "its extract hook, and would run the crawl again)"
            )
        # The parse workers' fork server preloads (numba, lexbor) on another core while
        # this process loads the query's numba, opens the store and reads the known URLs
        # (seconds for a big resumed frontier): in parallel, not one after the other.
        prestart(main=self._main)
        self.seeds, self._credentials = split_credentials(seeds)
        """Seeds without userinfo (what is stored, logged, exported); the userinfo kept here
        only, by origin, and sent to that origin only (``open_session``)."""
        self._owns_store = store is None
        self._store: Store = (
            store if store is not None else make_store(settings.db, lease_ttl_s=settings.lease_ttl)
        )
        self._on_progress = on_progress
        self._progress_interval_s = progress_interval_s
        self._scope = Scope(
            self.seeds, settings.scope, settings.include_patterns, settings.exclude_patterns
        )
        self._frontier = Frontier(
            per_host=settings.per_host,
            delay_s=settings.delay,
            max_delay_s=settings.max_delay,
            user_agent=settings.user_agent,
            check_robots=not settings.ignore_robots,
            max_crawl_delay_s=settings.max_crawl_delay,
            max_pages_per_host=settings.max_pages_per_host,
            window=_WINDOW,
        )
        self._retry_policy = RetryPolicy(
            max_retries=settings.retries, max_retry_after_s=settings.max_delay
        )
        self._trap_limits = TrapLimits(max_url_chars=settings.max_url_length)
        self._templates = (
            TemplateBudget(settings.template_budget) if settings.template_budget else None
        )
        self._host_allowed: HostAllowed = (
            allow_all if settings.allow_private else allow_origins(self.seeds)
        )
        self._discovery = Discovery(self)
        self._hashes: dict[str, str] = {}
        self._near = NearDuplicates()
        self._focus: Focus | None = None
        if settings.query:
            from crawler.relevance.focus import Focus

            self._focus = Focus(settings.query, settings.device)
        self._ssrf_memo: dict[str, str | None] = {}
        self._skips: list[SkipRecord] = []
        self._found: list[UrlRecord] = []
        self._backlog = 0
        """URLs queued in the store (or about to be written there) but not in memory."""
        self._spills = 0
        self._refill_task: asyncio.Task[None] | None = None
        self._shared = not self._store.exclusive
        """Other processes crawl the same frontier: every URL goes through the store."""
        self._next_claim = 0.0
        self._fleet_done = False
        self._tasks: asyncio.TaskGroup | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        self._run_id = 0
        self._counters = RunCounters()
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._pipeline = asyncio.Semaphore(settings.concurrency * 4)
        self._wake = asyncio.Event()
        self._records: asyncio.Queue[PageRecord | None] = asyncio.Queue(maxsize=_WRITE_BATCH * 4)
        self._unfinished = 0
        self._issued = 0
        self._stop_reason: str | None = None
        self._started = 0.0
        self._fetcher: Fetcher | None = None
        self._pool: ParsePool | None = None
        self._parse_here = self.hooks.extract is None and _usable_cpus() > 1
        """Parse pages here while no parse worker is up (``_parse_in_process``): not with an
        ``extract`` hook (it runs in the workers), not on one CPU (it would slow the
        workers' start, the fork server's preload, instead of using an idle CPU)."""
        self._parsed_here = 0
        self._offered_here: dict[int, int] = {}
        """The links the pages parsed here offered (``parsers.html.new_links``), with a
        query: their anchor text is not read again on the next pages (as a worker's memo)."""

    # -- public ------------------------------------------------------------------------------
    def stop(self, reason: str = "interrupted") -> None:
        """Stop taking new work; requests in flight finish and are stored. Idempotent."""
        if self._stop_reason is None:
            self._stop_reason = reason
            self._wake.set()
            grace_s = _STOP_GRACE_S
            if reason == "max-time" and self.settings.max_time is not None:
                grace_s = min(grace_s, max(1.0, self.settings.max_time / 10))  # a budget
            with contextlib.suppress(RuntimeError):  # no running loop: nothing in flight
                asyncio.get_running_loop().call_later(grace_s, self._cancel_jobs)

    def _cancel_jobs(self) -> None:
        """Cancel the jobs still running after a stop's grace period (their URLs stay
        queued in the store)."""
        if self._jobs:
            log.warning("cancelling %d requests still in flight; they stay queued", len(self._jobs))
        for task in self._jobs:
            task.cancel()

    @property
    def counters(self) -> RunCounters:
        """The run's live tallies (read-only for callers)."""
        return self._counters

    @property
    def backlog(self) -> int:
        """URLs queued in the store but not in the memory window."""
        return self._backlog

    def progress(self) -> Progress:
        return Progress(
            done=self._counters.done,
            queued=self._frontier.queued,
            in_flight=self._frontier.in_flight,
            errors=self._counters.pages_failed,
            bytes=self._counters.bytes,
            elapsed_s=time.monotonic() - self._started,
            parse_busy=self._pool.busy if self._pool is not None else 0,
        )

    async def run(self) -> CrawlReport:
        """Run the crawl to its end; raises ``DatabaseLocked`` if another run holds the db."""
        # SQLite: one run per database at a time. PostgreSQL: many, coordinated by leases.
        exclusive = self._owns_store and not is_postgres(self.settings.db)
        lock = RunLock(self.settings.db) if exclusive else contextlib.nullcontext()
        with lock:
            return await self._run_locked()

    async def _run_locked(self) -> CrawlReport:
        self._started = time.monotonic()
        started_at = utc_now()
        try:
            await self._store.open()
            run_id = await self._store.start_run(
                len(self.seeds), json.dumps(_settings_json(self.settings)), started_at
            )
        except StoreError as exc:
            await self._store.close()
            raise StorageError(str(exc)) from exc
        status, reason = "failed", "error"
        try:
            try:
                status, reason = await self._crawl(run_id)
            except BaseExceptionGroup as group:  # from the TaskGroup: one error, usually
                raise _single(group) from None
        except (KeyboardInterrupt, asyncio.CancelledError):
            status, reason = "interrupted", self._stop_reason or "cancelled"
            raise
        except StoreError as exc:
            raise StorageError(str(exc)) from exc
        finally:
            report = self._report(run_id, status, reason, started_at)
            await self._finish(run_id, report)
        return report

    # -- the run -----------------------------------------------------------------------------
    async def _crawl(self, run_id: int) -> tuple[str, str]:
        self._run_id = run_id
        store = self._store
        queued = await store.open_frontier(
            run_id, self.seeds, time.time(), utc_now(), self.settings.max_interval
        )
        self._backlog = 0 if self._shared else queued  # a shared store is polled instead
        if store.exclusive:  # a shared frontier's store dedups what this process has not seen
            mark_seen = self._frontier.mark_seen
            async for url in store.known_urls():
                mark_seen(url)
        if self.settings.max_time is not None:
            deadline = asyncio.get_running_loop().call_later(
                self.settings.max_time, self.stop, "max-time"
            )
        async with (
            open_session(self.settings, self._host_allowed, self._credentials) as session,
            ParsePool(
                self.settings.parse_workers,
                extract=self.hooks.extract,
                main=self._main,
                timeout_s=self.settings.parse_timeout,
                in_process=self._workers_unusable,
            ) as pool,
        ):
            self._fetcher = fetcher = Fetcher(session, self.settings)
            self._pool = pool
            try:
                async with asyncio.TaskGroup() as tasks:
                    self._tasks = tasks
                    writer = tasks.create_task(self._write(run_id))
                    ticker = tasks.create_task(self._tick()) if self._on_progress else None
                    beat = tasks.create_task(self._heartbeat(run_id)) if self._shared else None
                    await self._dispatch(tasks)
                    await self._records.put(None)
                    await writer
                    for task in (ticker, beat):
                        if task is not None:
                            task.cancel()
            finally:
                fetcher.close()  # its deadlines' timer: nothing left to watch on the loop
        if self._parsed_here:
            log.debug("%d pages parsed in the crawl process while the parse workers started",
                      self._parsed_here)  # fmt: skip
        if self.settings.max_time is not None:
            deadline.cancel()
        if self._on_progress is not None:
            self._on_progress(self.progress())  # the final numbers
        if self._stop_reason == "max-time":
            return "finished", "max-time"  # a time budget is a normal end, like max-pages
        if self._stop_reason is not None:
            return "interrupted", self._stop_reason
        if self._budget_spent():
            return "finished", "max-pages"
        return "finished", "done"

    def _budget_spent(self) -> bool:
        limit = self.settings.max_pages
        return limit is not None and self._issued >= limit

    async def _dispatch(self, tasks: asyncio.TaskGroup) -> None:
        while True:
            await self._slots.acquire()
            await self._pipeline.acquire()
            job = await self._next_job()
            if job is None:
                self._slots.release()
                self._pipeline.release()
                return
            self._unfinished += 1
            task = tasks.create_task(self._run_job(job))
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)

    async def _next_job(self) -> FetchJob | None:
        """The next job to run, waiting for one; ``None`` when the crawl is over."""
        while True:
            wait_until: float | None = None
            working = self._stop_reason is None and not self._budget_spent()
            if working:
                self._maybe_refill()
                item = self._frontier.next(time.monotonic())
                self._count_skipped()
                if isinstance(item, FetchJob):
                    if item.kind == PAGE and item.attempt == 0:
                        self._issued += 1
                    return item
                wait_until = item
                if self._shared and wait_until is None and self._refill_task is None:
                    wait_until = None if self._fleet_done else self._next_claim
            busy = self._unfinished or self._refill_task is not None or (working and self._backlog)
            if not busy and wait_until is None:
                return None  # nothing queued that may start, nothing running that could add
            self._wake.clear()
            if wait_until is None:  # woken by a finished job or new URLs; no timer to arm
                await self._wake.wait()
                continue
            try:
                async with asyncio.timeout(max(0.0, wait_until - time.monotonic())):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _maybe_refill(self) -> None:
        """Start loading queued URLs from the store when the memory window runs low."""
        if self._refill_task is not None or self._tasks is None:
            return
        if self._frontier.queued >= _WINDOW // 4:
            return
        if self._shared:
            if not self._fleet_done and time.monotonic() >= self._next_claim:
                self._refill_task = self._tasks.create_task(self._claim_shared())
        elif self._backlog > 0:
            self._refill_task = self._tasks.create_task(self._refill())

    async def _claim_shared(self) -> None:
        """One claim from a shared frontier. When nothing is left here nor in the store
        (no URL queued by any process), the fleet's crawl is over."""
        try:
            await self._save([], self._run_id)
            want = min(self._frontier.room, _CLAIM_BATCH)
            rows = await self._store.claim(self._run_id, want, time.time())
            self._load(rows)
            if len(rows) >= want:  # there may be more at once
                self._next_claim = 0.0
                return
            self._next_claim = time.monotonic() + _CLAIM_POLL_S
            if rows:
                return
            if self._unfinished == 0 and self._frontier.empty:
                self._fleet_done = await self._store.outstanding() == 0
        finally:
            self._refill_task = None
            self._wake.set()

    async def _heartbeat(self, run_id: int) -> None:
        """Keep this process's leases (hosts, URLs) alive in a shared frontier."""
        while True:
            await asyncio.sleep(self.settings.lease_ttl / 3)
            await self._store.heartbeat(run_id, time.time())

    def _load(self, rows: list[QueuedUrl]) -> None:
        now, load = time.monotonic(), self._frontier.load
        for row in rows:
            known = None
            if row.content_hash is not None or row.etag or row.last_modified:
                known = Known(row.etag, row.last_modified, row.content_hash, row.interval_s)
            elif row.interval_s is not None:
                known = Known(None, None, None, row.interval_s)
            load(row.url, row.depth, now, row.priority, known)

    async def _refill(self) -> None:
        try:
            while self._backlog > 0 and self._frontier.queued < _WINDOW // 4:
                if self._stop_reason is not None:
                    return
                spills_before = self._spills
                await self._save([], self._run_id)  # URLs found so far, visible to the claim
                want = min(self._frontier.room, _CLAIM_BATCH)
                rows = await self._store.claim(self._run_id, want, time.time())
                self._load(rows)
                if len(rows) < want:  # the store is drained, but for URLs found meanwhile
                    self._backlog = self._spills - spills_before
                else:
                    self._backlog = max(0, self._backlog - len(rows))
                self._wake.set()
        finally:
            self._refill_task = None
            self._wake.set()

    def _count_skipped(self) -> None:
        if self._frontier.skipped:
            for url, depth, reason in self._frontier.drain_skipped():
                self.skip(url, depth, reason)

    # -- one job -----------------------------------------------------------------------------
    async def _run_job(self, job: FetchJob) -> None:
        try:
            if job.kind == ROBOTS:
                await self._discovery.fetch(job)
                return
            if job.kind == SITEMAP:
                await self._discovery.fetch_sitemap(job)
                return
            record = await self._fetch_page(job)
            if record is not None:
                if self.hooks.on_page is not None:  # awaited: a slow consumer slows the crawl
                    await self.hooks.on_page(CrawledPage.from_record(record))
                await self._records.put(record)
        finally:
            self._pipeline.release()
            self._unfinished -= 1
            self._wake.set()

    # -- used by Discovery ------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self._store

    @property
    def frontier(self) -> Frontier:
        return self._frontier

    @property
    def pool(self) -> ParsePool:
        assert self._pool is not None
        return self._pool

    @property
    def host_allowed(self) -> HostAllowed:
        return self._host_allowed

    def wake(self) -> None:
        self._wake.set()

    def now_utc(self) -> str:
        return utc_now()

    def release_unfetched(self, job: FetchJob) -> None:
        """Give back the slots of a job that needed no request (a cached robots.txt)."""
        self._frontier.release(job, time.monotonic())
        self._slots.release()
        self._wake.set()

    async def follow_urls(self, urls: Iterable[str], depth: int) -> None:
        """Queue absolute URLs from elsewhere than a page (a sitemap), normalised first, in
        steps of ``_FOLLOW_STEP`` with the event loop's other work between them (a sitemap
        lists up to 50,000)."""
        normalized: list[str] = []
        for url in urls:
            try:
                normalized.append(normalize_url(url))
            except ValueError:
                continue
            if len(normalized) >= _FOLLOW_STEP:
                self._follow(tuple(normalized), depth)
                normalized.clear()
                await asyncio.sleep(0)
        self._follow(tuple(normalized), depth)

    async def fetch(
        self,
        job: FetchJob,
        *,
        any_type: bool = False,
        check_redirect: RedirectCheck | None = None,
    ) -> Fetched:
        """Make the request for ``job`` and free its slots; classify the outcome.

        Every request of the crawl goes through here: the SSRF check of IP literals, the
        per-host pacing (of redirect hops too, ``_pace_hop``) and what the outcome teaches
        it (only the server's distress slows a host: ``FetchError.slows_host``), and the
        retry decision.
        """
        assert self._fetcher is not None
        start = time.monotonic()
        result: FetchResult | None = None
        error: str | None = self.ssrf_check(job.url)
        distress = False
        known = job.known
        if error is None:
            try:
                send_at = self._frontier.sending(job, start)
                if send_at > start:  # the host's previous request went out late
                    await asyncio.sleep(send_at - start)
                    start = time.monotonic()
                check = check_redirect or partial(self._check_redirect, depth=job.depth)
                result = await self._fetcher.fetch(
                    job.url, check, any_type=any_type,
                    pace_hop=partial(self._pace_hop, depth=job.depth),
                    etag=known.etag if known else None,
                    last_modified=known.last_modified if known else None,
                )  # fmt: skip
            except FetchError as exc:
                error, distress = exc.reason, exc.slows_host
                log.info("failed %s: %s", job.url, exc.message)
            except asyncio.CancelledError:
                # cancelled after a stop: free the slots; the URL stays queued in the store
                self._frontier.release(job, time.monotonic())
                self._slots.release()
                raise
        now = time.monotonic()
        status = result.status if result is not None else None
        retry_after_s = _retry_after_s(result, self.settings.max_delay)
        paused = now + retry_after_s if retry_after_s is not None and status in (429, 503) else None
        self._frontier.release(job, now, latency_s=now - start, status=status,
                               paused_until=paused, failed=distress)  # fmt: skip
        self._slots.release()
        self._wake.set()
        outcome = classify(status, error, job.attempt, self._retry_policy,
                           retry_after_s=retry_after_s)  # fmt: skip
        if outcome.kind == "retry" and self._stop_reason is None:
            if job.kind == ROBOTS:
                self._frontier.robots_retry(job, now + outcome.delay_s, now)
            else:
                self._frontier.retry(job, now + outcome.delay_s, now)
            self._counters.retries += 1
            return Fetched(None, None, retried=True)
        return Fetched(result, error)

    async def _fetch_page(self, job: FetchJob) -> PageRecord | None:
        assert self._pool is not None
        fetched_at = utc_now()
        fetched = await self.fetch(job)
        result = fetched.result
        if fetched.retried:
            return None
        if result is None:
            assert fetched.error is not None
            return failure_record(job, fetched.error, fetched_at)
        if self.settings.verbose:
            log.info("%d %s", result.status, job.url)
        record = await self._page_from(job, result, fetched_at)
        return self._schedule(job, result, record)

    def _template_closed(self, url: str) -> bool:
        """Whether the template budget closed ``url``'s template (its links not followed)."""
        return self._templates is not None and self._templates.closed(url_template(url))

    def _template_page(
        self, template: str, url: str, text: str, simhash: int | None, duplicate_of: str | None
    ) -> bool:
        """Record a parsed page with the template budget (``crawler.policy.traps``); whether its
        template is closed now, so that the page's links are not followed."""
        budget = self._templates
        assert budget is not None
        budget.page(template, url, text, simhash, duplicate_of)
        if not budget.closed(template):
            return False
        self._frontier.gate = self._template_gate  # queued URLs of closed templates too
        return True

    def _template_gate(self, url: str) -> str | None:
        """``Frontier.gate`` once a template is closed: its queued URLs are not fetched."""
        return "url-template" if self._template_closed(url) else None

    def _schedule(self, job: FetchJob, result: FetchResult, record: PageRecord) -> PageRecord:
        """Add what the store keeps for the next visit: validators, interval, due time,
        and with ``--store-body`` the raw exchange."""
        known = job.known
        if record.unchanged:
            outcome = UNCHANGED
        elif record.state == "failed":
            outcome = FAILED
        elif known is None or known.content_hash is None:
            outcome = FIRST
        else:
            outcome = UNCHANGED if known.content_hash == record.content_hash else CHANGED
        settings = self.settings
        interval = next_interval(known.interval_s if known else None, outcome,
                                 settings.recrawl_after, settings.max_interval)  # fmt: skip
        body = None
        if settings.store_body and result.raw is not None and not record.unchanged:
            body = zlib.compress(result.raw, 6)
        record.etag, record.last_modified = result.etag, result.last_modified
        record.next_fetch_at, record.interval_s = time.time() + interval, interval
        if body is not None:
            record.body, record.headers = body, result.headers_json
        return record

    async def _page_from(self, job: FetchJob, result: FetchResult, fetched_at: str) -> PageRecord:
        """The record of a response: parsed when it is HTML, unchanged when a recrawl found
        the stored version current."""
        assert self._pool is not None
        known = job.known
        if known is not None and (
            (result.status == 304 and (known.etag or known.last_modified))
            or (
                known.content_hash is not None
                and 200 <= result.status < 300
                and result.body is not None
                and same_content(result.body, known.content_hash)
            )
        ):
            return unchanged_record(job, result, fetched_at)
        if not 200 <= result.status < 300 or result.body is None:
            return plain_record(job, result, fetched_at)
        if not result.is_html:
            return plain_record(job, result, fetched_at)
        parse_job = ParseJob(
            job.url, result.final_url, result.status, result.content_type, result.charset,
            result.body, result.x_robots_tag, self.settings.max_outlinks, job.depth,
            *((self._focus.terms, self._focus.ids) if self._focus is not None else ()),
        )  # fmt: skip
        budget = self._templates
        template = budget.parsing(job.url) if budget is not None else ""
        try:
            if (
                self._parse_here
                and not self._pool.ready
                and len(result.body) <= _HERE_MAX_BYTES
                and not costly(result.body)
            ):
                page = await self._parse_in_process(parse_job, template)
                template = ""  # judged there
            else:
                page = await self._pool.parse(parse_job)
        except BaseException as exc:
            if budget is not None and template:
                budget.abandon(template)
            if not isinstance(exc, ParseError):
                raise
            log.warning("cannot parse %s: %s", job.url, exc.message)
            return failure_record(job, exc.reason, fetched_at, result)
        if page.extract_error is not None:
            log.warning("extract failed on %s: %s", job.url, page.extract_error)
        duplicate_of = self._duplicate_of(job, page)
        closed = bool(template) and self._template_page(
            template, job.url, page.text, page.simhash, duplicate_of
        )
        near = None
        if duplicate_of is None and len(page.text) >= _NEAR_DUPLICATE_MIN_CHARS:
            near = self._near.first_near(page.simhash, job.url)
        score = None
        if self._focus is not None and duplicate_of is None:
            score = await self._focus.score_terms(page.query_tf, page.token_length)
        # A duplicate's links are followed too: relative links of the same bytes at another
        # URL lead elsewhere, and the workers' memo of offered links relies on it.
        self._follow(page.followable, job.depth + 1, score, page.anchor_hits, closed)
        return page_record(job, page, fetched_at, duplicate_of, score=score,
                           near_duplicate_of=near)  # fmt: skip

    async def _parse_in_process(self, job: ParseJob, template: str) -> Page:
        """No parse worker is up yet (they start in the crawl's first ~0.3-0.5 s, while
        this process is mostly idle): parse the page here, all but the terms of its text,
        which need numba (a worker computes them when one is up). Its links are offered at
        once, so that their fetches and parses overlap the workers' start instead of waiting
        for it; with a query their priority is then the anchor bonus alone (the page has no
        score yet). Same ``Page`` as a worker's parse (the tests hold them equal). The page
        is judged by the template budget here, before its links go (``template``; without
        its SimHash, which a long text then goes without)."""
        from parsers.html import new_links, parse_document, resolve_each  # no numba

        offered = self._offered_here if job.query_terms else None
        try:
            page = parse_document(job, offered, resolve_each)
        except Exception as exc:  # like a worker's ``ParseFailure``
            raise ParseError(job.url, f"{type(exc).__name__}: {exc}") from None
        self._parsed_here += 1
        links = page.followable if offered is None else new_links(page, job.depth + 1, offered)
        closed = False
        if self._templates is not None:
            first = self._hashes.setdefault(page.content_hash, job.url)
            duplicate_of = first if first != job.url else None
            closed = self._template_page(template, job.url, page.text, None, duplicate_of)
        self._follow(links, job.depth + 1, None, page.anchor_hits, closed)
        page.follow = ()  # offered: the later ``_follow`` has nothing to do
        assert self._pool is not None
        try:
            terms = await self._pool.call(text_terms, page.text, job.query_ids)
        except (CrawlerError, BrokenProcessPool):  # the pool's, as for a worker's parse
            raise
        except Exception as exc:  # raised by ``text_terms``: a page's failure there too
            raise ParseError(job.url, f"{type(exc).__name__}: {exc}") from None
        page.tokens, page.token_length, page.simhash, page.query_tf = terms
        return page

    def _duplicate_of(self, job: FetchJob, page: Page) -> str | None:
        """The URL this page duplicates: same content stored before, or a canonical known."""
        first = self._hashes.setdefault(page.content_hash, job.url)
        if first != job.url:
            return first
        canonical = page.canonical
        if (
            canonical
            and canonical not in (job.url, page.final_url)
            and self._scope.check(canonical) is None
            and not self._frontier.mark_seen(canonical)
        ):
            return canonical  # the canonical URL is stored or queued already
        return None

    def _follow(
        self,
        links: tuple[str, ...],
        depth: int,
        score: float | None = None,
        anchor_hits: dict[str, int] | None = None,
        closed: bool = False,
    ) -> None:
        """Offer links to the frontier. With a query, a link's priority is the linking page's
        score plus a bonus per query word in its anchor text (best-first crawling).
        ``closed``: the linking page's template was closed by the template budget: its
        links are not followed (skipped as ``url-template``, but not marked seen: a page
        elsewhere may still lead to them)."""
        max_depth = self.settings.max_depth
        if max_depth is not None and depth > max_depth:
            return
        frontier, now = self._frontier, time.monotonic()
        base_priority = score or 0.0
        added = False
        for url in frontier.unseen(links):
            if "?" in url or ";" in url or "@" in url:
                url = strip_session_ids(strip_userinfo(url))
                if frontier.seen(url):
                    continue
            reason = self.admit(url)
            if reason is None and closed:
                self.skip(url, depth, "url-template")
                continue
            if reason is None and "?" in url and self._templates is not None:
                reason = self._templates.admit(url)
            if reason is None:
                priority = base_priority
                if anchor_hits:
                    priority += _ANCHOR_BONUS * anchor_hits.get(url, 0)
                added |= self._enqueue(url, depth, now, priority)
            else:
                frontier.mark_seen(url)  # refused now means refused for this run
                self.skip(url, depth, reason)
        if added:
            self._wake.set()

    def _enqueue(
        self, url: str, depth: int, now: float, priority: float = 0.0, *, known: bool = False
    ) -> bool:
        """Queue a new URL: in the memory window when there is room and this process owns
        the frontier, else in the store only (a later refill brings it in). Either way it is
        written to the store with the next batch. ``False`` if it was seen before, unless
        ``known`` (a URL already marked seen, to be queued all the same: a redirect hop that
        must wait for its host)."""
        frontier = self._frontier
        if self._store.exclusive and frontier.has_room:
            if known:
                frontier.load(url, depth, now, priority)
            elif not frontier.add(url, depth, now, priority=priority):
                return False
            self._found.append(UrlRecord(url, depth, priority, True, utc_now()))
            return True
        if not frontier.mark_seen(url) and not known:
            return False
        self._found.append(UrlRecord(url, depth, priority, False, utc_now()))
        if not self._shared:  # a shared store is polled instead (``_claim_shared``)
            self._spills += 1
            self._backlog += 1
        return True

    def admit(self, url: str) -> str | None:
        """``None`` if a newly found URL may be queued, else why not (scope, trap ...)."""
        reason = self._scope.check(url) or trap_reason(url, self._trap_limits)
        if reason is None and self.hooks.url_filter is not None and not self.hooks.url_filter(url):
            return "filter"
        return reason

    def ssrf_check(self, url: str) -> str | None:
        """``"ssrf"`` if the URL's host is an IP literal the guard refuses, else ``None``.

        Memoised per origin (``check_url_host`` depends only on it); the kind of address
        refused is logged once.
        """
        origin = url_origin(url)
        try:
            return self._ssrf_memo[origin]
        except KeyError:
            kind = check_url_host(url, self._host_allowed)
            if kind is not None:
                log.warning("refusing %s: %s address (SSRF guard; --allow-private)", origin, kind)
            verdict = self._ssrf_memo[origin] = None if kind is None else "ssrf"
            return verdict

    def skip(self, url: str, depth: int | None, reason: str) -> None:
        """Record a URL the crawl decided not to fetch (``skipped`` table, summary)."""
        self._counters.skipped[reason] += 1
        self._skips.append(SkipRecord(url, reason, depth, utc_now()))

    def _pace_hop(self, target: str, limit_s: float, depth: int) -> float | None:
        """``crawler.net.fetch.HopPacer``: a hop keeps its host's pace; one that could not be
        sent before its fetch's deadline is queued instead (then ``None``)."""
        now = time.monotonic()
        wait_s = self._frontier.hop(target, now, limit_s)
        if wait_s is None and self._enqueue(target, depth, now, _HOP_PRIORITY, known=True):
            self._wake.set()
        return wait_s

    def _check_redirect(self, target: str, depth: int) -> str | None:
        """Vet one redirect hop: scope, traps, SSRF, robots, and seen-before."""
        frontier = self._frontier
        robots = frontier.allowed_by_robots(target)
        reason = self.admit(target) or self.ssrf_check(target)
        if reason is None and robots is False:
            reason = "robots"
        if reason is not None:
            if frontier.mark_seen(target):
                self.skip(target, depth, reason)
            return reason
        if robots is None:
            # another origin whose robots.txt is not known yet: queue the target there
            if self._enqueue(target, depth, time.monotonic()):
                self._wake.set()
                return "queued"
            return "seen"
        return None if frontier.mark_seen(target) else "seen"

    # -- writing and reporting ---------------------------------------------------------------
    async def _write(self, run_id: int) -> None:
        batch: list[PageRecord] = []
        records = self._records
        loop = asyncio.get_running_loop()
        flush_at: float | None = None  # a batch is written at most _WRITE_IDLE_S after it began
        while True:
            try:
                async with asyncio.timeout_at(flush_at):
                    record = await records.get()
            except TimeoutError:
                await self._save(batch, run_id)
                flush_at = None
                continue
            if flush_at is None:
                flush_at = loop.time() + _WRITE_IDLE_S
            while True:  # take what is waiting without an await (and a timer) per record
                if record is None:
                    await self._save(batch, run_id)
                    return
                batch.append(record)
                self._counters.count_page(
                    record.status, record.error, record.body_bytes, record.unchanged
                )
                if len(batch) >= _WRITE_BATCH:
                    await self._save(batch, run_id)
                    flush_at = None
                    break
                if records.empty():
                    break
                record = records.get_nowait()

    async def _save(self, batch: list[PageRecord], run_id: int) -> None:
        skips, self._skips = self._skips, []
        found, self._found = self._found, []
        if batch or skips or found:
            pages = batch[:]
            batch.clear()
            await self._store.save(pages, found, skips, run_id)

    async def _tick(self) -> None:
        assert self._on_progress is not None
        while True:
            self._on_progress(self.progress())
            await asyncio.sleep(self._progress_interval_s)

    def _report(self, run_id: int, status: str, reason: str, started_at: str) -> CrawlReport:
        counters = self._counters
        return CrawlReport(
            run_id=run_id,
            db=redact_dsn(self.settings.db),
            status=status,
            reason=reason,
            started_at=started_at,
            ended_at=utc_now(),
            elapsed_s=time.monotonic() - self._started,
            seeds=len(self.seeds),
            pages_ok=counters.pages_ok,
            pages_failed=counters.pages_failed,
            bytes=counters.bytes,
            by_status=dict(counters.by_status),
            errors=dict(counters.errors),
            skipped=dict(counters.skipped),
            queued_left=self._frontier.queued + self._backlog,
            pages_unchanged=counters.pages_unchanged,
        )

    async def _finish(self, run_id: int, report: CrawlReport) -> None:
        summary = RunSummary(
            report.status, report.reason, report.pages_ok, report.pages_failed, report.bytes,
            report.pages_unchanged,
        )  # fmt: skip
        try:
            await self._store.finish_run(run_id, summary, report.ended_at)
        except StoreError as exc:
            log.error("%s", exc)
        finally:
            await self._store.close()


@dataclass(slots=True)
class Fetched:
    """What ``Engine.fetch`` got: a result, or an error reason, or a retry was scheduled.
    Not frozen (built per request; see ``FetchJob``)."""

    result: FetchResult | None
    error: str | None
    retried: bool = False


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _single(group: BaseExceptionGroup) -> BaseException:
    """The one exception inside (nested) exception groups, or the group when there are more:
    a failing hook or store reaches the caller as itself, not wrapped by the TaskGroup."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _retry_after_s(result: FetchResult | None, max_s: float) -> float | None:
    """The response's ``Retry-After``, at most ``max_s`` (``--max-delay``: a server cannot
    hold a host, and the crawl, longer than the slowest pace the crawl keeps)."""
    if result is None or not result.retry_after:
        return None
    return parse_retry_after(result.retry_after, time.time(), max_s)


def split_credentials(seeds: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """(the seeds without userinfo, ``user:password`` by origin), from normalised seeds:
    ``http://u:p@h/`` gives ``http://h/`` and ``{"http://h": "u:p"}``."""
    plain: dict[str, None] = {}
    credentials: dict[str, str] = {}
    for seed in seeds:
        bare = strip_userinfo(seed)
        if bare != seed:
            start = seed.find("//") + 2  # the userinfo and its "@" are what was taken out
            credentials.setdefault(
                url_origin(bare), seed[start : start + len(seed) - len(bare) - 1]
            )
        plain[bare] = None
    return list(plain), credentials


def _settings_json(settings: Settings) -> dict[str, object]:
    values = {k: v for k, v in asdict(settings).items() if not k.startswith("_")}
    values["db"] = redact_dsn(settings.db)  # never a password in the database or a report
    return values
