"""The background warmer: ``python -m crawler.relevance.warmer [DB]`` compiles the parse
kernels ahead of time where they are not yet (``parsers.aot``) and every search kernel into
numba's cache, then brings DB's search index up to date (``crawler.relevance.warm``
starts it detached; see there for when), and the index of each database queued for it
meanwhile. It compiles by building and querying the index of a throwaway database: the
very calls, argument types included, that a real one makes (``warm_work``). One warmer at a
time per user (``warm.only_warmer``); a second one queues its database and exits.

Light on purpose (the standard library only): everything else, numba, numpy and the index
with it, is imported at idle priority (``warm_work``), as the compile runs; only the
catch-up, which holds the database's write lock, runs at normal priority
(``_at_idle_priority``).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")


def _work() -> ModuleType:
    from crawler.relevance import warm_work  # all the rest: in the idle thread

    return warm_work


def _at_idle_priority(work: Callable[[], T]) -> T:
    """Run ``work`` in a thread that gets only CPU time nothing else wants (Linux's
    ``SCHED_IDLE``, which is per thread): a crawl started meanwhile, by cron say, keeps its
    speed. The imports and the compile only: the catch-up after them holds the database's write lock, and
    starved at idle priority on a busy machine it would stall the crawl that waits for
    that lock (a priority inversion; an unprivileged thread cannot leave ``SCHED_IDLE``)."""
    failed: list[BaseException] = []
    done: list[T] = []

    def run() -> None:
        idle()
        try:
            done.append(work())
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="warm-compile")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


def idle() -> bool:
    """Put the calling thread on ``SCHED_IDLE``; False where there is none (it then runs at
    normal priority: a process-wide nice would hold the catch-up back too)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        return False
    return True


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python -m crawler.relevance.warmer [DB]", file=sys.stderr)
        return 2
    try:
        _at_idle_priority(_work).warm(argv[0] if argv else None, _at_idle_priority)
    except Exception as exc:  # a background helper: report, never raise a traceback
        print(f"warming the search kernels failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
