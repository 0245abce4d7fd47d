"""Whether numba's cache holds the search kernels, and filling it in the background.

The first ``crawl rank`` after an install (or after numba, the source or the CPU changed)
would compile the index's kernels before its first answer: seconds, against well under one
for the answer itself. ``crawler.relevance.ranking`` asks ``kernels_cached`` (it reads
numba's cache index files, about 10 ms; nothing compiles), answers from a scan of the blobs
while they are not (``crawler.relevance.scan``), and ``start_warming`` runs this module in
a detached, niced process: it compiles every search kernel by building and querying the
index of a throwaway database (the very calls, argument types included, that a real one
makes), then brings the given database's index up to date. The run after it finds both.

``python -m crawler.relevance.warm [DB]`` does the same in the foreground. One warmer at a
time per user (an ``flock``; a second one exits at once): two would compile the same code.

Reading numba's cache index is private numba API, so defensive: where its names are
missing (another numba version), the kernels count as cached and compile in the foreground,
as numba would anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

NO_WARM_ENV = "CRAWL_NO_BACKGROUND_WARM"
"""Set (to anything) to never start a background warmer: a cold cache then compiles in the
foreground, as before."""


def _kernels() -> list[Any]:
    from crawler.relevance import search
    from parsers import postings

    return [postings._unpack, postings._sizes, postings._write, postings.decode, search._score]


def kernels_cached() -> bool:
    """Whether numba's cache holds machine code of every search kernel, for this CPU and
    this source."""
    try:
        from numba.core.registry import cpu_target

        magic = cpu_target.target_context.codegen().magic_tuple()
        for kernel in _kernels():
            code = hashlib.sha256(kernel.py_func.__code__.co_code).hexdigest()
            index = kernel._cache._cache_file._load_index()
            if not any(key[1] == magic and key[2][0] == code for key in index):
                return False
    except Exception:  # numba's internals changed: let numba decide, as it always did
        log.debug("cannot read numba's cache index; assuming the kernels are cached",
                  exc_info=True)  # fmt: skip
        return True
    return True


def start_warming(db: str | None) -> bool:
    """Start a detached, niced warmer (this module) for ``db``; False when none was
    started (``CRAWL_NO_BACKGROUND_WARM`` is set, or the process could not start)."""
    if os.environ.get(NO_WARM_ENV):
        return False
    argv = [sys.executable, "-m", "crawler.relevance.warm", *([db] if db else [])]
    try:
        with open(os.devnull, "rb+") as null:
            actions = [(os.POSIX_SPAWN_DUP2, null.fileno(), fd) for fd in (0, 1, 2)]
            pid = os.posix_spawn(sys.executable, argv, dict(os.environ),
                                 file_actions=actions, setsid=True)  # fmt: skip
    except OSError as exc:
        log.info("could not start warming the search kernels: %s", exc)
        return False
    # reap it when it ends (a long-lived caller would otherwise keep a zombie)
    threading.Thread(target=_reap, args=(pid,), daemon=True, name="warm-reaper").start()
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _lock_path() -> str:
    return os.path.join(tempfile.gettempdir(), f"crawl-search-warm-{os.getuid()}.lock")


def warming() -> bool:
    """Whether a warmer is running now (for this user)."""
    with _only_warmer() as alone:
        return not alone


@contextlib.contextmanager
def _only_warmer() -> Iterator[bool]:
    try:
        fd = os.open(_lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # no writable temporary folder: no lock to take
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def compile_kernels() -> None:
    """Compile (or load) every search kernel: build and query the index of a throwaway
    crawl database of three pages."""
    import numpy as np

    from crawler.relevance.search import SearchIndex
    from parsers.tokens import TokenCounts, encode_counts, query_ids
    from storage.sqlite.store import SQLiteStore

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
    """Compile the kernels, then bring ``db``'s index up to date; False if another warmer
    holds the lock (it does the same)."""
    with _only_warmer() as alone:
        if not alone:
            return False
        from parsers.kernel_cache import quick_cache_loads

        with quick_cache_loads():
            compile_kernels()
            if db:
                from crawler.relevance.search import SearchIndex

                with contextlib.suppress(LookupError):
                    SearchIndex(db).close()
        return True


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python -m crawler.relevance.warm [DB]", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError):
        os.nice(10)  # below the crawls and queries it is there to help
    try:
        warm(argv[0] if argv else None)
    except Exception as exc:  # a background helper: report, never raise a traceback
        print(f"warming the search kernels failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
