"""Starting the background warmer of the search kernels, and knowing whether one runs.
No numba or numpy here: the crawl process imports this and never loads them.

The first ``crawl rank`` after an install (or after numba, the source or the CPU changed)
would compile the index's kernels before its first answer: seconds, against well under one
for the answer itself. ``crawler.relevance.ranking`` asks ``search.kernels_cached``,
answers from a scan of the blobs while they are not (``crawler.relevance.scan``), and
``start_warming`` runs ``crawler.relevance.warmer`` in a detached process that compiles
them at idle priority and brings the database's index up to date; the run after it finds both. A
crawl's end starts one too (``after_crawl``) when it left pages to index, or when the parse
kernels are not compiled ahead of time yet (``parsers.aot``, which the warmer builds). One warmer
at a time per user (``only_warmer``, an ``flock``): two would compile the same code.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

from parsers import aot
from storage.sqlite.read import read_only_uri

log = logging.getLogger(__name__)

NO_WARM_ENV = "CRAWL_NO_BACKGROUND_WARM"
"""Set (to anything) to never start a background warmer: a cold cache then compiles in the
foreground, as before."""


def start_warming(db: str | None) -> bool:
    """Start a detached warmer (``crawler.relevance.warmer``) for ``db``; False when none was
    started (``CRAWL_NO_BACKGROUND_WARM`` is set, or the process could not start)."""
    if os.environ.get(NO_WARM_ENV):
        return False
    argv = [sys.executable, "-m", "crawler.relevance.warmer", *([db] if db else [])]
    try:
        with open(os.devnull, "rb+") as null:
            actions = [(os.POSIX_SPAWN_DUP2, null.fileno(), fd) for fd in (0, 1, 2)]
            pid = os.posix_spawn(sys.executable, argv, dict(os.environ),
                                 file_actions=actions, setsid=True)  # fmt: skip
    except (OSError, AttributeError, NotImplementedError) as exc:  # no posix_spawn here
        log.info("could not start warming the search kernels: %s", exc)
        return False
    # reap it when it ends (a long-lived caller would otherwise keep a zombie)
    threading.Thread(target=_reap, args=(pid,), daemon=True, name="warm-reaper").start()
    return True


def after_crawl(db: str, indexed: bool) -> None:
    """After a crawl wrote ``db``: a background warmer brings its search index up to date
    (``indexed``: a SQLite file this run held alone), so that the next ``crawl rank`` and a
    read-only ``crawl serve`` find it current; and compiles the parse kernels ahead of time
    (``parsers.aot``) when no module is built for them, so that the next crawl's workers
    start without numba. In another process: the crawl process never loads numba or numpy
    (nor compiles, nor builds a large index at its end). Reads the log with the standard
    library only; never raises (the crawl is stored whatever happens here; ``crawl rank``
    catches up anyway)."""
    if (indexed and _pages_to_index(db)) or aot.wanted():
        start_warming(db if indexed else None)


def _pages_to_index(db: str) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(read_only_uri(db), uri=True)) as c:
            waiting = c.execute("SELECT count(*) FROM search_pending").fetchone()[0]
    except sqlite3.Error as exc:  # no index (yet), or busy: the next crawl rank sees to it
        log.debug("%s: search index log not read: %s", db, exc)
        return False
    return bool(waiting)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _lock_path() -> str:
    """In the user's own runtime folder where there is one, not a shared /tmp."""
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(folder, f"crawl-search-warm-{os.getuid()}.lock")


def warming() -> bool:
    """Whether a warmer is running now (for this user)."""
    with only_warmer(patience_s=0.0) as alone:
        return not alone


@contextlib.contextmanager
def only_warmer(patience_s: float = 0.5) -> Iterator[bool]:
    """Yields whether this process holds the warmer's lock (False: another does). Tries for
    ``patience_s``: a ``warming()`` probe holds it for an instant, and a warmer starting
    just then must not take the probe for another warmer and quit."""
    try:
        fd = os.open(_lock_path(), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:  # no writable folder (or a link planted there): no lock to take
        yield True
        return
    try:
        deadline = time.monotonic() + patience_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        yield True
    finally:
        os.close(fd)
