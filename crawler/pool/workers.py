"""A parse worker as the pool sees it: its process, its two pipes and rings, the requests
it has not answered yet, and the reader of its replies.

``Worker.send`` frames a request (``parsers.wire``) onto the request pipe; ``ReplyReader``
reads framed replies off the reply pipe into one reused buffer and hands each to the pool
(``ParsePool._answered``), in request order; the pipe's end is the worker's death
(``ParsePool._lost``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import multiprocessing
import multiprocessing.context
import os
import select
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from crawler.pool.forkserver import released, without_main
from parsers import wire
from parsers.ring import Ring
from parsers.ring import available as ring_available
from parsers.worker import serve

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from crawler.pool.parse_pool import ParsePool

_PIPE_BYTES = 1 << 20


class _LoopsOwn:
    """A pipe's descriptor that only the event loop's transport closes (``for_transport``)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        """Nothing: libuv closed the descriptor already."""


def for_transport(loop: asyncio.AbstractEventLoop, connection: Connection) -> Any:
    """What to hand ``loop.connect_read_pipe`` / ``connect_write_pipe`` for ``connection``'s
    pipe, so that its descriptor is closed exactly once.

    uvloop's pipe transports give libuv the object's descriptor itself, which libuv closes,
    and then close the object too (uvloop issue 763): a second close of the same number,
    which by then may be another thread's, the closing pool's pidfd (seen: ``EBADF`` in
    ``_wait_exit``), a socket, or the store's database file. Under uvloop the transport gets
    a duplicate that libuv alone closes, and ``connection`` is closed here; asyncio's own
    transports close the object only, once, and get it as it is."""
    if not type(loop).__module__.startswith("uvloop"):
        return connection
    fd = os.dup(connection.fileno())
    connection.close()
    return _LoopsOwn(fd)


def widen_pipe(connection: Connection) -> None:
    """Give a pipe 1 MiB of buffer (Linux ``F_SETPIPE_SZ``; default 64 KiB).

    A batch is ~0.5 MB each way (bodies out, text and tokens back): with 64 KiB a worker
    blocks in ``write`` after every 64 KiB until the loop reads. Best effort: a kernel may
    refuse the size (``/proc/sys/fs/pipe-max-size``)."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(connection.fileno(), setpipe, _PIPE_BYTES)


_FRAME = wire.FRAME
_LONG_FRAME = wire.LONG_FRAME
_frame = wire.frame


Reply = Callable[[bool, Any], None]
"""Called with ``(True, result)`` or ``(False, exception)`` when a request is answered."""


class Request:
    """One request to a worker and what to do with its answer."""

    __slots__ = ("args", "deaths", "function", "on_crash", "on_timeout", "parts", "reply")

    def __init__(
        self,
        parts: list[bytes | memoryview],
        reply: Reply,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        on_timeout: Callable[[], None] | None = None,
        on_crash: Callable[[int], bool | None] | None = None,
    ) -> None:
        self.parts = parts
        """The message (``parsers.wire.encode``): placed when sent, again if sent again."""
        self.reply = reply
        self.function = function
        self.args = args
        """What the message says: run here instead when the workers are gone."""
        self.on_timeout = on_timeout
        """Called instead of ``reply`` when a worker spent the pool's ``timeout_s`` on it."""
        self.on_crash = on_crash
        """Called with ``deaths`` when a worker died holding it: ``None``, send it again;
        ``False``, it was split into its pages (sent instead); ``True``, it failed as the
        page a worker died on before (the death is explained). Nothing it holds may refer
        to this request: the two would be a cycle, which a crawl collects seldom."""
        self.deaths = 0
        """Workers that died while they held it."""


class Worker:
    """One worker process, the transport of its request pipe, its outstanding requests."""

    def __init__(
        self,
        pool: ParsePool,
        process: multiprocessing.process.BaseProcess,
        rings: tuple[Ring, Ring] | None = None,
    ) -> None:
        self.pool = pool
        self.process = process
        self.requests: asyncio.WriteTransport | None = None
        self.replies: asyncio.ReadTransport | None = None
        self.outstanding: deque[Request] = deque()
        self.dead = False
        self.timer: asyncio.TimerHandle | None = None
        """Fires ``timeout_s`` after the worker began its oldest outstanding request."""
        self.request_ring: Ring | None = rings[0] if rings is not None else None
        self.reply_ring: Ring | None = rings[1] if rings is not None else None

    def send(self, request: Request) -> None:
        assert self.requests is not None
        frame = _frame(wire.place(request.parts, self.request_ring))
        self.outstanding.append(request)  # only once its message is made: replies pair in order
        self.requests.writelines(frame)
        if self.timer is None:
            self.pool._arm(self)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for transport in (self.requests, self.replies):
            if transport is not None:
                transport.close()
        for ring in (self.request_ring, self.reply_ring):
            if ring is not None:
                ring.close()
        self.request_ring = self.reply_ring = None


class ReplyReader(asyncio.BufferedProtocol):
    """Reads a worker's framed replies off its pipe and hands each to the pool.

    The pipe is read into one buffer that the reader keeps and reuses (``get_buffer`` /
    ``buffer_updated``: uvloop reads straight into it), and a frame is unpickled from a view
    of it: a ~1 MB reply is copied once, by the kernel. With ``data_received`` each read
    came as a new ``bytes`` (a copy), appended to a growing ``bytearray`` (another, plus
    its reallocations): ~4 % of the event loop's CPU in a 10,000-page crawl (``perf``).
    asyncio's own pipe transport knows no buffered protocol: it calls ``data_received``,
    which copies into the same buffer."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._buffer = bytearray(_READ_BYTES)
        self._start = 0  # the first byte not consumed
        self._end = 0  # the end of what was read

    def get_buffer(self, sizehint: int) -> memoryview:
        buffer, start, end = self._buffer, self._start, self._end
        wanted = max(_frame_size(buffer, start, end)[1], _MIN_READ)
        if start + wanted > len(buffer):
            if wanted > len(buffer):  # a new buffer: never resize one a view may still hold
                grown = bytearray(max(wanted, 2 * len(buffer)))
                grown[: end - start] = buffer[start:end]
                self._buffer = buffer = grown
            else:  # what was read of the next frame to the front
                buffer[: end - start] = buffer[start:end]
            self._start, self._end = 0, end - start
        return memoryview(buffer)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        buffer, start, end = self._buffer, self._start, self._end
        while end - start >= 4:
            head, size = _frame_size(buffer, start, end)
            if end - start < size:
                break
            with memoryview(buffer) as view:
                payload = view[start + head : start + size]
                try:
                    self._worker.pool._answered(self._worker, payload)
                finally:
                    payload.release()
            start += size
        if start == end:
            start = end = 0
            if len(buffer) > _KEEP_BYTES:  # after an outsized reply: back to the usual size
                self._buffer = bytearray(_READ_BYTES)
        self._start, self._end = start, end

    def data_received(self, data: bytes) -> None:
        with memoryview(data) as rest:
            while rest:
                target = self.get_buffer(len(rest))
                n = min(len(target), len(rest))
                target[:n] = rest[:n]
                target.release()
                self.buffer_updated(n)
                rest = rest[n:]

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker.pool._lost(self._worker)


_READ_BYTES = 1 << 20
"""A reply reader's buffer to begin with (a batch's reply is ~0.5-1.5 MB; it grows to the
largest frame)."""
_KEEP_BYTES = 16 << 20
"""A buffer grown past this for one reply is dropped once that reply is consumed."""
_MIN_READ = 64 << 10


def _frame_size(buffer: bytearray, start: int, end: int) -> tuple[int, int]:
    """(header size, size with the header) of the frame at ``start`` (``_frame``'s form);
    while the header is incomplete, the size is how many bytes to read before it is known."""
    if end - start < 4:
        return 12, 12
    (size,) = _FRAME.unpack_from(buffer, start)
    if size != -1:
        return 4, 4 + size
    if end - start < 12:
        return 12, 12
    return 12, 12 + _LONG_FRAME.unpack_from(buffer, start + 4)[0]


def make_rings(ring_bytes: int) -> tuple[Ring, Ring] | None:
    """A new worker's two rings (requests, replies), or ``None``: pipes alone (no ``memfd``
    here, ``ring_bytes`` 0, or the rings could not be made)."""
    if not ring_bytes or not ring_available():
        return None
    made: list[Ring] = []
    try:
        for _ in range(2):
            made.append(Ring.create(ring_bytes))
    except OSError as exc:
        for ring in made:
            ring.close()
        log.debug("parse worker without shared memory: %s", exc)
        return None
    return made[0], made[1]


def load(worker: Worker) -> int:
    return len(worker.outstanding)


def join(processes: list[multiprocessing.process.BaseProcess], timeout_s: float = 10.0) -> None:
    """Wait for workers to finish their request and exit; kill the ones that do not. An
    adopted worker (its fork server ended: ``crawler.pool.forkserver.release``), whose
    ``exitcode`` multiprocessing can no longer know, is waited for by its pid."""
    deadline = time.monotonic() + timeout_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if _adopted(process):
            _wait_exit(process, deadline)
            if _adopted(process):
                kill(process)
        elif process.exitcode is None:
            kill(process)
            process.join()


def _wait_exit(process: multiprocessing.process.BaseProcess, deadline: float) -> None:
    """Wait until adopted worker ``process`` has exited (not reaped: ``_adopted`` does that)
    or ``deadline`` passes: woken by its exit on a pidfd (Linux 5.3), where polling its pid
    would add up to a poll's period to every crawl's end; polling where there is none."""
    assert process.pid is not None
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # no pidfd here (or gone: the poll below sees it)
        while _adopted(process) and time.monotonic() < deadline:
            time.sleep(0.01)
        return
    try:
        readable = select.poll()  # not select(): a crawl's fds can pass 1024
        readable.register(fd, select.POLLIN)
        readable.poll(max(0.0, deadline - time.monotonic()) * 1000)
    finally:
        os.close(fd)


def kill(process: multiprocessing.process.BaseProcess) -> None:
    """SIGKILL a worker: through multiprocessing while its fork server runs, else (adopted:
    multiprocessing takes it for gone once its server's status pipe closed) by its pid,
    which stays its own while it is this process's unreaped child."""
    process.kill()
    if _adopted(process):
        assert process.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(process.pid, 0)


def _adopted(process: multiprocessing.process.BaseProcess) -> bool:
    """Whether ``process`` is a living child of this process that its fork server forked
    (a worker adopted once the server ended); reaps it if it has exited."""
    if process.pid is None or not released():  # before: no worker is this process's child
        return False
    try:
        pid, _ = os.waitpid(process.pid, os.WNOHANG)
    except ChildProcessError:  # not this process's child (its fork server's), or reaped
        return False
    return pid == 0


Spawned = tuple[multiprocessing.process.BaseProcess, Connection, Connection, Any]
"""A started worker: its process, its request and reply pipes, its rings (or ``None``)."""


def spawn(
    context: multiprocessing.context.BaseContext,
    main: bool,
    extract: Callable[[Any, str], Any] | None,
    ring_bytes: int,
) -> Spawned:
    """Start a worker (``parsers.worker.serve``) in ``context``, with its pipes and rings;
    it imports the script running as ``__main__`` only when ``main``. Blocks until forked."""
    their_requests, requests = context.Pipe(duplex=False)
    replies, their_replies = context.Pipe(duplex=False)
    for connection in (requests, replies):
        widen_pipe(connection)
    rings = make_rings(ring_bytes)
    process = context.Process(  # type: ignore[attr-defined]
        target=serve,
        args=(their_requests, their_replies, extract,
              None if rings is None else (rings[0].shared(), rings[1].shared())),
        name="crawl-parse",
        daemon=True,
    )  # fmt: skip
    try:
        with contextlib.nullcontext() if main else without_main():
            process.start()
    except BaseException:
        for ring in rings or ():
            ring.close()
        raise
    finally:
        their_requests.close()  # the worker holds its own copies now
        their_replies.close()
    return process, requests, replies, rings


def start_in_daemon_thread(spawn: Callable[[], Spawned]) -> asyncio.Future[Spawned]:
    """``spawn()`` (which blocks until the fork server has preloaded and forked, ~0.2-0.4 s
    at a crawl's start) in a daemon thread: a closing pool need not wait for it, nor does
    the interpreter's exit, which joins ``asyncio.to_thread``'s threads. A start whose
    future was cancelled, or whose loop is gone, is undone in the thread: the worker's
    pipes closed (it exits at their end of file, as an idle worker does) and joined."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Spawned] = loop.create_future()

    def settle(result: Spawned | None, error: BaseException | None) -> None:
        if future.cancelled():
            if result is not None:
                threading.Thread(target=_undo, args=(result,), daemon=True).start()
        elif error is not None:
            future.set_exception(error)
        else:
            assert result is not None
            future.set_result(result)

    def run() -> None:
        try:
            result = spawn()
        except BaseException as exc:  # delivered to the awaiting coroutine
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(settle, None, exc)
            return
        try:
            loop.call_soon_threadsafe(settle, result, None)
        except RuntimeError:  # the loop is closed
            _undo(result)

    threading.Thread(target=run, name="crawl-parse-start", daemon=True).start()
    return future


def _undo(started: Spawned) -> None:
    process, requests, replies, rings = started
    requests.close()
    replies.close()
    for ring in rings or ():
        ring.close()
    join([process])
