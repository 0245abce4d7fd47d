"""The background warmer: ``python -m crawler.relevance.warmer [DB]`` compiles the parse
kernels ahead of time where they are not yet (``parsers.aot``) and every search kernel into
numba's cache, then brings DB's search index up to date (``crawler.relevance.warm``
starts it detached; see there for when). It compiles by building and querying the
index of a throwaway database: the very calls, argument types included, that a real one
makes. One warmer at a time per user (``warm.only_warmer``); a second one exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable

import numpy as np

from crawler.relevance.search import SearchIndex, kernels_cached
from crawler.relevance.warm import only_warmer
from parsers import aot, aot_build
from parsers.kernel_cache import quick_cache_loads
from parsers.tokens import TokenCounts, encode_counts, query_ids
from storage.sqlite.store import SQLiteStore


def compile_kernels() -> None:
    """Compile (or load) every search kernel: build and query the index of a throwaway
    crawl database of three pages."""

    with tempfile.TemporaryDirectory(prefix="crawl-warm-") as folder:
        path = os.path.join(folder, "warm.db")

        async def schema() -> None:
            store = SQLiteStore(path)
            await store.open()
            await store.close()

        asyncio.run(schema())
        words = query_ids("warm up the search kernels")
        rows = []
        for n, top in enumerate((3, 300, 70_000)):  # counts of 1, 2 and 4 bytes
            ids = np.array(sorted(set(words)), dtype=np.uint32)
            counts = np.full(ids.size, top, dtype=np.uint32)
            blob = encode_counts(TokenCounts(ids, counts, int(counts.sum())))
            rows.append((f"http://warm.invalid/{n}", blob))
        with contextlib.closing(sqlite3.connect(path)) as connection, connection:
            connection.executemany(
                "INSERT INTO pages (url, final_url, depth, fetched_at, tokens)"
                " VALUES (?, ?, 0, '2026-01-01', ?)", [(u, u, b) for u, b in rows])  # fmt: skip
        index = SearchIndex(path)
        try:
            index.rank(words, 2)
        finally:
            index.close()


def warm(db: str | None) -> bool:
    """Compile the kernels (at idle priority), then bring ``db``'s index up to date (at
    normal priority); False if another warmer holds the lock (it does the same)."""
    with only_warmer() as alone:
        if not alone:
            return False
        if aot.wanted():
            _at_idle_priority(aot_build.ensure_built)
        with quick_cache_loads():
            if not kernels_cached():
                _at_idle_priority(compile_kernels)
            if db:
                with contextlib.suppress(LookupError):
                    SearchIndex(db).close()
        return True


def _at_idle_priority(work: Callable[[], object]) -> None:
    """Run ``work`` in a thread that gets only CPU time nothing else wants (Linux's
    ``SCHED_IDLE``, which is per thread): a crawl started meanwhile, by cron say, keeps its
    speed. Only the compile: the catch-up after it holds the database's write lock, and
    starved at idle priority on a busy machine it would stall the crawl that waits for
    that lock (a priority inversion; an unprivileged thread cannot leave ``SCHED_IDLE``)."""
    failed: list[BaseException] = []

    def run() -> None:
        idle()
        try:
            work()
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="warm-compile")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


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
        warm(argv[0] if argv else None)
    except Exception as exc:  # a background helper: report, never raise a traceback
        print(f"warming the search kernels failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
