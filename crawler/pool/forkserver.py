"""The parse workers' fork server: its multiprocessing context and an early start.

Owns: which start method the pool uses, what the fork server preloads, and whether workers
import the script running as ``__main__`` (only for an ``extract`` hook defined there:
``main_needed``; else ``without_main``, so that an unguarded five-line script is not run
again in every worker; and ``unguarded_line``, to stop a script that needs it and lacks
the ``if __name__ == "__main__":`` guard before it is run again). Light on purpose
(``multiprocessing`` only): the ``crawl`` command starts the fork server before it imports
anything else, so that the fork server's ~0.4 s preload (numba, lexbor) runs on another core
while this process imports the crawler.

The ``crawl`` command's fork server is a fork of the command itself, taken that early (a
process of one thread that has imported almost nothing), where ``multiprocessing`` would
start a new interpreter: its start-up, ``site`` and ``multiprocessing.forkserver`` imports
would delay the preload, and the crawl's first page waits for that preload. Everything after the start is ``multiprocessing``'s own fork server
(``forkserver.main``), reached the way ``ForkServer.ensure_running`` reaches it; that uses
its private fields, so only on the CPython versions whose ``ForkServer`` this mirrors
(3.11-3.13; 3.14 adds an authentication key) and on Linux; anywhere else, or if anything
fails, ``ensure_running`` starts it the usual way.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.spawn
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

PRELOAD = "parsers.preload"


def context(main: bool = True) -> multiprocessing.context.BaseContext:
    """The fork server context with ``parsers.preload`` preloaded (``spawn`` without one).

    The preload list is process-wide and read when the fork server starts: ours is added to
    the list already set (by default ``__main__``, the script, imported once there instead of
    in every worker, for hooks an application defines in it), never replacing an
    application's own. ``main=False`` leaves ``__main__`` out (the ``crawl`` command: its
    workers need nothing of the script). In a process whose fork server was started before
    (by other code), workers still work, and warm up themselves."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver

    fork_context = multiprocessing.get_context("forkserver")
    preload = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    wanted = [m for m in preload if main or m != "__main__"]
    if PRELOAD not in wanted:
        wanted.append(PRELOAD)
    if wanted != preload:
        fork_context.set_forkserver_preload(wanted)
    return fork_context


def prestart(main: bool = True, *, by_fork: bool = False) -> None:
    """Start the fork server now (it preloads the parser and numba in its own process) so
    that it is ready when the pool wants workers. For a caller with other start-up work to
    do first, like the CLI importing the crawler; harmless to skip or to call again.
    ``main``: see ``context``. ``by_fork``: the fork server is a fork of this process (see
    the module's docstring): only for a caller that is a bare process so far, one thread
    and few imports, like the ``crawl`` command at its start."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        context(main)
        try:
            if by_fork and _fork_server_by_fork():
                global _release_after_start
                _release_after_start = sys.platform.startswith("linux")  # see _adopt
                atexit.register(release, adopt=False)  # see there
            else:
                forkserver.ensure_running()
        except OSError as exc:  # the pool tries again, and reports a real failure itself
            log.debug("fork server did not start early: %s", exc)


_release_after_start = False
"""Set by ``prestart(by_fork=True)`` on Linux, where this process can adopt its orphans
(``_adopt``, when ``release`` ends the fork server)."""


def release_after_start() -> bool:
    """Whether a pool should end the fork server once its workers are up (``release``): in
    the ``crawl`` command only, one crawl a process. A process that runs crawl after crawl
    (a service, the tests) keeps it, and each pool's workers start at once."""
    return _release_after_start


def release(adopt: bool = True, wait: bool = True) -> None:
    """End the fork server, if one runs: its memory (the preload, and every page of it that
    the workers have written to since, which copy-on-write left to it alone) is a fifth of
    the crawl's whole footprint. A worker started later (one that died, or overran its
    parse time) gets a new one from ``multiprocessing``, as at the first start: the fields
    are left as ``ForkServer.ensure_running`` leaves a dead one's. The workers it forked
    live on, adopted by this process (``adopt``: ``_adopt``, first; where that fails, the
    fork server is left running); ``crawler.pool.workers.kill`` and ``join`` end and reap
    them by pid, as ``multiprocessing`` no longer can.

    The ``crawl`` command also calls it at its exit, with no adoption (the pool has joined
    its workers; this process ends): a crawl shorter than the preload (one page) does not
    wait for it (``crawler.pool.workers.start_in_daemon_thread``), and the fork server
    would otherwise finish preloading, a core's fraction of a second, for nobody.
    ``wait=False``: not waited for while the kernel frees its memory (milliseconds, for a
    process that has loaded numba): a thread reaps it then."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver
    names = ("_lock", "_forkserver_pid", "_forkserver_alive_fd", "_forkserver_address")
    if not all(hasattr(server, name) for name in names):
        return
    with server._lock:
        pid = server._forkserver_pid
        if pid is None or (adopt and not _adopt()):
            return
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        if wait:
            _reap(pid)
        else:  # no zombie left for a long crawl's ``ps`` to show
            global _reaping
            _reaping = threading.Thread(target=_reap, args=(pid,), daemon=True, name="crawl-reap")
            _reaping.start()
        with contextlib.suppress(OSError, TypeError):
            os.close(server._forkserver_alive_fd)
        server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
        global _released
        _released = True


_reaping: threading.Thread | None = None
"""The thread reaping the fork server last ended without waiting (``release(wait=False)``)."""


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)  # this process's child (forked, or spawned by multiprocessing)


_released = False


def released() -> bool:
    """Whether a fork server of this process was ended (``release``): since then, some
    workers may be adopted ones. Waits while one ended without waiting is still exiting:
    until it is gone its workers are not yet this process's children, and ``multiprocessing``
    already takes them for dead."""
    if _reaping is not None:
        _reaping.join(REAP_WAIT_S)
    return _released


REAP_WAIT_S = 10.0
"""How long ``released`` waits for an ended fork server to be gone (it was SIGKILLed)."""


def _adopt() -> bool:
    """Make this process the parent of its orphaned descendants (Linux's child subreaper):
    the workers, once their fork server has ended, stay this process's children (for the
    process tree a user or a benchmark sees, and for their exit status); ``False`` where
    that cannot be done. Only when the fork server is about to end (``release``): ctypes is
    a few milliseconds of a one-page crawl's start, which never ends it early."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_PR_SET_CHILD_SUBREAPER = 36


_MAIN_NAMES = ("__main__", "__mp_main__")


def main_needed(extract: Callable[..., Any] | None) -> bool:
    """Whether parse workers must import ``__main__``: the ``extract`` hook is defined there
    (it is pickled by reference, so a worker finds it only by importing the script)."""
    return extract is not None and getattr(extract, "__module__", None) in _MAIN_NAMES


def main_importable() -> bool:
    """Whether a worker can import the script running as ``__main__``: a module run with
    ``-m``, or a file (not a script read from standard input or typed in a REPL)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        return True
    path = getattr(main, "__file__", None)
    return bool(path) and os.path.isfile(str(path))


def unguarded_line() -> int | None:
    """The line of the script's top-level code (``__main__``) the current call comes from,
    when that line is not under ``if __name__ == "__main__":``; ``None`` when it is, or when
    the call does not come from a script's top level. A worker that imports such a script
    runs that line again."""
    main = sys.modules.get("__main__")
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals is getattr(main, "__dict__", None)
    ):
        frame = frame.f_back
    path = getattr(main, "__file__", None)
    if frame is None or not path:
        return None
    try:
        with open(path, encoding="utf-8") as source:
            tree = ast.parse(source.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    line = frame.f_lineno
    guarded = any(
        isinstance(node, ast.If)
        and _is_main_test(node.test)
        and node.body[0].lineno <= line <= (node.body[-1].end_lineno or line)
        for node in tree.body
    )
    return None if guarded else line


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    sides = (test.left, test.comparators[0])
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    values = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(values) == 1


_no_main = threading.local()
_preparation_data = multiprocessing.spawn.get_preparation_data


def _preparation_data_without_main(name: str) -> dict[str, Any]:
    data = _preparation_data(name)
    if getattr(_no_main, "active", False):
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
    return data


@contextlib.contextmanager
def without_main() -> Iterator[None]:
    """Processes this thread starts in the block do not import the script running as
    ``__main__`` at their start (``multiprocessing`` has every new process do so, for
    functions defined there: a script without the ``__name__`` guard then runs again in
    each). Other threads' processes are unaffected (the switch is per thread)."""
    multiprocessing.spawn.get_preparation_data = _preparation_data_without_main
    _no_main.active = True
    try:
        yield
    finally:
        _no_main.active = False


_FORKABLE_VERSIONS = ((3, 11), (3, 12), (3, 13))


def _fork_server_by_fork() -> bool:
    """Start the fork server as a fork of this process; ``False`` where it cannot be done
    here (then nothing was started). ``ForkServer.ensure_running`` with ``os.fork`` where
    it spawns an interpreter: the same listener, "alive" pipe and resource tracker."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver  # its private fields, checked below
    if (
        sys.version_info[:2] not in _FORKABLE_VERSIONS
        or not sys.platform.startswith("linux")
        or threading.active_count() != 1
        or not all(
            hasattr(server, name)
            for name in ("_lock", "_preload_modules", "_forkserver_pid", "_forkserver_address")
        )
    ):
        return False
    with server._lock:
        if server._forkserver_pid is not None:
            return False  # started before: ensure_running checks it is alive
        try:
            _fork_server(server)
        except Exception as exc:  # fall back to the usual start
            log.debug("fork server not forked: %s", exc)
            return False
    return True


def _fork_server(server: Any) -> None:
    import socket
    from multiprocessing import connection, forkserver, resource_tracker, util

    if not _tracker_sink() and not _tracker_by_fork():
        resource_tracker.ensure_running()
    preload = list(server._preload_modules)
    for stream in (sys.stdout, sys.stderr):  # nothing written twice by both processes
        stream.flush()
    with socket.socket(socket.AF_UNIX) as listener:
        address = connection.arbitrary_address("AF_UNIX")  # type: ignore[attr-defined]
        listener.bind(address)
        if not util.is_abstract_socket_namespace(address):
            os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()
        try:
            pid = os.fork()
        except BaseException:
            os.close(alive_r)
            os.close(alive_w)
            raise
        if pid == 0:  # the fork server: serves until every user of alive_w is gone
            status = 0
            try:
                os.close(alive_w)
                server._lock.release()  # held by this thread at the fork: a fresh server's is free
                forkserver.main(listener.fileno(), alive_r, preload)
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 0
            except BaseException:
                status = 1
            finally:
                os._exit(status)
        os.close(alive_r)
    server._forkserver_address = address
    server._forkserver_alive_fd = alive_w
    server._forkserver_pid = pid


SINK = "cat"
"""The program that stands in for the resource tracker (``_tracker_sink``)."""


def _tracker_sink() -> bool:
    """Give the fork server, in place of multiprocessing's resource tracker, the write end
    of a pipe that ``cat`` drains to ``/dev/null``; ``False`` where it cannot (then nothing
    was started).

    The tracker unlinks the named semaphores and shared-memory segments a dead process
    registered. The ``crawl`` command's processes make none (the parse rings are memfds,
    freed with their last holder, and the command runs no application code in its
    workers), so a tracker would track nothing, and the forked one (``_tracker_by_fork``)
    costs ~7 MB of PSS for the whole crawl: the pages of the bare process it was forked
    from, which the crawl then writes to, become its own. ``cat`` holds ~0.5 MB, ends once
    every holder of the pipe is gone (as the tracker does) and, with SIGINT and SIGTERM
    blocked, outlives a Ctrl-C as the tracker does, so a late registration never meets a
    closed pipe. For the ``crawl`` command only (``_fork_server``'s caller)."""
    from multiprocessing import resource_tracker

    tracker: Any = resource_tracker._resource_tracker
    spawn = getattr(os, "posix_spawnp", None)
    if spawn is None or not all(hasattr(tracker, name) for name in ("_lock", "_fd", "_pid")):
        return False
    with tracker._lock:
        if tracker._fd is not None:
            return False  # started before: ensure_running checks it is alive
        r, w = os.pipe()
        actions = [
            (os.POSIX_SPAWN_DUP2, r, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        ]
        try:
            pid = spawn(SINK, [SINK], os.environ, file_actions=actions,
                        setsigmask=(signal.SIGINT, signal.SIGTERM))  # fmt: skip
        except OSError as exc:
            log.debug("no %s for the resource tracker: %s", SINK, exc)
            os.close(w)
            return False
        finally:
            os.close(r)
        tracker._fd, tracker._pid = w, pid
    return True


def _tracker_by_fork() -> bool:
    """Start multiprocessing's resource tracker (which the fork server hands to every worker)
    as a fork of this bare process; ``False`` where it cannot be done here (then nothing
    was started, and ``ensure_running`` starts it the usual way).

    ``ResourceTracker.ensure_running`` starts a new interpreter for it: CPU taken at the
    crawl's start, when this process's imports and the fork server's preload
    (which the first pages wait for) already share the two cores. The fork runs the same
    ``resource_tracker.main`` on the read end of a pipe whose write end this process keeps,
    as ``ensure_running`` leaves it: the same private fields (``_fd``, ``_pid``; 3.11-3.13),
    the same signal mask at the start; what the child holds of this process's files at that
    point (stdin, stdout, stderr) is what the spawned tracker held (``main`` closes stdin
    and stdout)."""
    from multiprocessing import resource_tracker

    tracker: Any = resource_tracker._resource_tracker
    if not all(hasattr(tracker, name) for name in ("_lock", "_fd", "_pid")):
        return False
    with tracker._lock:
        if tracker._fd is not None:
            return False  # started before: ensure_running checks it is alive
        blocked = getattr(resource_tracker, "_IGNORED_SIGNALS", ())
        r, w = os.pipe()
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)  # main() unblocks them in the child
        try:
            pid = os.fork()
            if pid == 0:  # the tracker: until every holder of w is gone
                status = 0
                try:
                    os.close(w)
                    resource_tracker.main(r)
                except BaseException:
                    status = 1
                finally:
                    os._exit(status)
        except BaseException:
            os.close(w)
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
            os.close(r)
        tracker._fd, tracker._pid = w, pid
    return True
