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
at a time per user (``only_warmer``, an ``flock``): two would compile the same code. A
crawl that ends while one runs starts none: it leaves its database in the queue
(``enqueue``) that the running warmer reads before it ends (``queued``), so that crawls
run back to back (a script's loop, cron every minute) keep one warmer at a time, not one
each, importing numba for nothing.
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

from crawler.lock import flock_held
from parsers import aot
from storage.sqlite.read import read_only_uri

log = logging.getLogger(__name__)

NO_WARM_ENV = "CRAWL_NO_BACKGROUND_WARM"
"""Set (to anything) to never start a background warmer: a cold cache then compiles in the
foreground, as before."""


LOCK_FD_ENV = "CRAWL_WARM_LOCK_FD"
"""Set by ``start_warming`` in the warmer it starts: the descriptor of the lock it holds."""

_QUEUE_MAX = 64 * 1024
"""Bytes at most in the queue; past it a crawl's database waits for its next reader."""


def start_warming(db: str | None) -> bool:
    """Start a detached warmer (``crawler.relevance.warmer``) for ``db``, unless one runs
    (then ``db`` is queued for it); whether a warmer runs now. False: none does
    (``CRAWL_NO_BACKGROUND_WARM`` is set, or none could start). The lock is taken here and
    handed to the warmer, so that two crawls ending close together start one."""
    if os.environ.get(NO_WARM_ENV):
        return False
    lock = _take_lock()
    if lock is None:  # one runs: it reads the queue before it ends
        if db is not None:
            enqueue(db)
            lock = _take_lock()  # ended meanwhile, before it saw the queue: start one
        if lock is None:
            return True
    child_fd = 3
    try:
        # above the descriptors the spawn writes (0-2 if this process had one closed, 3)
        lock, old = fcntl.fcntl(lock, fcntl.F_DUPFD_CLOEXEC, 10), lock
        os.close(old)
        with open(os.devnull, "rb+") as null:
            actions = [(os.POSIX_SPAWN_DUP2, null.fileno(), fd) for fd in (0, 1, 2)]
            actions.append((os.POSIX_SPAWN_DUP2, lock, child_fd))
            env = {**os.environ, LOCK_FD_ENV: str(child_fd)}
            argv = [sys.executable, "-m", "crawler.relevance.warmer", *([db] if db else [])]
            pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions,
                                 setsid=True)  # fmt: skip
    except (OSError, AttributeError, NotImplementedError) as exc:  # no posix_spawn here
        log.info("could not start warming the search kernels: %s", exc)
        return False
    finally:
        os.close(lock)  # the warmer holds it now (or nobody does)
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
    try:
        if (indexed and _pages_to_index(db)) or aot.wanted():
            start_warming(db if indexed else None)
    except Exception as exc:  # a bug here must not fail a crawl that is stored
        log.warning("the background warmer was not started: %s", exc)


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


def _lock_path(suffix: str = "lock") -> str:
    """In the user's own runtime folder where there is one, not a shared /tmp."""
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(folder, f"crawl-search-warm-{os.getuid()}.{suffix}")


def _take_lock() -> int | None:
    """The warmer's lock, taken (its descriptor), or None: another process holds it. Where
    no lock can be made (no writable folder) a descriptor of nothing: no lock to take."""
    try:
        fd = os.open(_lock_path(), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def enqueue(db: str) -> None:
    """Leave ``db`` (a SQLite file) for the running warmer (``queued``): one ``O_APPEND``
    write of one line, under the queue file's ``flock`` and into the file still at its
    path (not one a reader has taken meanwhile). Never raises: a line not written leaves
    ``db`` to its next reader."""
    line = os.path.abspath(db).encode("utf-8", "surrogateescape") + b"\n"
    if b"\n" in line[:-1]:
        return  # a name with a newline in it
    path = _lock_path("queue")
    # A reader may take the file between this open and the lock, and again at each try: a
    # warmer takes it once a pass, but readers in a tight loop (the tests') beat eight tries.
    for _ in range(64):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            found = os.fstat(fd)
            try:
                here = os.stat(path, follow_symlinks=False)
            except OSError:
                continue  # taken by a reader between the open and the lock
            if (found.st_ino, found.st_dev) != (here.st_ino, here.st_dev):
                continue
            if found.st_uid == os.getuid() and found.st_size + len(line) <= _QUEUE_MAX:
                os.write(fd, line)  # not into a file another user made (a shared /tmp)
            return
        except OSError:  # a full disk, say
            return
        finally:
            os.close(fd)


def queued() -> list[str]:
    """The databases queued for warmers (``enqueue``), each once, and the queue emptied;
    only for the holder of the lock. A queue file another user made is ignored."""
    path = _lock_path("queue")
    taken = path + ".taken"
    try:
        os.rename(path, taken)
    except OSError:  # none queued
        return []
    try:
        fd = os.open(taken, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a writer that opened it before the rename is done
        if os.fstat(fd).st_uid != os.getuid():
            return []
        data = os.read(fd, _QUEUE_MAX + 1)[:_QUEUE_MAX]
    except OSError:
        return []
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(taken)
    names = data[: data.rfind(b"\n") + 1].decode("utf-8", "surrogateescape").splitlines()
    return list(dict.fromkeys(n for n in names if n and os.path.isabs(n)))


def queue_waiting() -> bool:
    """Whether a database waits in the queue (``enqueue``)."""
    return os.path.exists(_lock_path("queue"))


def warming() -> bool:
    """Whether a warmer is running now (for this user): from the kernel's list of locks,
    where there is one, as a probe that took the lock could make a crawl ending then
    take it for a warmer's."""
    held = flock_held(_lock_path())
    if held is not None:
        return held
    with only_warmer(patience_s=0.0) as alone:
        return not alone


@contextlib.contextmanager
def only_warmer(patience_s: float = 0.5) -> Iterator[bool]:
    """Yields whether this process holds the warmer's lock (False: another does). Tries for
    ``patience_s``: a ``warming()`` probe holds it for an instant, and a warmer starting
    just then must not take the probe for another warmer and quit. A warmer started by
    ``start_warming`` holds it from its start (``LOCK_FD_ENV``)."""
    handed = os.environ.pop(LOCK_FD_ENV, None)
    if handed is not None and handed.isdigit():
        try:
            fcntl.flock(int(handed), fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours: it holds already
        except OSError:
            pass
        else:
            os.set_inheritable(int(handed), False)  # nothing this starts holds it after
            try:
                yield True
            finally:
                os.close(int(handed))
            return
    deadline = time.monotonic() + patience_s
    while (fd := _take_lock()) is None:
        if time.monotonic() >= deadline:
            yield False
            return
        time.sleep(0.05)
    try:
        yield True
    finally:
        os.close(fd)
