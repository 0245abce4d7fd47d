"""Inverted-index postings: built from token counts, compressed, decoded. numba, no IO.

A segment's postings are the triples (document, term frequency, place) of each term,
documents ascending, as variable-byte integers: the document as the gap from the term's
previous one (the first as itself), the frequency, and where the term stands in the
document's token list (so that a score sums its terms in the order the full-corpus kernel
does, and equals it to the last bit). ``build`` makes them from documents in CSR form
(``crawler.relevance.scoring.TokenBatch``'s arrays: ids, counts, offsets), sorting the
postings by term with a two-pass radix sort (linear, stable: documents stay in order),
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
def _build(ids, counts, offsets, packed):  # type: ignore[no-untyped-def]
    n = ids.size
    n_docs = offsets.size - 1
    # Each posting's payload rides along the sort: (document, tf, place) in 32 + 16 + 16 bits
    # when they fit (``packed``: no scattered reads after the sort), else its index.
    payload = np.empty(n, dtype=np.uint64)
    docs = np.empty(0 if packed else n, dtype=np.uint32)
    for d in range(n_docs):
        for j in range(offsets[d], offsets[d + 1]):
            if packed:
                payload[j] = ((np.uint64(d) << np.uint64(32)) | (np.uint64(counts[j]) << np.uint64(16))
                              | np.uint64(j - offsets[d]))  # fmt: skip
            else:
                payload[j] = j
                docs[j] = d
    # LSD radix sort by term, 16 bits a pass: stable, so each term's documents stay ascending
    a_keys, a_pay = ids.copy(), payload
    b_keys, b_pay = np.empty_like(a_keys), np.empty_like(a_pay)
    for shift in range(0, 32, 16):
        start = np.zeros(65537, dtype=np.int64)
        for i in range(n):
            start[((a_keys[i] >> shift) & 0xFFFF) + 1] += 1
        for k in range(65536):
            start[k + 1] += start[k]
        for i in range(n):
            key = a_keys[i]
            bucket = (key >> shift) & 0xFFFF
            to = start[bucket]
            start[bucket] = to + 1
            b_keys[to] = key
            b_pay[to] = a_pay[i]
        a_keys, b_keys = b_keys, a_keys
        a_pay, b_pay = b_pay, a_pay
    n_terms = 0
    for i in range(n):
        if i == 0 or a_keys[i] != a_keys[i - 1]:
            n_terms += 1
    terms = np.empty(n_terms, dtype=np.uint32)
    df = np.zeros(n_terms, dtype=np.uint32)
    starts = np.empty(n_terms + 1, dtype=np.int64)
    out = np.empty(max(n * 15, 1), dtype=np.uint8)  # 5 bytes per 32-bit value at most
    pos = 0
    t = -1
    previous = np.int64(0)
    for i in range(n):
        if i == 0 or a_keys[i] != a_keys[i - 1]:
            t += 1
            terms[t] = a_keys[i]
            starts[t] = pos
            previous = np.int64(0)
        p = a_pay[i]
        if packed:
            doc = np.int64(p >> np.uint64(32))
            tf = np.int64((p >> np.uint64(16)) & np.uint64(0xFFFF))
            place = np.int64(p & np.uint64(0xFFFF))
        else:
            doc = np.int64(docs[p])
            tf = np.int64(counts[p])
            place = np.int64(p) - offsets[doc]
        pos = _put(out, pos, doc - previous)
        previous = doc
        pos = _put(out, pos, tf)
        pos = _put(out, pos, place)
        df[t] += 1
    starts[n_terms] = pos
    return terms, df, starts, out[:pos].copy()


def build(
    ids: U32Array, counts: U32Array, offsets: I64Array
) -> tuple[U32Array, U32Array, I64Array, U8Array]:
    """(terms ascending, each term's document count, the byte offset of each term's run in
    the postings and one past the last, the postings) of the CSR documents given."""
    counts = np.ascontiguousarray(counts, dtype=np.uint32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    packed = bool(
        offsets.size < 1 << 32
        and (counts.size == 0 or int(counts.max()) < 1 << 16)
        and (offsets.size < 2 or int(np.diff(offsets).max()) <= 1 << 16)
    )
    return _build(np.ascontiguousarray(ids, dtype=np.uint32), counts, offsets, packed)  # type: ignore[no-any-return]


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
        length = np.int64(0)
        for b in range(8):
            length |= np.int64(buf[s + 8 + b]) << (8 * b)
        lengths[k] = length
        p = s + 16
        for i in range(n):
            q = p + 4 * i
            ids[at + i] = (np.uint32(buf[q]) | (np.uint32(buf[q + 1]) << 8)
                           | (np.uint32(buf[q + 2]) << 16) | (np.uint32(buf[q + 3]) << 24))  # fmt: skip
        p += 4 * n
        if width == 1:
            for i in range(n):
                counts[at + i] = buf[p + i]
        elif width == 2:
            for i in range(n):
                counts[at + i] = np.uint32(buf[p + 2 * i]) | (np.uint32(buf[p + 2 * i + 1]) << 8)
        else:
            for i in range(n):
                q = p + 4 * i
                counts[at + i] = (np.uint32(buf[q]) | (np.uint32(buf[q + 1]) << 8)
                                  | (np.uint32(buf[q + 2]) << 16) | (np.uint32(buf[q + 3]) << 24))  # fmt: skip
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
