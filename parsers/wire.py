"""The parse pool's request messages: a pickle whose large byte strings travel beside it.

Owns: ``encode`` (the crawl process) and ``decode`` (a parse worker). A batch of pages is
~0.9 MB of bodies: copied into one pickle, that cost the event loop ~33 us a page (a fresh
buffer of that size, grown and copied as it fills). Pickle protocol 5 hands such buffers out
instead (``ParseJob`` offers its body as a ``pickle.PickleBuffer``): the message is a short
header, the pickle of everything else, then each buffer as it is, written to the pipe
without a copy (the transport's ``writelines``). The worker slices them out of the message.

Layout (little-endian): ``u32`` buffer count ``n``, ``u64`` pickle size, ``n`` x ``u64``
buffer sizes, the pickle, the buffers.
"""

from __future__ import annotations

import pickle
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parsers.ring import Ring

_COUNT = struct.Struct("<I")


def encode(obj: Any) -> list[bytes | memoryview]:
    """The parts of ``obj``'s message, in order (their concatenation is the message).

    Only buffers of ``bytes`` travel beside the pickle: what this package offers so
    (``ParseJob``'s body, ``Page``'s text and tokens) is copied out when unpickled. Any
    other buffer (a numpy array's, a ``bytearray``'s) stays in the pickle: what rebuilds
    it may keep a view of the message, whose space is reused once it is read."""
    views: list[memoryview] = []

    def aside(buffer: pickle.PickleBuffer) -> bool:
        view = buffer.raw()
        if type(view.obj) is bytes:
            views.append(view)
            return False  # out of band
        view.release()
        return True  # in band

    payload = pickle.dumps(obj, protocol=5, buffer_callback=aside)
    sizes = struct.pack(f"<{len(views) + 1}Q", len(payload), *(view.nbytes for view in views))
    return [_COUNT.pack(len(views)), sizes, payload, *views]


def decode(message: bytes | memoryview) -> Any:
    """The object ``encode`` made ``message`` of; its buffers arrive as read-only
    ``memoryview`` slices of ``message`` (``ParseJob`` copies its body out)."""
    view = memoryview(message)
    (count,) = _COUNT.unpack_from(view)
    sizes = struct.unpack_from(f"<{count + 1}Q", view, _COUNT.size)
    offset = _COUNT.size + 8 * (count + 1)
    end = offset + sizes[0]
    payload = view[offset:end]
    buffers = []
    for size in sizes[1:]:
        buffers.append(view[end : end + size].toreadonly())
        end += size
    if end != len(view):
        raise ValueError(f"parse request of {len(view)} bytes holds {end}")
    return pickle.loads(payload, buffers=buffers)


# -- a message's trip: in a ring (parsers.ring), or inline through the pipe -----------------

INLINE = b"I"
"""The message follows, as ``encode`` made it."""
IN_RING = b"R"
"""The message is in the ring of this direction; a notice (``Ring.put``) follows."""


FRAME = struct.Struct("!i")
LONG_FRAME = struct.Struct("!Q")
"""A pipe message's header, as ``Connection.send_bytes`` writes it (what ``recv_bytes`` and
the pool's reply reader read): the size, or -1 and then the size in 8 bytes past 2 GiB."""


def frame(parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
    """The message made of ``parts``, framed: its header first."""
    size = size_of(parts)
    if size > 0x7FFFFFFF:
        return [FRAME.pack(-1), LONG_FRAME.pack(size), *parts]
    return [FRAME.pack(size), *parts]


def size_of(parts: list[bytes | memoryview]) -> int:
    return sum(part.nbytes if isinstance(part, memoryview) else len(part) for part in parts)


def place(parts: list[bytes | memoryview], ring: Ring | None) -> list[bytes | memoryview]:
    """What to send through the pipe for the message made of ``parts``: where it is in
    ``ring``, or (no ring, or no room in it now) the message itself."""
    if ring is not None:
        notice = ring.put(parts, size_of(parts))
        if notice is not None:
            return [IN_RING + notice]
    return [INLINE, *parts]


def receive(message: bytes | memoryview, ring: Ring | None) -> Any:
    """The object of a message ``place`` sent; a message in the ring is decoded there and its
    space given back. Every message of a ring must be received, in order."""
    view = memoryview(message)
    kind = view[:1]
    if kind == INLINE:
        return decode(view[1:])
    if kind != IN_RING or ring is None:
        raise ValueError(f"unknown parse message kind {bytes(kind)!r}")
    start, size = ring.notice_of(view[1:])
    body = ring.get(start, size)
    try:
        return decode(body)
    finally:
        ring.release(start, size)
