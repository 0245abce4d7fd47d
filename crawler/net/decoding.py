"""Content-Encoding decoding with a hard cap on the decompressed size. Pure: bytes in, bytes out.

Owns: undoing ``Content-Encoding`` (gzip, x-gzip, deflate, br, zstd, stacked in any order,
e.g. ``gzip, gzip``, at most ``MAX_CODINGS`` of them). The fetcher feeds the body as received
here.

Invariants:
- the decoded output never exceeds ``max_bytes``: ``BodyTooLarge`` is raised first (or,
  for a ``cut`` decoder, the output ends there), and
  each decoder is driven with a bounded output size, so memory stays flat on a
  decompression bomb (no step ever holds more than ``max_bytes`` + one bounded step);
- a stream that ends before its compressed data does raises ``BadEncoding`` (a truncated
  body is never returned as complete);
- an encoding we cannot decode raises ``BadEncoding`` naming it, and so does a header that
  stacks more than ``MAX_CODINGS`` codings: each is a full decode of the body, and a 64 KiB
  header could otherwise list thousands.
"""

from __future__ import annotations

import importlib.util
import zlib
from typing import Protocol

from crawler.errors import BadEncoding, BodyTooLarge

MAX_CODINGS = 5
"""Codings one response may stack (curl's limit; browsers know no use for more)."""
_STEP_BYTES = 64 * 1024  # most output one decoder step may produce
_ZLIB_INPUT_PIECE = 4096
"""Input zlib is given at a time: what it leaves over (``unused_data`` after each gzip
member, ``unconsumed_tail`` at the output bound) is a copy of the rest of its input, so a
body of 20-byte empty members fed whole would be copied once per member (quadratic)."""
_ZSTD_INPUT_STEP = (
    32  # zstd output per input byte is unbounded (RLE blocks of 128 KiB): feed slowly
)


def _check(out: bytearray, limit: int) -> None:
    if len(out) > limit:  # ``limit`` is what is left of the cap: the message names no figure
        raise _Over(out)


class _Over(BodyTooLarge):
    """A decoder's output went over what is left of the cap; ``partial``: that output (one
    bounded step over; not copied), which a cutting ``BodyDecoder`` keeps up to the cap."""

    def __init__(self, partial: bytearray) -> None:
        super().__init__(None, decoded=True)
        self.partial = partial


class _Decoder(Protocol):
    def feed(self, data: bytes, limit: int) -> bytes: ...

    def finish(self) -> bytes: ...


class _Zlib:
    """gzip (wbits 16+15, concatenated members too) or deflate (zlib-wrapped or raw)."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._d = zlib.decompressobj(31 if gzip else 15)
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        if not self._started and data and not self._gzip and (data[0] & 0x0F) != 8:
            self._d = zlib.decompressobj(-15)  # raw deflate, as some servers send
        self._started = self._started or bool(data)
        out = bytearray()
        view = memoryview(data)
        for start in range(0, len(view), _ZLIB_INPUT_PIECE):
            piece: bytes | memoryview = view[start : start + _ZLIB_INPUT_PIECE]
            while piece:
                if self._d.eof:
                    if not self._gzip:
                        return bytes(out)  # bytes after a deflate stream are ignored
                    self._d = zlib.decompressobj(31)  # another gzip member follows
                try:
                    out += self._d.decompress(piece, min(_STEP_BYTES, limit + 1 - len(out)))
                except zlib.error as exc:
                    kind = "gzip" if self._gzip else "deflate"
                    raise BadEncoding(f"corrupt {kind} data: {exc}") from exc
                _check(out, limit)
                piece = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
        return bytes(out)

    def finish(self) -> bytes:
        if self._started and not self._d.eof:
            raise BadEncoding("compressed body ends before its end marker (truncated)")
        return b""


class _Brotli:
    def __init__(self) -> None:
        try:
            import brotli  # here: off the import path of the commands that never fetch
        except ImportError as exc:  # pragma: no cover - brotli is a dependency
            raise BadEncoding("br encoding: the brotli module is not installed") from exc
        self._d = brotli.Decompressor()
        self._error = brotli.error

    def feed(self, data: bytes, limit: int) -> bytes:
        out = bytearray()
        try:
            out += self._d.process(data, output_buffer_limit=min(_STEP_BYTES, limit + 1))
            # Drained until it has nothing more for now (``can_accept_more_data`` is no
            # test: it knows only ``decompress(max_length)``, not ``process``'s limit).
            while len(out) <= limit and not self._d.is_finished():
                more = self._d.process(
                    b"", output_buffer_limit=min(_STEP_BYTES, limit + 1 - len(out))
                )
                if not more:
                    break
                out += more
        except self._error as exc:
            raise BadEncoding(f"corrupt br data: {exc}") from exc
        _check(out, limit)
        return bytes(out)

    def finish(self) -> bytes:
        if not self._d.is_finished():
            raise BadEncoding("br body ends before its end marker (truncated)")
        return b""


class _Zstd:
    def __init__(self) -> None:
        try:
            import zstandard  # here: a slow import, off the path of the commands that never fetch
        except ImportError as exc:  # pragma: no cover - zstandard is a dependency
            raise BadEncoding("zstd encoding: the zstandard module is not installed") from exc
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self._error = zstandard.ZstdError
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        self._started = self._started or bool(data)
        out = bytearray()
        view = memoryview(data)
        try:
            for start in range(0, len(view), _ZSTD_INPUT_STEP):
                out += self._d.decompress(view[start : start + _ZSTD_INPUT_STEP].tobytes())
                _check(out, limit)
        except self._error as exc:
            raise BadEncoding(f"corrupt zstd data: {exc}") from exc
        return bytes(out)

    def finish(self) -> bytes:
        if self._started and not self._d.eof:
            raise BadEncoding("zstd body ends before its end marker (truncated)")
        return b""


def _decoder(coding: str) -> _Decoder:
    if coding in ("gzip", "x-gzip"):
        return _Zlib(gzip=True)
    if coding == "deflate":
        return _Zlib(gzip=False)
    if coding == "br":
        return _Brotli()
    if coding == "zstd":
        return _Zstd()
    raise BadEncoding(f"unsupported Content-Encoding {coding!r}")


def codings(header: str) -> list[str]:
    """The codings of a ``Content-Encoding`` header in the order they were applied."""
    return [
        c.strip().lower()
        for c in header.split(",")
        if c.strip() and c.strip().lower() != "identity"
    ]


class BodyDecoder:
    """Undo a ``Content-Encoding`` chain incrementally: ``feed(chunk)`` … ``finish()``.

    ``cut``: a body that decodes to more than ``max_bytes`` is cut there (``full``; what
    follows is not decoded) instead of failing, and ``finish(truncated=True)`` takes a
    stream that was cut as it came: a prefix is wanted (a robots.txt). Stacked codings are
    not cut inside: one that overflows a middle stage still fails."""

    def __init__(self, content_encoding: str, max_bytes: int, *, cut: bool = False) -> None:
        applied = codings(content_encoding)
        if len(applied) > MAX_CODINGS:
            raise BadEncoding(f"{len(applied)} stacked content codings (at most {MAX_CODINGS})")
        # Applied first is decoded last: "gzip, br" means br(gzip(body)).
        self._chain = [_decoder(c) for c in reversed(applied)]
        self._max_bytes = max_bytes
        self._cut = cut
        self.size = 0
        self.full = False
        """``cut`` and the cap reached: the rest of the body is not decoded."""

    def feed(self, chunk: bytes) -> bytes:
        if self.full:
            return b""
        return self._count(self._through(chunk, 0))

    def finish(self, *, truncated: bool = False) -> bytes:
        """The decoded tail; ``truncated`` (with ``cut``): the body was cut as received, so
        a stream without its end marker is what is expected, not an error."""
        tail = b""
        for index, decoder in enumerate(self._chain):
            if self.full:
                return b""
            if tail:
                tail = self._stage(index, tail)
            try:
                tail += decoder.finish()
            except BadEncoding:
                if not (self._cut and truncated):
                    raise
        return self._count(tail)

    def _through(self, chunk: bytes, first: int) -> bytes:
        """``chunk`` through the decoders from ``first`` on."""
        for index in range(first, len(self._chain)):
            chunk = self._stage(index, chunk)
        return chunk

    def _stage(self, index: int, chunk: bytes) -> bytes:
        """``chunk`` through decoder ``index``: over the cap, cut (the last stage, ``cut``)
        or ``BodyTooLarge``."""
        try:
            return self._chain[index].feed(chunk, self._max_bytes - self.size)
        except _Over as over:
            if not self._cut or index != len(self._chain) - 1:
                raise BodyTooLarge(self._max_bytes, decoded=True) from None
            return bytes(over.partial)

    def _count(self, data: bytes) -> bytes:
        left = self._max_bytes - self.size
        if len(data) > left:
            if not self._cut:
                raise BodyTooLarge(self._max_bytes, decoded=True)
            data, self.full = data[:left], True
        self.size += len(data)
        return data


def accept_encoding() -> str:
    """The ``Accept-Encoding`` value: the codings this module can decode here. A module is
    looked for, not imported (zstandard's import is ~7 ms of a crawl's start, and most
    crawls never meet the coding); one found that then fails to import makes its responses
    ``BadEncoding`` errors."""
    offered = ["gzip", "deflate"]
    for coding, module in (("br", "brotli"), ("zstd", "zstandard")):
        if importlib.util.find_spec(module) is not None:
            offered.append(coding)
    return ", ".join(offered)
