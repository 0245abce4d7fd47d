"""Byte rings in shared memory: the parse pool's large messages without the pipes' copies.

Owns: one direction of a worker's traffic (page bodies to it, parsed pages back) as a ring of
bytes in a ``memfd`` both processes map. The writer copies a message in and sends, over the
pipe as before, only where it is (``start``, ``size``); the reader decodes it in place and
then gives the space back. Through a pipe each byte was copied twice by the kernel (into the
pipe, out of it) and, on the reply side, once more by the pickler: a 10,000-page crawl moves
~600 MB so, and on a 2-core machine every copy also slows the parse on the other core (it
competes for the caches and the memory bus). bench/RESULTS.md, session 22.

Invariants:
- one writer and one reader, each in its own process; messages are read in the order they
  were written, and each is given back (``release``) once read, before the next one is;
- the writer keeps its position (``head``, a running count of bytes); the reader's position
  (``tail``, the end of the last message given back) lives in the ring's first 8 bytes, an
  aligned word the reader stores and the writer loads (one machine store and load). The
  writer only ever sees an old tail (less room than there is), never a tail past what was
  read; the pipe's write and read order the message's bytes before its notice;
- a message never wraps: one that would is written at the start instead (the bytes skipped
  are given back with it); one that does not fit now (``put`` returns ``None``) goes through
  the pipe as before, so a slow reader never blocks the writer;
- once everything written was read, the next message goes at the start again: a ring only
  touches as much memory as the most it ever held unread.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import weakref
from collections.abc import Sequence
from multiprocessing import reduction

HEADER_BYTES = 64
"""The tail word, then padding to a cache line of its own."""
_NOTICE = struct.Struct("<QQ")


def available() -> bool:
    """Whether rings can be made here (Linux: ``memfd_create``)."""
    return hasattr(os, "memfd_create")


class Ring:
    """One side's view of a ring: ``put`` (the writer) or ``get`` and ``release`` (the reader)."""

    def __init__(self, fd: int, size: int) -> None:
        if size <= HEADER_BYTES:
            raise ValueError(f"ring of {size} bytes: needs more than {HEADER_BYTES}")
        self.fd = fd
        self.size = size
        self.capacity = size - HEADER_BYTES
        self._map = mmap.mmap(fd, size)
        self._closing = weakref.finalize(self, _close_fd, fd)
        """Closes the descriptor once: at ``close``, or when the ring is collected unclosed
        (a worker start the pool gave up on while its thread made the rings)."""
        view = memoryview(self._map)
        self._tail = view[:8].cast("Q")
        self._data = view[HEADER_BYTES:]
        view.release()
        self._head = 0
        self._free_below = 0
        """The writer's: everything before it is free (given back, or skipped when the ring
        was empty), whatever older tail the reader's word still shows."""

    @classmethod
    def create(cls, size: int) -> Ring:
        """A new ring of ``size`` bytes (its pages are only touched as it fills)."""
        fd = os.memfd_create("crawl-parse-ring", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            return cls(fd, size)
        except BaseException:
            os.close(fd)
            raise

    def shared(self) -> SharedRing:
        """What to hand to the other process (a ``Process`` argument)."""
        return SharedRing(self.fd, self.size)

    # -- the writer ------------------------------------------------------------------------
    def put(self, parts: Sequence[bytes | memoryview], size: int) -> bytes | None:
        """Copy in the message made of ``parts`` (``size`` bytes in all); the notice to send
        the reader (``notice_of`` reads it), or ``None`` where it does not fit now."""
        capacity = self.capacity
        if size > capacity:
            return None
        head = self._head
        tail = max(self._tail[0], self._free_below)
        offset = head % capacity
        if offset and tail == head:
            # Everything was read: start again at the beginning, so that a reader that
            # keeps up has the ring touch only its first pages (in the crawl's memory, and
            # warm in the caches), not all of them in turn.
            head = tail = self._free_below = head + capacity - offset
            offset = 0
        elif offset + size > capacity:  # it would wrap: at the start instead
            head += capacity - offset
            offset = 0
        if head + size - tail > capacity:
            return None  # the reader has not given back enough yet
        data = self._data
        for part in parts:
            end = offset + (part.nbytes if isinstance(part, memoryview) else len(part))
            data[offset:end] = part
            offset = end
        self._head = head + size
        return _NOTICE.pack(head, size)

    # -- the reader ------------------------------------------------------------------------
    @staticmethod
    def notice_of(notice: bytes | memoryview) -> tuple[int, int]:
        """(start, size) of the message a notice tells of."""
        start, size = _NOTICE.unpack(notice)
        return start, size

    def get(self, start: int, size: int) -> memoryview:
        """The message at ``start`` (a view into the ring: read it, then ``release``)."""
        offset = start % self.capacity
        if size > self.capacity or offset + size > self.capacity or start < self._tail[0]:
            raise ValueError(f"no message of {size} bytes at {start} in this ring")
        return self._data[offset : offset + size]

    def release(self, start: int, size: int) -> None:
        """The message at ``start`` is read: its space (and any skipped before it) is free."""
        self._tail[0] = start + size

    def close(self) -> None:
        """Unmap and close; again: nothing (a message view still held elsewhere keeps the
        mapping alive until it goes)."""
        if self.fd < 0:
            return
        self.fd = -1
        for view in (self._tail, self._data):
            view.release()
        with contextlib.suppress(BufferError):
            self._map.close()
        self._closing()


NOTICE_BYTES = _NOTICE.size


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class SharedRing:
    """A ring's file descriptor and size, as a ``Process`` argument: pickled while the process
    starts, the descriptor travels as ``multiprocessing`` sends a pipe's (the fork server
    passes it over its socket); ``open`` in the child maps it."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return _rebuild, (reduction.DupFd(self.fd), self.size)

    def open(self) -> Ring:
        return Ring(self.fd, self.size)


def _rebuild(dup: object, size: int) -> SharedRing:
    return SharedRing(dup.detach(), size)  # type: ignore[attr-defined]
