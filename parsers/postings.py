"""Inverted-index postings: built from token counts, compressed, decoded. numba, no IO.

A segment's postings are the triples (document, term frequency, place) of each term,
documents ascending, as variable-byte integers: the document as the gap from the term's
previous one (the first as itself), the frequency, and where the term stands in the
document's token list (so that a score sums its terms in the order the full-corpus kernel
does, and equals it to the last bit). ``build`` makes them from documents in CSR form
(``crawler.relevance.scoring.TokenBatch``'s arrays: ids, counts, offsets) in two linear
passes and no sort (terms found by hashing, each posting written at its term's cursor),
without the GIL (a store builds segments on several threads at once);
``decode`` reads one term's run back, keeping the documents a map says are live.

Variable-byte: 7 bits a byte, low first, the high bit set on every byte but the last (as
Lucene's VInt). A segment's documents are numbered 0..n-1 in its own order; what they are is
the store's business (``storage.sqlite.search``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from parsers.token_blob import TABLE_KEY
from parsers.tokens import _mix64

U8Array = npt.NDArray[np.uint8]
U32Array = npt.NDArray[np.uint32]
I64Array = npt.NDArray[np.int64]


@njit(cache=True, nogil=True)
def _put(out, pos, value):  # type: ignore[no-untyped-def]
    while value >= 0x80:
        out[pos] = (value & 0x7F) | 0x80
        value >>= 7
        pos += 1
    out[pos] = value
    return pos + 1


@njit(cache=True, nogil=True)
def _size(value):  # type: ignore[no-untyped-def]
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


@njit(cache=True, nogil=True)
def _slot(term, mask, key):  # type: ignore[no-untyped-def]
    """Where a term's probe starts: keyed (``parsers.tokens._slot`` says why), as the terms
    are token ids that pages choose."""
    return np.int64(_mix64(np.uint64(term) ^ key) >> np.uint64(32)) & mask


@njit(cache=True, nogil=True)
def _empty_table(mask):  # type: ignore[no-untyped-def]
    table = np.empty(mask + 1, dtype=np.int64)
    for i in range(mask + 1):  # a loop: np.full costs ~0.3 s to compile
        table[i] = -1
    return table


@njit(cache=True, nogil=True)
def _group(ids, dense, key):  # type: ignore[no-untyped-def]
    """Each posting's term as a dense index (first seen first) into ``dense`` (may be
    ``ids`` itself), and the distinct terms, by an open-addressing table of
    (index << 32 | term), -1 empty: one load a probe."""
    n = ids.size
    mask = (1 << 12) - 1
    table = _empty_table(mask)
    seen = np.empty(1 << 11, dtype=np.uint32)
    n_terms = 0
    for i in range(n):
        term = np.int64(ids[i])
        slot = _slot(term, mask, key)
        while True:
            entry = table[slot]
            if entry == -1 or (entry & 0xFFFFFFFF) == term:
                break
            slot = (slot + 1) & mask
        if entry != -1:
            dense[i] = entry >> 32
            continue
        if n_terms == seen.size:
            grown = np.empty(seen.size * 2, dtype=np.uint32)
            for t in range(n_terms):  # a loop: slice assignment costs ~2.5 s to compile
                grown[t] = seen[t]
            seen = grown
        seen[n_terms] = term
        table[slot] = (np.int64(n_terms) << 32) | term
        dense[i] = n_terms
        n_terms += 1
        if n_terms * 2 > mask:  # rehash at half full
            mask = mask * 2 + 1
            table = _empty_table(mask)
            for t in range(n_terms):
                at = _slot(seen[t], mask, key)
                while table[at] != -1:
                    at = (at + 1) & mask
                table[at] = (np.int64(t) << 32) | np.int64(seen[t])
    return dense, seen[:n_terms].copy()


# Two passes over the postings in document order, no sort: the first (``_sizes``) sizes each
# term's run (its gaps need the term's previous document), the second (``_write``) writes
# each posting at its term's cursor, so each run comes out documents ascending. A radix sort
# of the postings by term moved ~3x the memory (and this VM pays ~2 us a fresh page). The
# terms are put in order between the two by numpy (numba's argsort costs ~1 s to compile).


@njit(cache=True, nogil=True)
def _sizes(ids, counts, offsets, dense, key):  # type: ignore[no-untyped-def]
    dense, seen = _group(ids, dense, key)
    df = np.zeros(seen.size, dtype=np.uint32)
    nbytes = np.zeros(seen.size, dtype=np.int64)
    last = np.zeros(seen.size, dtype=np.int64)
    for d in range(offsets.size - 1):
        for j in range(offsets[d], offsets[d + 1]):
            t = dense[j]
            nbytes[t] += _size(d - last[t]) + _size(counts[j]) + _size(j - offsets[d])
            last[t] = d
            df[t] += 1
    return seen, df, nbytes


@njit(cache=True, nogil=True)
def _write(dense, counts, offsets, order, nbytes):  # type: ignore[no-untyped-def]
    n_terms = order.size
    starts = np.empty(n_terms + 1, dtype=np.int64)
    cursor = np.empty(n_terms, dtype=np.int64)
    pos = np.int64(0)
    for r in range(n_terms):
        t = order[r]
        starts[r] = pos
        cursor[t] = pos
        pos += nbytes[t]
    starts[n_terms] = pos
    out = np.empty(pos, dtype=np.uint8)
    last = np.zeros(n_terms, dtype=np.int64)
    for d in range(offsets.size - 1):
        for j in range(offsets[d], offsets[d + 1]):
            t = dense[j]
            at = _put(out, cursor[t], d - last[t])
            at = _put(out, at, counts[j])
            cursor[t] = _put(out, at, j - offsets[d])
            last[t] = d
    return starts, out


def build(
    ids: U32Array, counts: U32Array, offsets: I64Array, overwrite: bool = False
) -> tuple[U32Array, U32Array, I64Array, U8Array]:
    """(terms ascending, each term's document count, the byte offset of each term's run in
    the postings and one past the last, the postings) of the CSR documents given.
    ``overwrite``: ``ids`` (uint32, contiguous) may be overwritten (saves its size)."""
    ids = np.ascontiguousarray(ids, dtype=np.uint32)
    counts = np.ascontiguousarray(counts, dtype=np.uint32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    dense = ids if overwrite and ids.flags.writeable else np.empty_like(ids)
    seen, df, nbytes = _sizes(ids, counts, offsets, dense, TABLE_KEY)
    order = np.argsort(seen)
    starts, postings = _write(dense, counts, offsets, order, nbytes)
    return seen[order], df[order], starts, postings


@njit(cache=True)
def _get(buf, pos):  # type: ignore[no-untyped-def]
    value = np.int64(0)
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= np.int64(byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


@njit(cache=True)
def decode(buf, count, live, docs_out, tfs_out, places_out, at):  # type: ignore[no-untyped-def]
    """Decode ``count`` postings from ``buf`` (one term's run) into ``docs_out``,
    ``tfs_out`` and ``places_out`` (where the term is in its document's token list) from
    index ``at``, each document mapped through ``live`` (a segment's document to a global
    one; -1: dropped). Returns the index after the last one kept."""
    pos = 0
    doc = 0
    for _ in range(count):
        gap, pos = _get(buf, pos)
        tf, pos = _get(buf, pos)
        place, pos = _get(buf, pos)
        doc += gap
        mapped = live[doc]
        if mapped >= 0:
            docs_out[at] = mapped
            tfs_out[at] = tf
            places_out[at] = place
            at += 1
    return at


@njit(cache=True, nogil=True)
def _unpack(buf, starts):  # type: ignore[no-untyped-def]
    n_blobs = starts.size - 1
    total = 0
    for k in range(n_blobs):
        s = starts[k]
        if starts[k + 1] - s < 16 or buf[s] != 84 or buf[s + 1] != 75 or buf[s + 2] != 1:
            return k, np.empty(0, np.uint32), np.empty(0, np.uint32), starts, starts
        n = buf[s + 4] | (buf[s + 5] << 8) | (buf[s + 6] << 16) | (np.int64(buf[s + 7]) << 24)
        flags = buf[s + 3]
        width = 1 if flags == 2 else 2 if flags == 1 else 4 if flags == 0 else 0
        if width == 0 or starts[k + 1] - s != 16 + n * (4 + width):
            return k, np.empty(0, np.uint32), np.empty(0, np.uint32), starts, starts
        total += n
    ids = np.empty(total, dtype=np.uint32)
    counts = np.empty(total, dtype=np.uint32)
    offsets = np.zeros(n_blobs + 1, dtype=np.int64)
    lengths = np.zeros(n_blobs, dtype=np.int64)
    at = 0
    for k in range(n_blobs):
        s = starts[k]
        n = buf[s + 4] | (buf[s + 5] << 8) | (buf[s + 6] << 16) | (np.int64(buf[s + 7]) << 24)
        flags = buf[s + 3]
        width = 1 if flags == 2 else 2 if flags == 1 else 4
        lengths[k] = buf[s + 8 : s + 16].view(np.int64)[0]
        p = s + 16
        words = buf[p : p + 4 * n].view(np.uint32)  # x86/ARM: unaligned is fine
        for i in range(n):
            ids[at + i] = words[i]
        p += 4 * n
        if width == 1:
            for i in range(n):
                counts[at + i] = buf[p + i]
        elif width == 2:
            halves = buf[p : p + 2 * n].view(np.uint16)
            for i in range(n):
                counts[at + i] = halves[i]
        else:
            words = buf[p : p + 4 * n].view(np.uint32)
            for i in range(n):
                counts[at + i] = words[i]
        at += n
        offsets[k + 1] = at
    return -1, ids, counts, offsets, lengths


def unpack_blobs(blobs: list[bytes]) -> tuple[U32Array, U32Array, I64Array, I64Array]:
    """Token blobs (``parsers.tokens.encode_counts``) as one CSR batch: (ids, counts,
    offsets, lengths), in one pass over their bytes. ``ValueError`` names the first blob
    that is not one."""
    sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    starts = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    buf = np.frombuffer(b"".join(blobs), dtype=np.uint8) if blobs else np.empty(0, np.uint8)
    bad, ids, counts, offsets, lengths = _unpack(buf, starts)
    if bad >= 0:
        raise ValueError(f"token blob {bad} is not one (parsers.tokens)")
    return ids, counts, offsets, lengths
