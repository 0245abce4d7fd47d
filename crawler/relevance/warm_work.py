"""What the background warmer (``crawler.relevance.warmer``) does, with numba, numpy and
the index: compile the kernels that are not compiled yet (``compile_missing``) and bring
databases' search indexes up to date (``catch_up``), one warmer at a time (``warm``).
Imported by the warmer at idle priority, so that these imports, the warmer's largest cost
when nothing is left to compile, never slow a crawl that runs meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from crawler.lock import crawl_running
from crawler.relevance.search import SearchIndex, kernels_cached
from crawler.relevance.warm import enqueue, only_warmer, queue_waiting, queued
from parsers import aot, aot_build
from parsers.kernel_cache import quick_cache_loads
from parsers.tokens import TokenCounts, encode_counts, query_ids
from storage.base import StoreError
from storage.sqlite.search import SQLiteIndexTables
from storage.sqlite.store import SQLiteStore


def warm(db: str | None, at_idle: Callable[[Callable[[], Any]], Any]) -> bool:
    """Compile the kernels (``at_idle``: at idle priority), then bring ``db``'s index up to
    date (in this thread, at normal priority), and the index of every database queued
    meanwhile (``warm.enqueue``); False if another warmer holds the lock (``db`` is queued
    for it)."""
    with only_warmer() as alone:
        if not alone:
            if db:
                enqueue(db)
            return False
        at_idle(lambda: compile_missing(load=bool(db) or queue_waiting()))
        if db:
            catch_up(db, False, at_idle)  # a failure here leaves the queue to the next warmer
        for name in queued():
            catch_up(name, True, at_idle)
    # a crawl that queued its database after the last look, while the lock was held, started
    # no warmer: once released, look again
    while queue_waiting():
        with only_warmer(patience_s=0.0) as alone:
            if not alone:  # a new warmer took over the queue
                break
            names = queued()
            for name in names:
                catch_up(name, True, at_idle)
        if not names:  # a queue it cannot take (its folder is read-only now): leave it
            break
    return True


def compile_missing(load: bool = False) -> None:
    """The parse kernels' ahead-of-time module where it is missing (``parsers.aot``), then
    every search kernel into numba's cache where it is not there. ``load``: load the cached
    ones into this process too (a catch-up follows: loaded here, at idle priority, they are
    not loaded in the catch-up's thread, at normal priority, where that was nearly all of a
    small catch-up's CPU)."""
    if aot.wanted():
        aot_build.ensure_built()
    with quick_cache_loads():
        if load or not kernels_cached():
            compile_kernels()


def compile_kernels() -> None:
    """Compile (or load from numba's cache) every search kernel: build and query the index
    of a throwaway crawl database of three pages."""

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


def catch_up(db: str, queued: bool, at_idle: Callable[[Callable[[], Any]], Any]) -> None:
    """Bring ``db``'s search index up to date: its reads and build ``at_idle``, on a read
    snapshot, holding no lock; its writes in this thread. Where a crawl wrote meanwhile,
    the catch-up runs again in one write transaction, unless a crawl is running on ``db``:
    that one's end indexes it (and nothing it writes waits for this). A queued database
    that is gone, or is not a crawl's, is left, with a word on stderr."""
    if crawl_running(db):
        return
    try:
        tables = SQLiteIndexTables(db)
    except StoreError as exc:
        if not queued:
            raise
        print(f"{db}: search index not brought up to date: {exc}", file=sys.stderr)
        return
    try:
        if not (tables.writable and tables.has_index() and tables.pending_count()):
            return  # read-only, a schema before the index (rank scans), or current
        with quick_cache_loads():  # cached kernels, without numba's compiler set-up
            if tables.catch_up_on_snapshot(at_idle) is None and not crawl_running(db):
                tables.catch_up()
    except (StoreError, sqlite3.Error) as exc:  # StoreError: a token blob that is not one
        if not queued:
            raise
        print(f"{db}: search index not brought up to date: {exc}", file=sys.stderr)
    finally:
        tables.close()
