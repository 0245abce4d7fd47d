"""The ``crawl`` console script: starts the parse workers' fork server first, then the CLI.

A crawl's first page waits for the fork server's preload (numba, lexbor). Started here,
before click and the commands are imported, it is ready sooner than when the command itself
starts it (``crawler.cli.crawl`` still does, for other callers).
Commands that never parse (``export``, ``rank``, ``runs``, ``stats``, ``--help``,
``--version``) start nothing; a crawl that stops on a usage error leaves a fork server that
exits once its preload is done.

A crawl ends with ``os._exit`` once everything is written, closed and flushed (``exit_now``):
the interpreter's teardown (freeing every object one by one) does nothing a finished crawl
needs. Other commands exit normally.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading
from typing import NoReturn

from crawler.cli.tuning import BLAS_THREADS, GC_THRESHOLD

_OTHER_COMMANDS = frozenset({"export", "rank", "runs", "serve", "stats"})
_NO_RUN = frozenset({"-h", "--help", "--version"})


def crawls(args: list[str]) -> bool:
    """Whether ``crawl ARGS`` is a crawl (the default command), judged from the words alone:
    a wrong guess only starts the fork server for nothing, or later."""
    return bool(args) and args[0] not in _OTHER_COMMANDS and _NO_RUN.isdisjoint(args)


def main() -> None:
    gc.set_threshold(*GC_THRESHOLD)
    os.environ.setdefault(*BLAS_THREADS)
    crawl = crawls(sys.argv[1:])
    if crawl:
        # The console script is nothing the workers need: importing it in the fork server
        # (the crawler package with it) would only delay the preload the first page waits
        # for. This process is still bare: the fork server can be a fork of it.
        from crawler.pool.forkserver import prestart  # multiprocessing: only for a crawl

        prestart(main=False, by_fork=True)
    # click and the commands: only now, so that the fork server above starts first.
    from crawler.cli import main as cli

    if not crawl:
        cli()
        return
    try:
        cli()  # click (standalone mode) ends every command with SystemExit
    except SystemExit as exc:
        exit_now(exc.code)


def exit_now(code: str | int | None) -> NoReturn:
    """Exit as ``sys.exit(code)`` would, without the interpreter's teardown: wait for the
    threads a normal exit waits for, run the ``atexit`` handlers (logging's flush,
    multiprocessing's clean-up of the pool's fork server), flush stdout and stderr, then
    ``os._exit``. The crawl's store, pool and lock are closed before the command returns.

    Under a profiler, a tracer (coverage) or a debugger the exit is the normal one: they
    write their results after the program (``python -m cProfile -o ...``)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): printed, exit status 1
        print(code, file=sys.stderr)
        status = 1
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # CPython's own exit path runs the same function
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe (crawl ... | head): nothing left to save
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)
