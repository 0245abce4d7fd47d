"""ParsePool: HTML parsing in worker processes, batched, driven by the event loop itself.

Owns: the crawl's parse worker processes and the two pipes to each. Invariants:
- workers are forked from a fork server (``forkserver`` start method) that imported
  ``parsers.preload``: the parser, lexbor and numba with its kernels loaded once, shared
  copy-on-write by every worker. Never plain ``fork`` of the crawl process: numba's threading
  layer and CUDA do not survive it; the fork server runs neither. ``spawn`` where there is
  no fork server (not Linux/macOS). Workers import only ``parsers`` and run
  ``parsers.worker.serve``;
- requests and replies are pickles whose large byte strings travel beside them (a request's
  page bodies, a reply's texts as UTF-8 and token blobs: ``parsers.wire``), written into a
  ring of shared memory per direction and worker (``parsers.ring``, ``ring_bytes`` each)
  where it has room, else through the pipe. The pipes carry every message's notice; the
  event loop reads and writes them itself (asyncio pipe transports): no executor threads,
  no cross-thread wake-ups, and the replies are decoded on the loop that uses them, in the
  ring, which the decoding gives back. A worker answers in request order;
- ``parse()`` callers are grouped into batches: while every worker is busy, a batch goes
  out when it holds ``batch_max`` pages or ``BATCH_BYTES`` of bodies, or ``flush_delay_s``
  after its first page, to the worker with the fewest requests outstanding. Each batch
  costs a pipe write, a worker's wake-up and a reply read on both sides, so a fast crawl
  wants batches of tens of pages (the defaults' measure: ``bench/RESULTS.md``). While a
  worker is idle, what arrived in the loop's current turn goes at once,
  shared among the idle workers: the crawl's first and last pages, and every page of a
  slow site, do not wait for a batch to fill, nor one worker parse a batch while another
  idles (a busy crawl's workers are rarely idle, so its batches stay full);
- a request a worker has worked on for ``timeout_s`` is abandoned: the worker is killed and
  replaced (lexbor is super-linear on some inputs, and C code cannot be interrupted), its
  other requests sent again; a batch's pages are sent again one by one, and a page that
  times out alone fails with ``ParseTimeout`` (``crawler.pool.batch``). Such a kill is no
  death of the worker's own;
- a worker that dies is replaced; the request it was working on (the first it held) is
  charged with the death: a batch is split, a page gets a second worker and fails as
  ``ParseCrash`` if that one dies too, never parsed here (it would end this process). Deaths
  with no page to charge (or before any worker parsed a page) count against a budget of as
  many restarts as there are workers; when workers cannot start, or the budget is spent,
  the pool parses in the crawl process from then on (one warning), as it does
  from the start when the parse needs an ``extract`` hook that workers cannot import (one
  defined in a script read from standard input). Pages whose shape makes lexbor slow
  (``costly``) are not parsed there: they fail with ``ParseTimeout``;
- workers import the crawl's ``__main__`` (the user's script) only when the ``extract`` hook
  lives there (``main``): an unguarded five-line script is not run again in each of them;
- closing the pool stops idle workers and kills busy ones: nobody waits for their answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
from collections import deque
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Any, TypeVar

from crawler.errors import CrawlerError, ParseCrash, ParseTimeout
from crawler.pool.batch import Batch, shares
from crawler.pool.forkserver import context as _context
from crawler.pool.forkserver import release as release_fork_server
from crawler.pool.forkserver import release_after_start
from crawler.pool.here import IN_PROCESS_WHY, run_here
from crawler.pool.workers import (
    Reply,
    ReplyReader,
    Request,
    Spawned,
    Worker,
    for_transport,
    join,
    kill,
    load,
    spawn,
    start_in_daemon_thread,
)
from parsers import wire
from parsers.page import Page, ParseJob
from parsers.ring import HEADER_BYTES as RING_HEADER_BYTES
from parsers.worker import parse_batch

log = logging.getLogger(__name__)
T = TypeVar("T")


RING_BYTES = 4 << 20
"""Each direction of a worker's traffic goes through a ring of this size (``parsers.ring``):
a batch of the benchmark site's pages is ~0.9 MB each way, so a ring holds the ~3 batches a
busy worker has outstanding; a message that finds no room goes through the pipe."""


BATCH_BYTES = 2 << 20
"""A batch also goes out once its pages' bodies weigh this: a worker holds the batch, its
pages' trees and a reply with their text at once (pages of megabytes, 4 to a batch: ~85 MB)."""


class ParsePool:
    """``async with ParsePool(n) as pool: page = await pool.parse(job)``."""

    def __init__(
        self,
        workers: int,
        *,
        batch_max: int = 32,
        flush_delay_s: float = 0.016,
        extract: Callable[[Any, str], Any] | None = None,
        ring_bytes: int = RING_BYTES,
        timeout_s: float = 5.0,
        main: bool = False,
        in_process: bool = False,
        start: bool = True,
    ) -> None:
        """``timeout_s``: how long a worker may work on one request; ``main``: workers
        import the script running as ``__main__`` (where ``extract`` is defined);
        ``in_process``: no workers, everything is parsed in this process; ``start``: the
        workers start as the pool opens, else at its first request or ``start()``."""
        if ring_bytes and ring_bytes <= RING_HEADER_BYTES:
            raise ValueError(f"ring_bytes: 0 (no rings) or more than {RING_HEADER_BYTES}")
        self.workers = workers
        self._timeout_s = timeout_s
        self._main = main
        self._here = in_process
        """Requests run in this process: from the start (``in_process``), or since the
        workers failed (``_fail``)."""
        self._killed: list[multiprocessing.process.BaseProcess] = []
        self._released = False
        """The fork server was ended once the first workers were up (``release``)."""
        """Workers ended out of turn (killed for time, or up after the close began),
        joined at the close."""
        self._ring_bytes = ring_bytes
        self._extract = extract
        self._batch_max = batch_max
        self._flush_delay_s = flush_delay_s
        self._jobs: list[ParseJob] = []
        self._jobs_bytes = 0
        self._waiters: list[asyncio.Future[Page]] = []
        self._timer: asyncio.Handle | None = None
        self._live: list[Worker] = []
        self._waiting: deque[Request] = deque()
        """Requests made while no worker was up (start-up, a replacement starting)."""
        self._restarts_left = workers
        self._broken: BrokenProcessPool | None = None
        self._closing = False
        self._open = False
        self._starting: set[asyncio.Task[None]] = set()
        self._forked = False
        self._start_at_open = start
        self._started = False
        self._coming = 0
        """Workers starting (``_run_worker`` running)."""
        self.batches = 0
        self.busy = 0
        self._opened_at = 0.0
        self._loop: asyncio.AbstractEventLoop  # bound on opening (get_running_loop: a getpid)

    async def __aenter__(self) -> ParsePool:
        # Workers start (fork server preload, fork) while the crawl goes on: requests made
        # meanwhile wait in ``_waiting``.
        self._open = True
        self._loop = asyncio.get_running_loop()
        self._opened_at = self._loop.time()
        if self._here:
            log.warning("parsing in the crawl process: %s", IN_PROCESS_WHY)
        elif self._start_at_open:
            self.start()
        return self

    def start(self) -> None:
        """Start the workers, once: as the pool opens, or (``start=False``) when its first
        request comes or its user knows that work will (a crawl of one page parses it in
        its own process, ``ready``, and starts none: their start, fork and exit would be
        a tenth of its run). Nothing while the pool is closed or parses here."""
        if self._started or self._here or not self._open or self._closing:
            return
        self._started = True
        for _ in range(self.workers):
            self._start_worker()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
        for waiter in self._waiters:
            waiter.cancel()
        closed = CrawlerError("parse pool is closed")
        # A worker still starting is not waited for (a short crawl would wait out the fork
        # server's preload): its start is undone in its thread (``start_in_daemon_thread``).
        for task in self._starting:
            task.cancel()
        for task in list(self._starting):
            with contextlib.suppress(BaseException):
                await task
        workers, self._live = self._live, []
        for worker in workers:
            if worker.outstanding:  # busy: nobody waits for it (a parse may take long)
                kill(worker.process)
            worker.close()  # end of file on its request pipe: an idle worker exits
            for request in worker.outstanding:
                request.reply(False, closed)
        for request in self._waiting:
            request.reply(False, closed)
        self._waiting.clear()
        processes = [worker.process for worker in workers] + self._killed
        if processes:
            await asyncio.to_thread(join, processes)
        if not self._started and release_after_start():
            # the crawl command's pool, which wanted no worker: its fork server (preloading
            # still, perhaps) is ended now, its memory freed while the crawl ends
            release_fork_server(adopt=False, wait=False)

    # -- requests ----------------------------------------------------------------------------
    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run another pure function of ``parsers`` in a worker (sitemaps, ...), unbatched."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def reply(ok: bool, value: Any) -> None:
            if not future.done():
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

        self._request(function, args, reply)
        return await future

    async def parse(self, job: ParseJob) -> Page:
        """Parse one page in a worker; raises ``ParseError`` if the worker could not."""
        loop = self._loop
        waiter: asyncio.Future[Page] = loop.create_future()
        self._jobs.append(job)
        self._waiters.append(waiter)
        self._jobs_bytes += len(job.body or b"")
        if len(self._jobs) >= self._batch_max or self._jobs_bytes >= BATCH_BYTES:
            self._flush()
        elif self._timer is None:
            if any(not worker.outstanding for worker in self._live):
                # A worker waits: no reason to make this page wait too. The pages that
                # arrive in this turn of the loop go with it.
                self._timer = loop.call_soon(self._flush)
            else:
                self._timer = loop.call_later(self._flush_delay_s, self._flush)
        return await waiter

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._jobs:
            return
        jobs, waiters = self._jobs, self._waiters
        self._jobs, self._waiters, self._jobs_bytes = [], [], 0
        idle = sum(1 for worker in self._live if not worker.outstanding)
        if idle > 1 and len(jobs) > 1:
            # Workers are waiting (the crawl's first pages, its last ones, a slow site):
            # a share for each instead of the whole batch on one while the others idle,
            # shares of about equal work (bytes), not of equal counts.
            for share in shares(jobs, idle):
                self.send_batch([jobs[i] for i in share], [waiters[i] for i in share])
        else:
            self.send_batch(jobs, waiters)

    @property
    def timeout_s(self) -> float:
        """How long a worker may work on one request before it is replaced."""
        return self._timeout_s

    def send_batch(self, jobs: list[ParseJob], waiters: list[asyncio.Future[Page]]) -> None:
        """Send ``jobs`` as one request; ``crawler.pool.batch.Batch`` settles ``waiters``."""
        self.busy += 1
        batch = Batch(self, jobs, waiters)
        self._request(parse_batch, (jobs,), batch.reply, batch.timed_out, batch.crashed)

    def _request(
        self,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        reply: Reply,
        on_timeout: Callable[[], None] | None = None,
        on_crash: Callable[[int], bool | None] | None = None,
    ) -> None:
        if not self._open or self._closing:
            reply(False, CrawlerError("parse pool is closed"))
            return
        if self._broken is not None and not self._here:
            reply(False, self._broken)
            return
        if self._here:
            asyncio.get_running_loop().call_soon(run_here, function, args, reply, self._extract)
            return
        try:
            parts = wire.encode((function, args))  # bodies beside the pickle, not copied in
        except Exception as exc:  # a job that cannot travel: the caller's error
            reply(False, exc)
            return
        request = Request(parts, reply, function, args, on_timeout, on_crash)
        self.start()
        if self._live:
            min(self._live, key=load).send(request)
        else:
            self._waiting.append(request)

    @property
    def ready(self) -> bool:
        """Whether a worker has been started: ``False`` before ``start``, and while the pool
        waits for the fork server's preload at its start. Read by the crawl to parse its
        first pages itself;
        set by the starting thread itself (``_spawn``) as soon as a worker is forked, not
        some loop turns later when it is connected: a turn can be long then (pages parsed in
        the crawl process), and each one more is one more page parsed there, not in a
        worker."""
        return self._forked

    def _answered(self, worker: Worker, payload: memoryview) -> None:
        request = worker.outstanding.popleft()
        if worker.timer is not None:
            worker.timer.cancel()
            worker.timer = None
        if worker.outstanding:
            self._arm(worker)
        try:
            ok, value = wire.receive(payload, worker.reply_ring)
        except Exception as exc:  # an exception type that does not unpickle, say
            ok, value = False, CrawlerError(f"unreadable reply from a parse worker: {exc}")
        request.reply(ok, value)

    @property
    def in_process(self) -> bool:
        """Whether requests are run in this process (no workers, or none any more)."""
        return self._here

    def _arm(self, worker: Worker) -> None:
        """Time the worker's oldest outstanding request, which it is working on now."""
        worker.timer = self._loop.call_later(self._timeout_s, self._overdue, worker)

    def _overdue(self, worker: Worker) -> None:
        """``worker`` spent ``timeout_s`` on one request: kill it, start another for the
        rest of its requests, and tell the request's owner."""
        worker.timer = None
        if worker.dead or not worker.outstanding or self._closing:
            return
        worker.dead = True  # a kill of ours, not a death: ``_lost`` does nothing more
        kill(worker.process)
        self._killed.append(worker.process)
        worker.close()
        if worker in self._live:
            self._live.remove(worker)
        request = worker.outstanding.popleft()
        rest, worker.outstanding = worker.outstanding, deque()
        log.warning("a parse took more than %g s: its worker was replaced", self._timeout_s)
        self._start_worker(rest)
        if request.on_timeout is not None:
            request.on_timeout()
        else:
            request.reply(False, ParseTimeout("(request)", f"not done in {self._timeout_s:g} s"))

    # -- worker processes --------------------------------------------------------------------
    def _start_worker(self, resend: deque[Request] | None = None) -> None:
        task = asyncio.get_running_loop().create_task(self._run_worker(resend or deque()))
        self._coming += 1
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _run_worker(self, resend: deque[Request]) -> None:
        try:
            await self._bring_up(resend)
        finally:
            self._coming -= 1
            if not self._coming and self._live and not self._closing:  # the last one up
                while self._waiting:
                    min(self._live, key=load).send(self._waiting.popleft())
                if not self._released and release_after_start():
                    self._released = True  # once: a worker started later keeps its server
                    release_fork_server(wait=False)  # the loop does not wait for its end

    async def _bring_up(self, resend: deque[Request]) -> None:
        # Starting a process blocks until the fork server has preloaded (~0.4 s when it is
        # new) and forked: done in a thread, so the event loop goes on meanwhile.
        try:
            process, requests, replies, rings = await start_in_daemon_thread(self._spawn)
        except asyncio.CancelledError:  # the pool is closing
            for request in resend:
                request.reply(False, CrawlerError("parse pool is closed"))
            raise
        except Exception as exc:
            if not self._live and self._coming <= 1:
                self._fail(BrokenProcessPool(f"cannot start a parse worker: {exc}"), resend)
            else:  # the others take its share
                log.warning("a parse worker could not start: %s", exc)
                self._waiting.extend(resend)
            return
        worker = Worker(self, process, rings)
        loop = asyncio.get_running_loop()
        try:
            worker.requests, _ = await loop.connect_write_pipe(
                asyncio.Protocol, for_transport(loop, requests)
            )
            worker.replies, _ = await loop.connect_read_pipe(
                lambda: ReplyReader(worker), for_transport(loop, replies)
            )
        except BaseException:  # a duplicate that a failed connect took stays its own
            worker.close()
            requests.close()
            replies.close()
            kill(process)
            raise
        if self._closing:
            worker.close()  # end of file: it exits, and is joined at the close
            self._killed.append(process)
            return
        self._live.append(worker)
        log.debug("parse worker %s ready %.3f s after the pool opened; queued requests: %d",
                  process.pid, loop.time() - self._opened_at, len(self._waiting))  # fmt: skip
        while resend:
            worker.send(resend.popleft())
        # The requests made while no worker was up (the crawl's first pages): a share for
        # each worker coming up, instead of all of them to the first (the others are up
        # within milliseconds); the last one takes what is left (``_run_worker``).
        waiting = self._waiting
        for _ in range(-(-len(waiting) // self._coming)):
            worker.send(waiting.popleft())

    def _spawn(self) -> Spawned:
        spawned = spawn(_context(self._main), self._main, self._extract, self._ring_bytes)
        self._forked = True  # in this thread: see ``ready``
        return spawned

    def _lost(self, worker: Worker) -> None:
        """A worker's reply pipe closed: it died (or the pool is closing)."""
        if worker.dead:
            return
        worker.dead = True
        worker.close()
        if self._closing or worker not in self._live:
            return
        self._live.remove(worker)
        self._killed.append(worker.process)  # joined at the close (an adopted one: reaped)
        with contextlib.suppress(Exception):
            worker.process.join(0.05)  # its exit code, for the log (a rare path)
        code = worker.process.exitcode
        # A worker answers in order: the first request it held is the one it was working
        # on; the ones behind it had not begun, and go again as they are.
        resend = worker.outstanding
        explained = False
        if resend:
            request = resend.popleft()
            request.deaths += 1
            # Pages are charged for a death, not the pool, once workers have shown they work.
            explained = request.on_crash is not None and self.batches > 0
            handled = request.on_crash(request.deaths) if request.on_crash is not None else None
            if handled is None and request.deaths < 3:
                resend.appendleft(request)
            elif handled is None:  # no pages to split into (a sitemap, a call): the cause
                request.reply(False, ParseCrash("(request)", "three parse workers died on it"))
            # else: split into its pages, or failed as the page two workers died on
        if explained:  # each page has two workers' chances, not the pool's budget
            log.warning("a parse worker died holding pages (exit code %s); starting another", code)
            self._start_worker(resend)
            return
        if self._restarts_left <= 0:
            self._fail(BrokenProcessPool(f"a parse worker died again (exit code {code})"),
                       resend)  # fmt: skip
            return
        self._restarts_left -= 1
        log.warning("a parse worker died (exit code %s); starting another", code)
        self._start_worker(resend)

    def _fail(self, error: BrokenProcessPool, outstanding: deque[Request]) -> None:
        """The workers cannot run: what was outstanding, what waits and what comes is run
        in this process from now on (the crawl goes on, slower)."""
        self._broken = error
        if not self._here:
            self._here = True
            log.warning("parse workers cannot run (%s): parsing in the crawl process", error)
        loop = asyncio.get_running_loop()
        if self.batches:  # workers worked: what one died holding is not run here, to kill it
            for request in outstanding:
                request.reply(False, ParseCrash("(request)", "its parse worker died"))
            outstanding.clear()
        for request in (*outstanding, *self._waiting):
            loop.call_soon(run_here, request.function, request.args, request.reply, self._extract)
        outstanding.clear()
        self._waiting.clear()  # workers still up answer what they hold, and then idle
