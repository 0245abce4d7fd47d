"""Engine: one run of a crawl, from the seeds to the stored rows. Orchestration only.

Owns: the run's lifecycle (the run lock, the store's run record, the session and the parse
pool, the report) and its tasks, all in one ``asyncio.TaskGroup``:
- the dispatcher (``_dispatch``) takes a global slot (``concurrency``) and a place in the
  pipeline, then a job from the frontier, and starts a job task;
- a job task runs its job: robots.txt or a sitemap (``Discovery``), or a page (``Pages``,
  whose request goes through ``Requests``), and puts the page's record on the writer's queue;
- the writer (``Writer``) saves records in batches; the window (``Window``) refills the
  frontier from the store; the ticker reports progress, the sampler stores it (``Sampler``),
  the heartbeat keeps a shared frontier's leases.
Each of those components owns its part (see their modules); this one wires them to each other.
Backpressure: at most ``concurrency`` fetches; 1/8 to 4x as many pages, by weight, in ``Pipeline``.

The data flow, a page from seed to row: ``Window.open`` queues the seeds -> ``Frontier.next``
hands out a job -> ``Requests.fetch`` (pace, SSRF, redirects vetted by ``Admission``) ->
``Pages`` (parse, duplicates, template budget, score) -> ``Admission.follow`` queues its links
in the ``Window`` -> ``Writer`` commits the page with the URLs found and refused.

Per-job errors: a ``CrawlerError`` becomes a stored outcome; anything else is a bug and fails
the crawl (the TaskGroup cancels the rest).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict

from crawler.engine.admission import Admission
from crawler.engine.discovery import Discovery
from crawler.engine.hold import Hold
from crawler.engine.pages import Pages
from crawler.engine.pipeline import Pipeline
from crawler.engine.records import utc_now
from crawler.engine.requests import Requests
from crawler.engine.sampler import Sampler
from crawler.engine.window import WINDOW, Window
from crawler.engine.writer import Writer
from crawler.errors import ConfigError, StorageError
from crawler.frontier.best_first import BestFirstFrontier
from crawler.frontier.hosts import PAGE, ROBOTS, SITEMAP, FetchJob, Frontier
from crawler.hooks import Hooks
from crawler.lock import RunLock
from crawler.net.fetch import Fetcher
from crawler.net.guard import allow_all, allow_origins
from crawler.net.headers import parse_header, redacted
from crawler.net.proxy import parse_proxy
from crawler.net.session import Network, open_session
from crawler.policy.retry import RetryPolicy
from crawler.policy.scope import Scope
from crawler.policy.traps import TemplateBudget, TrapLimits
from crawler.pool.forkserver import main_importable, main_needed, prestart, unguarded_line
from crawler.pool.parse_pool import ParsePool
from crawler.relevance.focus import Focus
from crawler.relevance.warm import after_crawl
from crawler.report import CrawledPage, CrawlReport, Progress, ProgressCallback, RunCounters
from crawler.seeds import parse_seed, split_credentials
from crawler.settings import Settings
from storage.base import RunSummary, Store, StoreError, StoreRefused
from storage.factory import is_postgres, make_store, redact_dsn

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0
"""After a stop (signal, --max-time), requests still running after this are cancelled (their
URLs stay queued); a ``--max-time`` stop waits a tenth of the budget, from 1 s up to this."""


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
        self.hooks = hooks = hooks or Hooks()
        self._main = main_needed(hooks.extract)
        """Parse workers import ``__main__``: the ``extract`` hook is defined there."""
        self._workers_unusable = self._main and not main_importable()
        if self._main and not self._workers_unusable and (line := unguarded_line()):
            raise SystemExit(
                f"crawler: {sys.modules['__main__'].__file__}:{line}: start the crawl under "
                '`if __name__ == "__main__":` (the parse workers import this script to find '
                "its extract hook, and would run the crawl again)"
            )
        # The parse workers' fork server preloads (numba, lexbor) on another core while this
        # process opens the store and reads the known URLs: in parallel, not in turn.
        prestart(main=self._main)
        self.seeds, self._credentials = split_credentials(seeds)
        """Seeds without userinfo (what is stored, logged, exported); the userinfo kept here
        only, by origin, and sent to that origin only (``open_session``)."""
        self._network = Network.prepare(settings)
        """Proxies, headers, cookies, .netrc, CA bundle: read now, a bad one a ConfigError."""
        self._owns_store = store is None
        self._store: Store = (
            store if store is not None else make_store(settings.db, lease_ttl_s=settings.lease_ttl)
        )
        self._on_progress = on_progress
        self._progress_interval_s = progress_interval_s
        self.frontier = (BestFirstFrontier if settings.query else Frontier)(
            per_host=settings.per_host,
            delay_s=settings.delay,
            max_delay_s=settings.max_delay,
            user_agent=settings.agent,
            check_robots=not settings.ignore_robots,
            max_crawl_delay_s=settings.max_crawl_delay,
            max_pages_per_host=settings.max_pages_per_host,
            window=WINDOW,
        )
        self._wake = asyncio.Event()
        self.counters = RunCounters()
        """The run's live tallies (read-only for callers)."""
        self._window = Window(self._store, self.frontier, self._wake.set)
        budget = settings.template_budget
        self._templates = TemplateBudget(budget) if budget else None
        self._host_allowed = allow_all if settings.allow_private else allow_origins(self.seeds)
        self._admission = Admission(
            scope=Scope(
                self.seeds, settings.scope, settings.include_patterns, settings.exclude_patterns
            ),
            trap_limits=TrapLimits(max_url_chars=settings.max_url_length),
            templates=self._templates,
            url_filter=hooks.url_filter,
            host_allowed=self._host_allowed,
            max_depth=settings.max_depth,
            frontier=self.frontier,
            window=self._window,
            counters=self.counters,
            wake=self._wake.set,
        )
        self._writer = Writer(self._store, self.counters, self._window.take,
                              self._admission.take_skips, self._window.waiting)  # fmt: skip
        self._focus = Focus(settings.query, settings.device) if settings.query else None
        self._hold = Hold(self.frontier)
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._pipeline = Pipeline.of(settings.concurrency)
        self._tasks: asyncio.TaskGroup | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        self._run_id = 0
        self._unfinished = 0
        self._issued = 0
        self._stop_reason: str | None = None
        self._started = 0.0
        self._pool: ParsePool | None = None
        self._pages: Pages | None = None
        self._discovery: Discovery | None = None

    # -- public ------------------------------------------------------------------------------
    def stop(self, reason: str = "interrupted") -> None:
        """Stop taking new work; requests in flight finish and are stored. Idempotent."""
        if self._stop_reason is None:
            self._stop_reason = reason
            self._wake.set()
            grace_s = STOP_GRACE_S
            if reason == "max-time" and self.settings.max_time is not None:
                grace_s = min(grace_s, max(1.0, self.settings.max_time / 10))  # a budget
            with contextlib.suppress(RuntimeError):  # no running loop: nothing in flight
                asyncio.get_running_loop().call_later(grace_s, self._cancel_jobs)

    def _cancel_jobs(self) -> None:
        """Cancel the jobs still running after a stop's grace period (they stay queued)."""
        if self._jobs:
            log.warning("cancelling %d requests still in flight; they stay queued", len(self._jobs))
        for task in self._jobs:
            task.cancel()

    @property
    def backlog(self) -> int:
        """URLs queued in the store but not in the memory window."""
        return self._window.backlog

    def progress(self) -> Progress:
        return Progress(
            done=self.counters.done,
            queued=self.frontier.queued,
            in_flight=self.frontier.in_flight,
            errors=self.counters.pages_failed,
            bytes=self.counters.bytes,
            elapsed_s=time.monotonic() - self._started,
            parse_busy=self._pool.busy if self._pool is not None else 0,
        )

    def _sampler(self, run_id: int) -> Sampler:
        return Sampler(self._store, run_id, self.progress, lambda: self._window.backlog)

    @staticmethod
    def normalize_seeds(seeds: Iterable[str], longest: int | None = None) -> list[str]:
        """``seeds`` normalised, each once, in order; ``ConfigError`` names a bad one, or
        says there is none."""
        normalized = list(dict.fromkeys(parse_seed(s, f"seed {s!r:.80}", longest) for s in seeds))
        if not normalized:
            raise ConfigError("no seed URLs given")
        return normalized

    async def run(self) -> CrawlReport:
        """Run the crawl to its end; raises ``DatabaseLocked`` if another run holds the db."""
        # SQLite: one run per database at a time. PostgreSQL: many, coordinated by leases.
        exclusive = self._owns_store and not is_postgres(self.settings.db)
        lock = RunLock(self.settings.db) if exclusive else contextlib.nullcontext()
        with lock:
            report = await self._run_locked()
        # a detached warmer indexes what this run stored, and compiles (see there); started
        # once the lock is released, as it leaves alone a database that a crawl holds
        await asyncio.to_thread(after_crawl, self.settings.db, exclusive)
        return report

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
            refused = isinstance(exc, StoreRefused)  # not a crawl's database: the user's input
            raise (ConfigError if refused else StorageError)(str(exc)) from exc
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
        self._run_id = self._writer.run_id = run_id
        settings = self.settings
        await self._window.open(run_id, self.seeds, settings.max_interval)
        if settings.max_time is not None:
            deadline = asyncio.get_running_loop().call_later(
                settings.max_time, self.stop, "max-time"
            )
        parse_here = self.hooks.extract is None and _usable_cpus() > 1
        async with (
            open_session(settings, self._host_allowed, self._credentials, self._network) as session,
            ParsePool(
                settings.parse_workers,
                extract=self.hooks.extract,
                main=self._main,
                timeout_s=settings.parse_timeout,
                in_process=self._workers_unusable,
                start=not parse_here,  # else at the second page (``_next_job``)
            ) as pool,
        ):
            fetcher = Fetcher(session, settings)
            self._pool = pool
            self._wire(fetcher, pool, parse_here)
            try:
                async with asyncio.TaskGroup() as tasks:
                    self._tasks = tasks
                    writer = tasks.create_task(self._writer.run())
                    ticker = tasks.create_task(self._tick()) if self._on_progress else None
                    sampler = tasks.create_task(self._sampler(run_id).run())
                    beat = None
                    if self._window.shared:
                        beat = tasks.create_task(self._window.heartbeat(run_id, settings.lease_ttl))
                    await self._dispatch(tasks)
                    await self._writer.close()
                    await writer
                    for task in (ticker, beat, sampler):
                        if task is not None:
                            task.cancel()
            finally:
                fetcher.close()  # its deadlines' timer: nothing left to watch on the loop
        assert self._pages is not None
        if self._pages.parsed_here:
            log.debug("%d pages parsed in the crawl process while the parse workers started",
                      self._pages.parsed_here)  # fmt: skip
        if settings.max_time is not None:
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

    def _wire(self, fetcher: Fetcher, pool: ParsePool, parse_here: bool) -> None:
        """The components that need the session and the pool, once they are open."""
        settings = self.settings
        requests = Requests(
            fetcher=fetcher,
            frontier=self.frontier,
            admission=self._admission,
            retry_policy=RetryPolicy(
                max_retries=settings.retries, max_retry_after_s=settings.max_delay
            ),
            max_delay_s=settings.max_delay,
            slots=self._slots,
            counters=self.counters,
            wake=self._wake.set,
            stopping=self._stopping,
        )
        self._pages = Pages(
            settings=settings,
            requests=requests,
            pool=pool,
            admission=self._admission,
            frontier=self.frontier,
            templates=self._templates,
            focus=self._focus,
            counters=self.counters,
            parse_here=parse_here,
            room=self._writer.room,
        )
        self._discovery = Discovery(
            settings=settings,
            store=self._store,
            frontier=self.frontier,
            admission=self._admission,
            requests=requests,
            pool=pool,
            wake=self._wake.set,
        )

    def _stopping(self) -> bool:
        return self._stop_reason is not None

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
            self._hold.started(job)
            task = tasks.create_task(self._run_job(job))
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)

    async def _next_job(self) -> FetchJob | None:
        """The next job to run, waiting for one; ``None`` when the crawl is over."""
        window = self._window
        while True:
            wait_until: float | None = None
            working = self._stop_reason is None and not self._budget_spent()
            if working:
                assert self._tasks is not None
                window.maybe_refill(self._tasks, self._run_id, self._writer.save,
                                    self._idle, self._stopping)  # fmt: skip
                item = self._hold.next(time.monotonic())
                self._admission.skip_refused()
                if isinstance(item, FetchJob):
                    if item.kind == PAGE and item.attempt == 0:
                        self._issued += 1
                        if self._issued == 2 and self._pool is not None:
                            self._pool.start()  # the first page is parsed here (``Pages``)
                    return item
                wait_until = item
                if window.shared and wait_until is None and window.refilling is None:
                    wait_until = None if window.fleet_done else window.next_claim
            busy = self._unfinished or window.refilling is not None or (working and window.backlog)
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

    def _idle(self) -> bool:
        return self._unfinished == 0

    async def _run_job(self, job: FetchJob) -> None:
        assert self._pages is not None and self._discovery is not None
        record = None
        try:
            if job.kind == ROBOTS:
                await self._discovery.fetch(job)
            elif job.kind == SITEMAP:
                await self._discovery.fetch_sitemap(job)
            else:
                record = await self._pages.fetch(job)
            if record is not None:
                await self._writer.put(record)  # first: a page on_page saw is one stored
                if self.hooks.on_page is not None:  # awaited: a slow consumer slows the crawl
                    await self.hooks.on_page(CrawledPage.from_record(record))
        finally:
            self._hold.finished(job)
            self._pipeline.release(record)
            self._unfinished -= 1
            self._wake.set()

    # -- reporting ---------------------------------------------------------------------------
    async def _tick(self) -> None:
        assert self._on_progress is not None
        while True:
            self._on_progress(self.progress())
            await asyncio.sleep(self._progress_interval_s)

    def _report(self, run_id: int, status: str, reason: str, started_at: str) -> CrawlReport:
        counters = self.counters
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
            queued_left=self.frontier.queued + self._window.backlog,
            pages_unchanged=counters.pages_unchanged,
            harvest=counters.harvest(),
        )

    async def _finish(self, run_id: int, report: CrawlReport) -> None:
        summary = RunSummary(report.status, report.reason, report.pages_ok, report.pages_failed,
                             report.bytes, report.pages_unchanged, report.harvest_json)  # fmt: skip
        try:
            await self._sampler(run_id).record()  # the final numbers
            await self._store.finish_run(run_id, summary, report.ended_at)
        except StoreError as exc:
            log.error("%s", exc)
        finally:
            await self._store.close()


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _single(group: BaseExceptionGroup) -> BaseException:
    """The one exception inside (nested) exception groups, or the group when they differ:
    a failing hook or store reaches the caller as itself, not wrapped by the TaskGroup, also
    when several jobs met the same bug before the group stopped them."""
    leaves = []
    pending: list[BaseException] = [group]
    while pending:
        error = pending.pop()
        if isinstance(error, BaseExceptionGroup):
            pending.extend(reversed(error.exceptions))
        else:
            leaves.append(error)
    first = leaves[0]
    same = all(type(e) is type(first) and str(e) == str(first) for e in leaves)
    return first if same else group


def _settings_json(settings: Settings) -> dict[str, object]:
    values = {k: v for k, v in asdict(settings).items() if not k.startswith("_")}
    values["db"] = redact_dsn(settings.db)  # never a password in the database or a report
    if settings.proxy:
        values["proxy"] = parse_proxy(settings.proxy).url
    values["headers"] = [redacted(*parse_header(text)) for text in settings.headers]
    values["host_headers"] = {host: [redacted(n, v) for n, v in pairs]
                              for host, pairs in settings.host_headers}  # fmt: skip
    return values
