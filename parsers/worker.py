"""A parse worker process: its set-up and its request loop (``serve``).

``parse_batch`` is what the pool sends most. Workers ignore SIGINT: a Ctrl-C in a terminal reaches the whole process group, and the
parent decides how to stop; a worker dying of it would break the pool mid-batch.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import ModuleType
from typing import Any

from parsers import wire
from parsers.page import Page, ParseFailure, ParseJob
from parsers.ring import SharedRing


def kernels() -> ModuleType:
    """``parsers.kernels``: the parser and the numba kernels, loaded on first use, where pages
    are parsed. The crawl process imports this module for the functions it sends by name
    (``parse_batch``), and so never loads them for a worker's sake."""
    from parsers import kernels as loaded  # lexbor and numba: only where pages are parsed

    return loaded


def parse_batch(jobs: list[ParseJob]) -> list[Page | ParseFailure]:
    """``parsers.html.parse_batch``, run where the pool sends it (a worker)."""
    return kernels().parse_batch(jobs)


def text_terms(text: str, query: tuple[int, ...]) -> tuple[bytes, int, int, tuple[int, ...]]:
    """``parsers.tokens.page_terms`` of a text as a plain tuple (blob, token length, SimHash,
    query counts): for a page the crawl process parsed itself (``parse_document``), which
    unpickles this without importing ``parsers.tokens`` and so numba."""
    return kernels().text_terms(text, query)


def serve(
    requests: Connection,
    replies: Connection,
    extract: Callable[[Any, str], Any] | None,
    rings: tuple[SharedRing, SharedRing] | None = None,
) -> None:
    """The worker's life: set up, warm up, then answer requests in order until the crawl
    closes its end of ``requests`` (or dies).

    A request is ``(function, args)`` as ``parsers.wire`` sends it (``place``: inline, or in
    the first of ``rings``); the reply ``(True, result)`` or ``(False, exception)``, sent the
    same way (in the second ring where it fits), framed as ``Connection.send_bytes`` frames
    (the pool's event loop reads them without a thread). One reply per request, in request
    order."""
    init_worker(extract)
    warm_up()
    request_ring, reply_ring = (rings[0].open(), rings[1].open()) if rings else (None, None)
    while True:
        try:
            request = requests.recv_bytes()
        except (EOFError, OSError):
            return  # the crawl is done with this worker, or gone
        try:
            function, args = wire.receive(request, request_ring)
            reply: tuple[bool, object] = (True, function(*args))
        except Exception as exc:  # the caller's to handle, as if raised there
            reply = (False, exc)
        del request
        try:
            message = wire.place(wire.encode(reply), reply_ring)
        except Exception as exc:  # an unpicklable result or exception
            error = RuntimeError(f"worker reply cannot be pickled: {type(exc).__name__}: {exc}")
            message = wire.place(wire.encode((False, error)), None)
        del reply
        try:
            send_parts(replies, message)
        except OSError:
            return  # the crawl closed its end (shutdown) or died


def send_parts(connection: Connection, parts: list[bytes | memoryview]) -> None:
    """``connection.send_bytes`` of the parts' concatenation, without concatenating them:
    the same frame (``parsers.wire.frame``), in ``writev`` calls."""
    views = [memoryview(part) for part in wire.frame(parts)]
    fd = connection.fileno()
    while views:
        written = os.writev(fd, views[:_IOV_MAX])
        while written:
            first = views[0]
            if written >= first.nbytes:
                written -= first.nbytes
                views.pop(0)
            else:
                views[0] = first[written:]
                written = 0
        while views and not views[0].nbytes:
            views.pop(0)


_IOV_MAX = 1024


def init_worker(extract: Callable[[Any, str], Any] | None = None) -> None:
    """Per process: ignore SIGINT; exit when the crawl process dies; install the crawl's
    ``extract`` hook, if any."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _batch_priority()
    keep_batch_buffers()
    gc.set_threshold(50_000, 20, 10)  # parsing frees by reference counting; few cycles
    gc.enable()  # whatever the fork server's preload left (it loads with it off)
    _exit_with_parent()
    if extract is not None:
        kernels().html.set_extract(extract)


WORKER_NICE = 10
"""How much lower a parse worker's priority is than the crawl process's (``os.nice``)."""


def _batch_priority() -> None:
    """Run as background work: ``WORKER_NICE`` steps nicer than the crawl process, and on
    Linux as ``SCHED_BATCH`` (CPU-bound, no wake-up preemption). A worker woken by a batch
    waits for a free core or the tick instead of preempting the event loop; and when the
    event loop or the store's thread wakes (a response, a commit done) on a core a worker
    holds, it runs at once instead of waiting for the worker's time slice: the pages keep
    flowing to the workers and to the store, and the workers take every cycle left.
    10,000-page site, 9 pairs in a slow phase of the machine: 4.40-5.00 (median 4.70) ->
    4.12-4.63 s (4.37) at the same CPU; in a fast one, 4 ABBA pairs: 3.88 -> 3.81 s; Python
    docs, 8 pairs: 1.10 -> 1.02 s (medians). Elsewhere, or if refused, as it is."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: no os.nice
        os.nice(WORKER_NICE)
    setscheduler = getattr(os, "sched_setscheduler", None)
    batch = getattr(os, "SCHED_BATCH", None)
    if setscheduler is not None and batch is not None:
        with contextlib.suppress(OSError):
            setscheduler(0, batch, os.sched_param(0))


BATCH_BUFFER_BYTES = 8 << 20
"""Blocks up to this size come from the heap, and up to this much freed memory stays there
(``keep_batch_buffers``)."""


def keep_batch_buffers() -> bool:
    """glibc: serve blocks up to ``BATCH_BUFFER_BYTES`` from the heap and keep up to as much
    free in it, instead of a fresh ``mmap`` for every block over 128 KiB; ``False`` where
    there is no ``mallopt`` or it refuses.

    A worker's batch request (~1-3 MB) and its pickled reply (~1 MB) are such blocks, one
    of each per batch: each came as new zeroed pages from the kernel, first touched by the
    pipe read or the pickler, and went back when freed. In a 10,000-page crawl that was
    ~80,000 page faults and ~0.2 s of the workers' kernel time (9,000 faults after); the
    reply's pickling alone cost 26-35 instead of 8.5 us a page (in-process benchmark).
    The price: up to 8 MB of freed heap a worker stays resident: the Python docs crawl's
    tree PSS 280-283 -> 287-293 MB (with 16 MB kept: 293-303; with 4 MB: 277-287 MB but
    33,000 faults again); with 1,000,000 URLs +2 MB (16 MB kept). Setting the threshold
    also ends glibc's own adjustment of it."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # not glibc (macOS, Windows): as it is
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(
        mallopt(m_mmap_threshold, BATCH_BUFFER_BYTES)
        and mallopt(m_trim_threshold, BATCH_BUFFER_BYTES)
    )


def _exit_with_parent(poll_s: float = 1.0) -> None:
    """A crawl killed with SIGKILL cannot stop its pool: without this its workers (and their
    memory) would live on as orphans. A daemon thread waits on the crawl process's sentinel
    (a pipe it holds open: end of file when it dies) and exits.

    Forked from the fork server, a worker's OS parent is the fork server, which itself only
    exits after its children: watching ``getppid()`` would never fire. Without a sentinel
    (not started by multiprocessing), a change of parent is polled for instead."""
    crawl = multiprocessing.parent_process()
    parent = os.getppid()

    def watch() -> None:
        if crawl is not None:
            crawl.join()
        else:
            while os.getppid() == parent:
                time.sleep(poll_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def warm_up() -> int:
    """Imports are done, lexbor loaded and the numba kernels compiled or loaded from their
    cache before the first real batch (``parsers.kernels``); returns the pid."""
    kernels().warm_up()
    return os.getpid()
