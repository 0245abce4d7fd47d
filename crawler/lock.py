"""RunLock: one crawl at a time per database, so overlapping cron runs cannot double-fetch.

Owns: an exclusive ``flock`` on ``<db>.lock``, held for the whole run. The operating system
drops it when the holder dies in any way (``kill -9`` included), so a lock left by a killed
run is never stale: the next run simply takes it. The file records the holder's pid for
the error message. A path no store could open (empty, a folder, in a missing or read-only
folder) is refused first, as the user's input (``ConfigError``), and no lock file is made.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from crawler.errors import ConfigError, DatabaseLocked
from storage.base import StoreRefused
from storage.sqlite.store import check_location

__all__ = ["DatabaseLocked", "RunLock", "crawl_running", "flock_held"]

_LOCKS_MAX = 8 * 1024 * 1024
"""Bytes of ``/proc/locks`` read at most."""


class RunLock:
    """``with RunLock(db_path): ...`` — raises ``DatabaseLocked`` if another run holds it."""

    def __init__(self, db_path: str) -> None:
        self.path = db_path + ".lock"
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        try:
            check_location(self.path[:-5])
        except StoreRefused as exc:
            raise ConfigError(str(exc)) from exc
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return self  # a folder we cannot write: the store will report it clearly
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise DatabaseLocked(
                f"{self.path[:-5]}: in use by another crawl (pid {holder}); try again later"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing releases the flock


def crawl_running(db_path: str) -> bool | None:
    """Whether a crawl holds ``db_path``'s run lock now; None where that cannot be known
    (``flock_held``)."""
    return flock_held(db_path + ".lock")


def flock_held(path: str) -> bool | None:
    """Whether a process holds an ``flock`` on the file at ``path`` now; None where that
    cannot be known (no ``/proc/locks``). Read from the kernel's list of locks, never by
    taking the lock: a probe holding it for an instant would turn away a crawl (or a
    warmer) starting then."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        with open("/proc/locks", "rb") as locks:
            text = locks.read(_LOCKS_MAX)
    except OSError:
        return None
    # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF" (a waiter's line has "->" after the
    # number): the file system's device as the kernel prints it, in hex. Where that is an
    # anonymous device (major 0), stat may give another one (btrfs gives each subvolume its
    # own): the inode decides there.
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}".encode()
    anonymous = os.major(info.st_dev) == 0
    inode = f":{info.st_ino}".encode()
    for line in text.splitlines():
        words = [w for w in line.split() if w != b"->"]
        if len(words) <= 5 or words[1] != b"FLOCK":
            continue
        if words[5] == where or (anonymous and words[5].startswith(b"00:")
                                 and words[5].endswith(inode)):  # fmt: skip
            return True
    return False
