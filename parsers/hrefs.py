"""The kernel that resolves a page's hrefs in one call: ``_resolve_all``, which
``parsers.native.resolve_all`` calls.

``parsers.links.Resolver.resolve`` is Python an href: for a page of many links, a large
share of a parse worker's time on the benchmark site. Most hrefs take its string
fast path (relative, ``../``, root-relative or same-origin absolute, made of plain
characters, with or without a fragment): this module does exactly that fast path for all of a
page's hrefs at once on their bytes, and hands every other href back to ``Resolver.resolve``
(which asks ada). The results are equal, href for href (``tests/parsers/test_links.py``). The
kernel also does what ``parsers.links._fast_absolute`` does for absolute URLs to other hosts,
and answers ``None`` for any other scheme than http(s) (``mailto:``, ``javascript:``), as ada
would.

Worker-side only (it imports numba): the crawl process never imports it, nor a worker that
has the kernels compiled ahead of time (``parsers.aot``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


def _table(chars: bytes) -> npt.NDArray[np.uint8]:
    table = np.zeros(256, dtype=np.uint8)
    table[np.frombuffer(chars, dtype=np.uint8)] = 1
    return table


_ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_PATH_OK = _table(_ALNUM + b"._~/-!$()*+,;=")
"""``parsers.links._SAFE_PATH``'s characters (see ``parsers.links._PLAIN``)."""
_QUERY_OK = _table(_ALNUM + b"._~/=&-!$()*+,;:@")
"""``parsers.links._SAFE_QUERY``'s characters."""
_HOST_OK = _table(b"abcdefghijklmnopqrstuvwxyz0123456789-.")
"""What ``parsers.links._PLAIN_ORIGIN`` allows in a host name (and the dots between labels)."""
_SCHEME_OK = _table(_ALNUM + b"+-.")
"""A URL scheme's characters after its first letter (WHATWG scheme state)."""
_EMPTY = np.zeros(0, dtype=np.uint8)

_NL = 10
_HASH = 35
_SLASH = 47
_DOT = 46
_COLON = 58
_QMARK = 63
_LOWER_A = 97
_LOWER_Z = 122
_DIGIT_0 = 48
_DIGIT_1 = 49
_DIGIT_9 = 57
_FALLBACK = -1
"""A kernel result: ``Resolver.resolve`` decides (ada, for anything not plain)."""
_NOT_HTTP = -2
"""A kernel result: another scheme than http(s), so ``None``."""


@njit(cache=True)
def _emit_path(buf, start, end, origin, directory, out, w, stack):
    """Write ``origin + directory + buf[start:end]`` (the last two a path starting with
    ``/``, then maybe a ``?query``) at ``out[w:]`` with the path's dot segments removed; the
    new end, or ``_FALLBACK`` if ``buf[start:end]`` holds anything but the plain characters.
    ``directory`` is plain already (from a normalised base)."""
    q = end
    dots = False
    previous = directory[directory.size - 1] if directory.size else 0
    for i in range(start, end):  # one pass: the query's start, the characters, "/."
        c = buf[i]
        if c == _QMARK:
            q = i
            break
        if _PATH_OK[c] == 0:
            return _FALLBACK
        if c == _DOT and previous == _SLASH:
            dots = True
        previous = c
    for i in range(q + 1, end):
        if _QUERY_OK[buf[i]] == 0:
            return _FALLBACK
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
def _scheme_end(buf, pos, cut):
    """The index of the ``:`` that ends a scheme at ``buf[pos:cut]``, or -1 (no scheme)."""
    c = buf[pos] | 32  # ASCII lower case
    if c < _LOWER_A or c > _LOWER_Z:
        return -1
    for i in range(pos + 1, cut):
        c = buf[i]
        if c == _COLON:
            return i
        if _SCHEME_OK[c] == 0:
            return -1
    return -1


@njit(cache=True)
def _emit_absolute(buf, pos, colon, cut, out, w, stack):
    """``parsers.links._fast_absolute``: ``http(s)://`` (lower case), a lower-case DNS name
    whose last label starts with a letter and holds no ``xn--``, an optional port of 1 to 5
    digits (no leading zero, at most 65535; the scheme's default is dropped), then nothing
    or a plain path. The new end, or ``_FALLBACK``."""
    if colon + 2 >= cut or buf[colon + 1] != _SLASH or buf[colon + 2] != _SLASH:
        return _FALLBACK
    host = colon + 3
    i = host
    label = host
    while i < cut and _HOST_OK[buf[i]]:
        if buf[i] == _DOT:
            if i == label:
                return _FALLBACK  # an empty label
            label = i + 1
        i += 1
    if i == label or buf[label] < _LOWER_A or buf[label] > _LOWER_Z:
        return _FALLBACK  # no host, a trailing dot, or a numeric last label
    for j in range(host, i - 3):
        if buf[j] == 120 and buf[j + 1] == 110 and buf[j + 2] == 45 and buf[j + 3] == 45:
            return _FALLBACK  # "xn--": punycode, for ada to validate
    origin_end = i
    if i < cut and buf[i] == _COLON:
        i += 1
        if i >= cut or buf[i] < _DIGIT_1 or buf[i] > _DIGIT_9:
            return _FALLBACK
        port = 0
        digits = 0
        while i < cut and _DIGIT_0 <= buf[i] <= _DIGIT_9:
            port = port * 10 + (buf[i] - _DIGIT_0)
            digits += 1
            i += 1
        if digits > 5 or port > 65535:
            return _FALLBACK
        https = colon - pos == 5
        if not ((port == 80 and not https) or (port == 443 and https)):
            origin_end = i  # not the scheme's default port: kept
    if i < cut and buf[i] != _SLASH:
        return _FALLBACK
    for j in range(pos, origin_end):
        out[w] = buf[j]
        w += 1
    if i == cut:
        out[w] = _SLASH
        return w + 1
    return _emit_path(buf, i, cut, _EMPTY, _EMPTY, out, w, stack)


@njit(cache=True)
def _resolve_one(buf, pos, end, origin, directory, base, out, w, stack):
    """One href, ``buf[pos:end]``: the new end of ``out``, ``_FALLBACK`` or ``_NOT_HTTP``."""
    if pos == end:
        return _FALLBACK  # an empty href: the base (ada decides)
    cut = pos
    while cut < end and buf[cut] != _HASH:
        cut += 1
    first = buf[pos]
    if cut == pos:  # "#fragment": this page
        for i in range(base.size):
            out[w + i] = base[i]
        return w + base.size
    if first == _SLASH:
        if cut - pos >= 2 and buf[pos + 1] == _SLASH:
            return _FALLBACK  # "//host"
        return _emit_path(buf, pos, cut, origin, _EMPTY, out, w, stack)
    if first == _QMARK:
        return _FALLBACK
    same_origin = cut - pos > origin.size and buf[pos + origin.size] == _SLASH
    if same_origin:
        for i in range(origin.size):
            if buf[pos + i] != origin[i]:
                same_origin = False
                break
    if same_origin:
        return _emit_path(buf, pos + origin.size, cut, origin, _EMPTY, out, w, stack)
    colon = _scheme_end(buf, pos, cut)
    if colon < 0:  # relative: any odd character fails the plain check
        return _emit_path(buf, pos, cut, origin, directory, out, w, stack)
    size = colon - pos
    http = (
        (size == 4 or size == 5)
        and buf[pos] | 32 == 104
        and buf[pos + 1] | 32 == 116
        and buf[pos + 2] | 32 == 116
        and buf[pos + 3] | 32 == 112
        and (size == 4 or buf[pos + 4] | 32 == 115)
    )
    if not http:
        return _NOT_HTTP  # mailto:, javascript:, ftp: ... never an http(s) URL
    for i in range(pos, colon):
        if buf[i] < _LOWER_A:
            return _FALLBACK  # "HTTP:" (ada lower-cases it)
    return _emit_absolute(buf, pos, colon, cut, out, w, stack)


@njit(cache=True)
def _resolve_all(buf, count, context, origin_size, directory_size):
    """Resolve the ``count`` newline-separated hrefs of ``buf`` against the base in
    ``context`` (origin, directory, base, concatenated): (the results, newline-separated,
    an empty line where ``fixes`` names the href; ``fixes``: ``k`` for an href that
    ``Resolver.resolve`` must do, ``-k - 1`` for one that is ``None``)."""
    origin = context[:origin_size]
    directory = context[origin_size : origin_size + directory_size]
    base = context[origin_size + directory_size :]
    per_href = max(origin.size + directory.size, base.size) + 1
    out = np.empty(buf.size + count * per_href + 1, dtype=np.uint8)
    fixes = np.empty(count, dtype=np.int64)
    fixed = 0
    stack = np.empty(buf.size + directory.size + 2, dtype=np.int64)
    w = 0
    pos = 0
    for k in range(count):
        end = pos
        while end < buf.size and buf[end] != _NL:
            end += 1
        if k > 0:
            out[w] = _NL
            w += 1
        result = _resolve_one(buf, pos, end, origin, directory, base, out, w, stack)
        if result >= 0:
            w = result
        else:
            fixes[fixed] = k if result == _FALLBACK else -k - 1
            fixed += 1
        pos = end + 1
    return out[:w], fixes[:fixed]
