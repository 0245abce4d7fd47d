"""A page's hrefs resolved in one numba call: ``resolve_all``.

``parsers.links.Resolver.resolve`` costs ~2 us of Python an href, ~110 us for a page of 56
links, a sixth of a parse worker's time on the benchmark site. Most hrefs take its string
fast path (relative, ``../``, root-relative or same-origin absolute, made of plain
characters, with or without a fragment): this module does exactly that fast path for all of a
page's hrefs at once on their bytes, and hands every other href back to ``Resolver.resolve``
(which asks ada). The results are equal, href for href (``tests/test_links.py``).

Worker-side only (it imports numba): the crawl process never imports it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from parsers.links import Resolver


def _table(chars: bytes) -> npt.NDArray[np.uint8]:
    table = np.zeros(256, dtype=np.uint8)
    table[np.frombuffer(chars, dtype=np.uint8)] = 1
    return table


_ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_PATH_OK = _table(_ALNUM + b"._~/-")
"""``parsers.links._SAFE_PATH``'s characters."""
_QUERY_OK = _table(_ALNUM + b"._~/=&-")
"""``parsers.links._SAFE_QUERY``'s characters."""

_NL = 10
_HASH = 35
_SLASH = 47
_DOT = 46
_QMARK = 63


@njit(cache=True)
def _emit_path(buf, start, end, origin, directory, out, w, path_ok, query_ok, stack):
    """Write ``origin + directory + buf[start:end]`` (the last two a path starting with
    ``/``, then maybe a ``?query``) at ``out[w:]`` with the path's dot segments removed; the
    new end, or -1 if ``buf[start:end]`` holds anything but the plain characters (the caller
    then asks ``Resolver.resolve``). ``directory`` is plain already (from a normalised base)."""
    q = end
    dots = False
    previous = directory[directory.size - 1] if directory.size else 0
    for i in range(start, end):  # one pass: the query's start, the characters, "/."
        c = buf[i]
        if c == _QMARK:
            q = i
            break
        if path_ok[c] == 0:
            return -1
        if c == _DOT and previous == _SLASH:
            dots = True
        previous = c
    for i in range(q + 1, end):
        if query_ok[buf[i]] == 0:
            return -1
    for i in range(origin.size):  # loops: ~40 % faster than slice assignments here
        out[w + i] = origin[i]
    w += origin.size
    w0 = w
    for i in range(directory.size):
        out[w + i] = directory[i]
    w += directory.size
    for i in range(start, q):
        out[w] = buf[i]
        w += 1
    if dots:
        w = _remove_dot_segments(out, w0, w, stack)
    for i in range(q, end):
        out[w] = buf[i]
        w += 1
    return w


@njit(cache=True)
def _remove_dot_segments(out, w0, w, stack):
    """``parsers.links._remove_dot_segments`` in place on ``out[w0:w]`` (a path starting
    with ``/``); returns the new end. A segment is never written before it was read."""
    o = w0
    depth = 0
    r = w0 + 1  # the first segment's first byte
    while True:
        seg_end = r
        while seg_end < w and out[seg_end] != _SLASH:
            seg_end += 1
        size = seg_end - r
        last = seg_end >= w
        if size == 2 and out[r] == _DOT and out[r + 1] == _DOT:
            if depth > 0:
                depth -= 1
                o = stack[depth]
            if last:
                out[o] = _SLASH
                o += 1
        elif size == 1 and out[r] == _DOT:
            if last:
                out[o] = _SLASH
                o += 1
        else:
            stack[depth] = o
            depth += 1
            out[o] = _SLASH
            o += 1
            for i in range(r, seg_end):
                out[o] = out[i]
                o += 1
        if last:
            break
        r = seg_end + 1
    if o == w0:  # every segment removed: the root
        out[o] = _SLASH
        o += 1
    return o


@njit(cache=True)
def _resolve_all(buf, count, origin, directory, base, path_ok, query_ok):
    """Resolve the ``count`` newline-separated hrefs of ``buf``: (the results, newline-
    separated, an empty line where ``fallback`` is set; ``fallback``)."""
    per_href = max(origin.size + directory.size, base.size) + 1
    out = np.empty(buf.size + count * per_href + 1, dtype=np.uint8)
    fallback = np.zeros(count, dtype=np.uint8)
    stack = np.empty(buf.size + directory.size + 2, dtype=np.int64)
    none = directory[:0]
    w = 0
    pos = 0
    for k in range(count):
        end = pos
        while end < buf.size and buf[end] != _NL:
            end += 1
        cut = pos
        while cut < end and buf[cut] != _HASH:
            cut += 1
        start_w = w
        if k > 0:
            out[w] = _NL
            w += 1
            start_w = w
        result = -1
        if pos == end:
            result = -1  # an empty href: the base (ada decides)
        elif cut == pos:  # "#fragment": this page
            for i in range(base.size):
                out[w + i] = base[i]
            result = w + base.size
        elif buf[pos] == _SLASH:
            if not (cut - pos >= 2 and buf[pos + 1] == _SLASH):  # not "//host"
                result = _emit_path(buf, pos, cut, origin, none, out, w, path_ok, query_ok, stack)
        elif buf[pos] != _QMARK:
            same_origin = cut - pos > origin.size and buf[pos + origin.size] == _SLASH
            if same_origin:
                for i in range(origin.size):
                    if buf[pos + i] != origin[i]:
                        same_origin = False
                        break
            if same_origin:
                result = _emit_path(
                    buf, pos + origin.size, cut, origin, none, out, w, path_ok, query_ok, stack
                )
            else:  # relative (a scheme or any other odd character fails the plain check)
                result = _emit_path(
                    buf, pos, cut, origin, directory, out, w, path_ok, query_ok, stack
                )
        if result < 0:
            fallback[k] = 1
            w = start_w
        else:
            w = result
        pos = end + 1
    return out[:w], fallback


def resolve_all(resolver: Resolver, hrefs: list[str]) -> list[str | None]:
    """``[resolver.resolve(href.strip()) for href in hrefs]``, mostly in one kernel call."""
    origin = resolver.origin
    if origin is None or not hrefs:
        return [resolver.resolve(href.strip()) for href in hrefs]
    joined = "\n".join(hrefs)
    if joined.count("\n") != len(hrefs) - 1:  # an href holds a newline
        return [resolver.resolve(href.strip()) for href in hrefs]
    buf = np.frombuffer(joined.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    out, fallback = _resolve_all(
        buf,
        len(hrefs),
        _ascii(origin),
        _ascii(resolver.directory),
        _ascii(resolver.base),
        _PATH_OK,
        _QUERY_OK,
    )
    urls: list[str | None] = out.tobytes().decode("ascii").split("\n")  # type: ignore[assignment]
    for k in np.flatnonzero(fallback).tolist():
        urls[k] = resolver.resolve(hrefs[k].strip())
    return urls


def _ascii(text: str) -> npt.NDArray[np.uint8]:
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
