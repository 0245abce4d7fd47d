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
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime

from crawler.errors import FetchError, ParseError, StorageError
from crawler.fetch import Fetcher, FetchResult, open_session
from crawler.frontier import FetchJob, Frontier
from crawler.pool import ParsePool
from crawler.report import CrawlReport, Progress, ProgressCallback, RunCounters
from crawler.robots import MAX_ROBOTS_BYTES, RobotsRules
from crawler.settings import Settings
from crawler.urls import Scope
from parsers.html import content_hash
from parsers.page import Page, ParseJob
from storage.base import PageRecord, RunSummary, Store, StoreError
from storage.sqlite import SQLiteStore

log = logging.getLogger(__name__)


_WRITE_BATCH = 256
_WRITE_IDLE_S = 0.25


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
    ) -> None:
        self.settings = settings
        self.seeds = list(seeds)
        self._store: Store = store if store is not None else SQLiteStore(settings.db)
        self._on_progress = on_progress
        self._progress_interval_s = progress_interval_s
        self._scope = Scope(
            self.seeds, settings.scope, settings.include_patterns, settings.exclude_patterns
        )
        self._frontier = Frontier(
            per_host=settings.per_host,
            delay_s=settings.delay,
            user_agent=settings.user_agent,
            check_robots=not settings.ignore_robots,
        )
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

    # -- public ------------------------------------------------------------------------------
    def stop(self, reason: str = "interrupted") -> None:
        """Stop taking new work; requests in flight finish and are stored. Idempotent."""
        if self._stop_reason is None:
            self._stop_reason = reason
            self._wake.set()

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
            status, reason = await self._crawl(run_id)
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
        now = time.monotonic()
        for seed in self.seeds:
            self._frontier.add(seed, 0, now)
        async with (
            open_session(self.settings) as session,
            ParsePool(self.settings.parse_workers) as pool,
        ):
            self._fetcher = Fetcher(session, self.settings)
            self._pool = pool
            async with asyncio.TaskGroup() as tasks:
                writer = tasks.create_task(self._write(run_id))
                ticker = tasks.create_task(self._tick()) if self._on_progress else None
                await self._dispatch(tasks)
                await self._records.put(None)
                await writer
                if ticker is not None:
                    ticker.cancel()
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
            tasks.create_task(self._run_job(job))

    async def _next_job(self) -> FetchJob | None:
        """The next job to run, waiting for one; ``None`` when the crawl is over."""
        while True:
            wait_until: float | None = None
            if self._stop_reason is None and not self._budget_spent():
                item = self._frontier.next(time.monotonic())
                self._count_skipped()
                if isinstance(item, FetchJob):
                    if not item.robots:
                        self._issued += 1
                    return item
                wait_until = item
            if self._unfinished == 0 and wait_until is None:
                return None  # nothing queued that may start, nothing running that could add
            self._wake.clear()
            timeout = None if wait_until is None else max(0.0, wait_until - time.monotonic())
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _count_skipped(self) -> None:
        if self._frontier.skipped:
            for url, _depth, reason in self._frontier.drain_skipped():
                self._counters.skipped[reason] += 1
                log.debug("skipped %s (%s)", url, reason)

    # -- one job -----------------------------------------------------------------------------
    async def _run_job(self, job: FetchJob) -> None:
        try:
            if job.robots:
                await self._fetch_robots(job)
                return
            record = await self._fetch_page(job)
            if record is not None:
                await self._records.put(record)
        finally:
            self._pipeline.release()
            self._unfinished -= 1
            self._wake.set()

    def _fetch_done(self, job: FetchJob) -> None:
        self._slots.release()
        self._frontier.release(job, time.monotonic())
        self._wake.set()

    async def _fetch_page(self, job: FetchJob) -> PageRecord | None:
        assert self._fetcher is not None and self._pool is not None
        fetched_at = utc_now()
        try:
            result = await self._fetcher.fetch(job.url, self._check_redirect)
        except FetchError as exc:
            log.info("failed %s: %s", job.url, exc.message)
            return _failure(job, exc.reason, fetched_at)
        finally:
            self._fetch_done(job)
        if self.settings.verbose:
            log.info("%d %s", result.status, job.url)
        if not (result.is_html and 200 <= result.status < 300):
            return _plain_record(job, result, fetched_at)
        assert result.body is not None
        try:
            page = await self._pool.parse(
                ParseJob(job.url, result.final_url, result.status, result.content_type,
                         result.charset, result.body, result.x_robots_tag)
            )  # fmt: skip
        except ParseError as exc:
            log.warning("cannot parse %s: %s", job.url, exc.message)
            return _failure(job, "parse", fetched_at, result)
        if not page.nofollow:
            self._follow(page.links, job.depth + 1)
        return _page_record(job, page, fetched_at)

    def _follow(self, links: tuple[str, ...], depth: int) -> None:
        max_depth = self.settings.max_depth
        if max_depth is not None and depth > max_depth:
            return
        frontier, scope, now = self._frontier, self._scope, time.monotonic()
        added = False
        for url in frontier.unseen(links):
            if scope.check(url) is None:
                added |= frontier.add(url, depth, now)
            else:
                frontier.mark_seen(url)  # out of scope now means out of scope for this run
        if added:
            self._wake.set()

    def _check_redirect(self, target: str) -> str | None:
        if self._scope.check(target) is not None:
            return "scope"
        if not self._frontier.mark_seen(target):
            return "seen"
        return None

    async def _fetch_robots(self, job: FetchJob) -> None:
        assert self._fetcher is not None
        rules: RobotsRules | None
        try:
            result = await self._fetcher.fetch(job.url, any_type=True)
        except FetchError as exc:
            log.warning("robots.txt of %s unreachable (%s): not crawling it", job.origin, exc)
            rules = RobotsRules.disallow_all()
        else:
            rules = _robots_rules(result)
        finally:
            self._slots.release()
        delay = rules.crawl_delay(self.settings.user_agent) if rules is not None else None
        self._frontier.robots_done(job, rules, delay, time.monotonic())
        self._wake.set()

    # -- writing and reporting ---------------------------------------------------------------
    async def _write(self, run_id: int) -> None:
        batch: list[PageRecord] = []
        records = self._records
        while True:
            try:
                async with asyncio.timeout(_WRITE_IDLE_S if batch else None):
                    record = await records.get()
            except TimeoutError:
                await self._save(batch, run_id)
                continue
            if record is None:
                await self._save(batch, run_id)
                return
            batch.append(record)
            self._counters.count_page(record.status, record.error, record.body_bytes)
            if len(batch) >= _WRITE_BATCH:
                await self._save(batch, run_id)

    async def _save(self, batch: list[PageRecord], run_id: int) -> None:
        if batch:
            await self._store.save_pages(batch[:], run_id)
            batch.clear()

    async def _tick(self) -> None:
        assert self._on_progress is not None
        while True:
            self._on_progress(self.progress())
            await asyncio.sleep(self._progress_interval_s)

    def _report(self, run_id: int, status: str, reason: str, started_at: str) -> CrawlReport:
        counters = self._counters
        return CrawlReport(
            run_id=run_id,
            db=self.settings.db,
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
            queued_left=self._frontier.queued,
        )

    async def _finish(self, run_id: int, report: CrawlReport) -> None:
        summary = RunSummary(
            report.status, report.reason, report.pages_ok, report.pages_failed, report.bytes
        )
        try:
            await self._store.finish_run(run_id, summary, report.ended_at)
        except StoreError as exc:
            log.error("%s", exc)
        finally:
            await self._store.close()


def _robots_rules(result: FetchResult) -> RobotsRules | None:
    """RFC 9309: 2xx → the rules; 4xx → allow all (``None``); 5xx and others → disallow all."""
    if 200 <= result.status < 300 and result.body is not None:
        return RobotsRules.parse(result.body[:MAX_ROBOTS_BYTES])
    if 400 <= result.status < 500:
        return None
    return RobotsRules.disallow_all()


def _settings_json(settings: Settings) -> dict[str, object]:
    return {k: v for k, v in asdict(settings).items() if not k.startswith("_")}


def _failure(
    job: FetchJob, reason: str, fetched_at: str, result: FetchResult | None = None
) -> PageRecord:
    return PageRecord(
        url=job.url,
        final_url=result.final_url if result else job.url,
        status=result.status if result else None,
        error=reason,
        content_type=result.content_type if result else None,
        title=None,
        text=None,
        lang=None,
        canonical=None,
        meta_robots=None,
        depth=job.depth,
        body_bytes=len(result.body) if result and result.body is not None else None,
        content_hash=None,
        fetched_at=fetched_at,
    )


def _plain_record(job: FetchJob, result: FetchResult, fetched_at: str) -> PageRecord:
    """A response that is not parsed: non-HTML, an HTTP error, a redirect not followed."""
    body = result.body
    return PageRecord(
        url=job.url,
        final_url=result.redirect_to or result.final_url,
        status=result.status,
        error=None,
        content_type=result.content_type or None,
        title=None,
        text=None,
        lang=None,
        canonical=None,
        meta_robots=None,
        depth=job.depth,
        body_bytes=len(body) if body is not None else None,
        content_hash=content_hash(body) if body is not None else None,
        fetched_at=fetched_at,
    )


def _page_record(job: FetchJob, page: Page, fetched_at: str) -> PageRecord:
    return PageRecord(
        url=job.url,
        final_url=page.final_url,
        status=page.status,
        error=None,
        content_type=page.content_type,
        title=page.title,
        text=None if page.noindex else page.text,
        lang=page.lang,
        canonical=page.canonical,
        meta_robots=page.meta_robots or None,
        depth=job.depth,
        body_bytes=page.body_bytes,
        content_hash=page.content_hash,
        fetched_at=fetched_at,
        links_json=page.links_json,
    )
