"""The library API: ``crawl`` (async), ``run`` (sync), ``rank``, and the streaming
``Crawler``, which yields ``CrawledPage``s (``crawler.report``).

Owns: running an ``Engine`` as a task of the caller's event loop and handing its pages over
through a bounded queue, so a slow consumer slows the crawl (backpressure) instead of
growing memory. Each call is an independent run with its own HTTP session, parse pool and
database connection, so a process can crawl any number of times.

    async with Crawler(Settings(db="site.db")) as crawler:
        async for page in crawler.pages(["https://example.com/"]):
            print(page.status, page.url, page.title)
    print(crawler.report)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from crawler.errors import ConfigError, CrawlerError
from crawler.hooks import Extract, Hooks, OnPage, UrlFilter, check_progress
from crawler.report import CrawledPage, CrawlReport, ProgressCallback
from crawler.settings import Settings

if TYPE_CHECKING:
    from crawler.engine.engine import Engine


class Crawler:
    """A crawl you can run, stream, stop and run again, inside your own event loop.

    ``run(seeds)`` crawls to the end and returns the ``CrawlReport``; ``pages(seeds)``
    does the same while yielding every stored URL as a ``CrawledPage``. One run at a time
    per ``Crawler``; separate ``Crawler`` objects may run at the same time (on different
    databases). Leaving the ``async with`` block stops a run still going (requests in
    flight finish and are stored) and waits for it.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        db: str | None = None,
        on_page: OnPage | None = None,
        url_filter: UrlFilter | None = None,
        extract: Extract | None = None,
        on_progress: ProgressCallback | None = None,
        buffer: int = 64,
    ) -> None:
        settings = settings or Settings()
        self.settings = settings.replace(db=db) if db is not None else settings
        self.hooks = Hooks(on_page, url_filter, extract)
        self._on_progress = on_progress
        if buffer < 1:
            raise ConfigError(f"buffer must be ≥ 1, got {buffer}")
        self._buffer = buffer
        self._engine: Engine | None = None
        self._task: asyncio.Task[CrawlReport] | None = None
        self._queue: asyncio.Queue[CrawledPage] | None = None
        self.report: CrawlReport | None = None
        """The last finished run's report."""

    async def __aenter__(self) -> Crawler:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None and not self._task.done():
            self.stop("crawler closed")
            try:
                await self._finish()
            except (CrawlerError, asyncio.CancelledError):
                if exc is None:
                    raise

    async def _finish(self) -> CrawlReport:
        """Wait for the run to end, discarding pages no one will read (so that the crawl's
        waiting emitters can finish); sets ``report``."""
        task, queue = self._task, self._queue
        assert task is not None
        while not task.done():
            if queue is not None:
                while not queue.empty():
                    queue.get_nowait()
            await asyncio.wait({task}, timeout=0.05)
        self._queue = None
        self.report = task.result()
        return self.report

    def stop(self, reason: str = "stopped") -> None:
        """Stop the current run: no new requests; those in flight finish and are stored."""
        if self._engine is not None:
            self._engine.stop(reason)

    async def run(self, seeds: Iterable[str]) -> CrawlReport:
        """Crawl from ``seeds`` to the end (or a limit); returns the report."""
        task = self._start(seeds, self.hooks)
        self.report = await task
        return self.report

    async def pages(self, seeds: Iterable[str]) -> AsyncIterator[CrawledPage]:
        """Crawl from ``seeds``, yielding each stored URL as it is stored. At most
        ``buffer`` pages wait for the consumer; then the crawl waits. Breaking out of the
        loop and leaving the ``async with`` block stops the crawl cleanly (or call ``stop()``
        and keep reading); ``report`` is set when the run has ended."""
        queue: asyncio.Queue[CrawledPage] = asyncio.Queue(maxsize=self._buffer)
        user_on_page = self.hooks.on_page

        async def emit(page: CrawledPage) -> None:
            if user_on_page is not None:
                await user_on_page(page)
            await queue.put(page)

        task = self._start(seeds, Hooks(emit, self.hooks.url_filter, self.hooks.extract))
        self._queue = queue
        finished = False
        try:
            while True:
                if queue.empty() and task.done():
                    break
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                else:
                    getter.cancel()
            finished = True
        finally:
            if not finished and not task.done():
                self.stop("consumer stopped")
        await self._finish()

    def _start(self, seeds: Iterable[str], hooks: Hooks) -> asyncio.Task[CrawlReport]:
        if self._task is not None and not self._task.done():
            raise CrawlerError("this Crawler is already running; use another for a second crawl")
        self._engine = _engine(self.settings, seeds, on_progress=self._on_progress, hooks=hooks)
        self._task = asyncio.ensure_future(self._engine.run())
        self._queue = None
        return self._task


async def crawl(
    seeds: Iterable[str],
    settings: Settings | None = None,
    *,
    db: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> CrawlReport:
    """Crawl from ``seeds`` (absolute http(s) URLs) and store the pages; returns the report.

    ``db`` overrides ``settings.db``. ``on_progress`` is called about twice a second with a
    ``Progress`` snapshot. Raises ``ConfigError`` for a bad seed, ``StorageError`` when the
    database cannot be written.
    """
    settings = settings or Settings()
    if db is not None:
        settings = settings.replace(db=db)
    return await _engine(settings, seeds, on_progress=on_progress).run()


def run(
    seeds: Iterable[str],
    settings: Settings | None = None,
    *,
    db: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> CrawlReport:
    """``crawl`` for synchronous code: runs its own event loop (uvloop when installed).
    From code already in an event loop (an ``async def``, a notebook), ``await crawl(...)``:
    this raises ``CrawlerError`` there, before it starts anything."""
    _not_in_a_loop("crawler.run()", "await crawler.crawl(...)")
    return run_coroutine(crawl(seeds, settings, db=db, on_progress=on_progress))


def _not_in_a_loop(call: str, instead: str) -> None:
    """``CrawlerError`` if this thread runs an event loop (which a second one cannot join)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise CrawlerError(f"{call} cannot run inside a running event loop; use {instead}")


def rank(db: str, query: str, top: int = 10, device: str = "auto") -> list[Any]:
    """Rank the pages stored in ``db`` by BM25 relevance to ``query``: the ``top`` best
    (``crawler.relevance.ranking.RankedPage``: url, title, score), best first. No re-parsing.
    ``ConfigError`` for a bad argument, ``StorageError`` for a database it cannot read."""
    if not isinstance(top, int) or isinstance(top, bool) or top < 0:
        raise ConfigError(f"top must be a whole number ≥ 0, got {top!r}")
    if not isinstance(query, str) or not query.strip():
        raise ConfigError("query must not be empty")
    Settings(device=device)  # ConfigError for a device that is not one
    from crawler.relevance.ranking import rank as rank_pages  # numba: only when ranking

    return rank_pages(db, query, top, device)


def run_coroutine(coroutine: Any) -> Any:
    """Run a coroutine to completion on a fresh uvloop (or asyncio) event loop."""
    try:
        import uvloop  # optional
    except ImportError:
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def _engine(
    settings: Settings,
    seeds: Iterable[str],
    *,
    on_progress: ProgressCallback | None = None,
    hooks: Hooks | None = None,
) -> Engine:
    """An engine for ``seeds``, normalised (``ConfigError`` for a bad one, or none)."""
    # The engine, its HTTP client, parsers and store: loaded by the first crawl, so that
    # ``import crawler`` stays light.
    from crawler.engine.engine import Engine

    check_progress(on_progress)
    if isinstance(seeds, str | bytes):  # iterating it would give its characters as seeds
        raise ConfigError(f"seeds: a list of URLs, not one {type(seeds).__name__}: {seeds!r:.80}")

    normalized = Engine.normalize_seeds(seeds, settings.max_url_length)
    return Engine(settings, normalized, on_progress=on_progress, hooks=hooks)
