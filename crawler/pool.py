"""ParsePool: HTML parsing in worker processes, batched to cut inter-process cost.

Owns: the crawl's one ``ProcessPoolExecutor``. Invariants:
- workers are forked from a fork server (``forkserver`` start method) that imported
  ``parsers.preload``: the parser, lexbor and numba with its kernels loaded once, shared
  copy-on-write by every worker. Never plain ``fork`` of the crawl process: numba's threading
  layer and CUDA do not survive it; the fork server runs neither. ``spawn`` where there is
  no fork server (not Linux/macOS). Workers import only ``parsers``;
- ``parse()`` callers are grouped into batches: a batch goes out when it holds
  ``batch_max`` pages or ``flush_delay_s`` after its first page, whichever comes first;
- a broken pool (a worker killed) is recreated once and its batch retried; a second break
  fails the crawl.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Any, TypeVar

from crawler.errors import CrawlerError, ParseError
from parsers.page import Page, ParseFailure, ParseJob
from parsers.worker import init_worker, parse_batch, warm_up

log = logging.getLogger(__name__)
T = TypeVar("T")


def _context() -> multiprocessing.context.BaseContext:
    """The fork server context with ``parsers.preload`` preloaded (``spawn`` without one).

    The preload list is process-wide and read when the fork server starts: ours is added to
    the list already set (by default ``__main__``, the script, imported once there instead of
    in every worker), never replacing an application's own. In a process whose fork server
    was started before (by other code), workers still work, and warm up themselves."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    preload = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    if _PRELOAD not in preload:
        context.set_forkserver_preload([*preload, _PRELOAD])
    return context


_PRELOAD = "parsers.preload"


_PIPE_BYTES = 1 << 20


def _widen_pipes(executor: ProcessPoolExecutor) -> None:
    """Give the pool's two pipes 1 MiB of buffer (Linux ``F_SETPIPE_SZ``; default 64 KiB).

    A batch is ~0.5 MB each way (bodies out, text and tokens back): with 64 KiB a worker
    blocks in ``write`` until the main process's reader thread, which needs the GIL after
    every 64 KiB read, catches up. Best effort: private attributes of the executor, and a
    kernel may refuse the size (``/proc/sys/fs/pipe-max-size``)."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is None:
        return
    for queue in (getattr(executor, "_call_queue", None), getattr(executor, "_result_queue", None)):
        reader = getattr(queue, "_reader", None)
        try:
            fcntl.fcntl(reader.fileno(), setpipe, _PIPE_BYTES)  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):
            continue


def prestart() -> None:
    """Start the fork server now (it preloads the parser and numba in its own process) so
    that it is ready when the pool wants workers. For a caller with other start-up work to
    do first, like the CLI importing the crawler; harmless to skip or to call again."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        _context()
        try:
            forkserver.ensure_running()
        except OSError as exc:  # the pool tries again, and reports a real failure itself
            log.debug("fork server did not start early: %s", exc)


class ParsePool:
    """``async with ParsePool(n) as pool: page = await pool.parse(job)``."""

    def __init__(
        self,
        workers: int,
        *,
        batch_max: int = 16,
        flush_delay_s: float = 0.002,
        extract: Callable[[Any, str], Any] | None = None,
    ) -> None:
        self.workers = workers
        self._extract = extract
        self._batch_max = batch_max
        self._flush_delay_s = flush_delay_s
        self._executor: ProcessPoolExecutor | None = None
        self._jobs: list[ParseJob] = []
        self._waiters: list[asyncio.Future[Page]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._restarts = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready: asyncio.Future[list[int]] | None = None
        self.batches = 0
        self.busy = 0

    async def __aenter__(self) -> ParsePool:
        executor = self._executor = self._new_executor()
        # Workers start (fork server preload, fork) while the crawl fetches robots.txt and
        # its first pages: the first parse waits for ``_ready``. Submitting starts the
        # processes, which blocks until the fork server has preloaded (~0.4 s when it is
        # new): done in a thread, so the event loop goes on meanwhile.
        started = asyncio.to_thread(lambda: [executor.submit(warm_up) for _ in range(self.workers)])

        async def ready() -> list[int]:
            futures = await started
            return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))

        self._ready = asyncio.ensure_future(ready())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for waiter in self._waiters:
            waiter.cancel()
        for task in self._tasks:
            task.cancel()
        if self._ready is not None:
            self._ready.cancel()
            with contextlib.suppress(BaseException):
                await self._ready
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _new_executor(self) -> ProcessPoolExecutor:
        executor = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=_context(),
            initializer=init_worker,
            initargs=(self._extract,),
        )
        _widen_pipes(executor)
        return executor

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run another pure function of ``parsers`` in a worker (sitemaps, ...), unbatched."""
        if self._executor is None:
            raise CrawlerError("parse pool is closed")
        await self._wait_ready()
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    async def _wait_ready(self) -> None:
        if self._ready is not None:
            ready, self._ready = self._ready, None
            await ready

    async def parse(self, job: ParseJob) -> Page:
        """Parse one page in a worker; raises ``ParseError`` if the worker could not."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Page] = loop.create_future()
        self._jobs.append(job)
        self._waiters.append(waiter)
        if len(self._jobs) >= self._batch_max:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self._flush_delay_s, self._flush)
        return await waiter

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._jobs:
            return
        jobs, waiters = self._jobs, self._waiters
        self._jobs, self._waiters = [], []
        # The batch task reports every outcome through the waiters, which the callers await
        # (inside the engine's TaskGroup): it never fails on its own.
        task = asyncio.get_running_loop().create_task(self._run_batch(jobs, waiters))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_batch(self, jobs: list[ParseJob], waiters: list[asyncio.Future[Page]]) -> None:
        self.busy += 1
        try:
            results = await self._submit(jobs)
        except asyncio.CancelledError:
            for waiter in waiters:
                waiter.cancel()
            raise
        except Exception as exc:  # handed to every page of the batch: their tasks decide
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        finally:
            self.busy -= 1
        self.batches += 1
        for waiter, result in zip(waiters, results, strict=True):
            if waiter.done():
                continue
            if isinstance(result, ParseFailure):
                waiter.set_exception(ParseError(result.url, result.message))
            else:
                waiter.set_result(result)

    async def _submit(self, jobs: list[ParseJob]) -> list[Page | ParseFailure]:
        loop = asyncio.get_running_loop()
        await self._wait_ready()
        while True:
            if self._executor is None:
                raise CrawlerError("parse pool is closed")
            try:
                return await loop.run_in_executor(self._executor, parse_batch, jobs)
            except BrokenProcessPool:
                if self._restarts >= 1:
                    raise
                self._restarts += 1
                log.warning("parse pool broke (a worker died); starting a new one")
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = self._new_executor()
