"""Byte tokenizer, hashed token ids, SimHash and a compact binary form of token counts.

Owns the definition of a token and of its id; scoring (``crawler.relevance.scoring``) and storage only
ever see the ids this module produces. Runs inside the parse workers, so it imports numpy
and numba only.

Invariants:
- A token is a maximal run of bytes of the text's UTF-8 encoding (``surrogatepass``) that are
  ASCII letters, ASCII digits or any byte >= 0x80 (so a non-ASCII letter never splits a word).
  ASCII letters are lower-cased; other bytes are kept as they are.
- A token's id is FNV-1a 32 of its lower-cased bytes, all 32 bits kept (masking merges terms).
- ``TokenCounts.ids`` are distinct, in order of first occurrence; ``counts`` align with them and
  sum to ``length``. The numba kernel equals ``reference_tokenize`` (plain ``re`` + Python hash,
  in ``parsers.terms``, where the definition lives in plain Python for the crawl process).
- Kernels are plain ``@njit(cache=True)``: no ``@vectorize`` signatures (compiled at import, never
  cached) and no ``parallel=True`` here (workers must stay fork-agnostic and single-threaded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit

from parsers.terms import (
    BLOB_HEADER,
    BLOB_MAGIC,
    BLOB_VERSION,
    FLAG_U8_COUNTS,
    FLAG_U16_COUNTS,
    SIMHASH_TOKENS,
    fnv1a32,
    query_token_ids,
    reference_tokenize,
    shingle_simhash,
    token_bytes,
    token_id,
)
from parsers.terms import utf8 as _utf8
from parsers.token_blob import COUNT_DTYPES as _COUNT_DTYPES
from parsers.token_blob import FOLD as _FOLD
from parsers.token_blob import NO_QUERY as _NO_QUERY
from parsers.token_blob import TABLE_KEY as _TABLE_KEY
from parsers.token_blob import encode_blob as _encode

__all__ = [
    "TokenCounts",
    "decode_counts",
    "encode_counts",
    "hamming64",
    "query_ids",
    "reference_simhash",
    "reference_tokenize",
    "simhash64",
    "simhash_text",
    "term_counts",
    "token_id",
    "tokenize",
    "tokenize_and_simhash",
    "tokenize_bytes",
]

_FNV_OFFSET = np.uint64(2166136261)
_FNV_PRIME = np.uint64(16777619)
_MASK32 = np.uint64(0xFFFFFFFF)
_GOLDEN64 = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ONE64 = np.uint64(1)
_ZERO64 = np.uint64(0)
_COUNT_SHIFT = np.uint64(32)
_COUNT_ONE = np.uint64(1 << 32)  # a count of one in a counting table entry (see _count)
_MAGIC_BYTE0, _MAGIC_BYTE1 = BLOB_MAGIC  # the blob's first two bytes, as ints (_page_terms)
_HEADER_BYTES = BLOB_HEADER.size


@dataclass(frozen=True, slots=True, eq=False)
class TokenCounts:
    """One document's bag of words: distinct ids (uint32), their counts (uint32), total tokens."""

    ids: npt.NDArray[np.uint32]
    counts: npt.NDArray[np.uint32]
    length: int


# ---------------------------------------------------------------------------------------------
# numba kernels


@njit(cache=True)
def _shift_for(table_size):
    """Right shift that maps a 64-bit product onto a power-of-two table (Fibonacci hashing)."""
    log2 = 0
    while (1 << log2) < table_size:
        log2 += 1
    return np.uint64(64 - log2)


@njit(cache=True)
def _mix64(x):
    """splitmix64 finaliser: spreads a 32-bit id over all 64 bits."""
    z = x + _GOLDEN64
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _simhash64(ids, counts):
    acc = np.zeros(64, dtype=np.int64)
    for i in range(ids.size):
        x = _mix64(np.uint64(ids[i]))
        w = np.int64(counts[i])
        for bit in range(64):
            if (x >> np.uint64(bit)) & _ONE64:
                acc[bit] += w
            else:
                acc[bit] -= w
    out = np.uint64(0)
    for bit in range(64):
        if acc[bit] > 0:
            out |= _ONE64 << np.uint64(bit)
    return out


@njit(cache=True)
def _chain(data, fold, start, stop, out, written, h, was_token):
    """One chain of ``_token_hashes`` over ``data[start:stop]``, from its state (the write
    index, the running hash, whether the byte before was a token's); returns that state."""
    for i in range(start, stop):
        c = np.uint64(fold[data[i]])
        is_token = np.uint64(c != 0)
        out[written] = h & _MASK32  # kept only if a token ended just before this byte
        written += int(was_token & (is_token ^ _ONE64))
        h = (h ^ c) * _FNV_PRIME if is_token else _FNV_OFFSET
        was_token = is_token
    return written, h, was_token


@njit(cache=True)
def _token_hashes(data, fold):
    """The id (FNV-1a 32) of every token of ``data``, in order.

    No branch per byte: every position stores the running hash and advances the write
    index only where a token ends, and a select restarts the hash after a separator. Word
    lengths are random, so a branch on "token ended" mispredicts about once a word.

    Two chains at once: ``data`` is cut at the first separator from its middle on, and the
    halves are hashed in the same loop (the second's ids after the first's). Each byte's
    step waits on the step before it (the hash); two independent steps per turn keep the
    core busy meanwhile: 25 instead of 32 us for a page's 23 KB of text (one chain, ~1.4 ns
    a byte before)."""
    size = data.size
    mid = size // 2
    while mid < size and fold[data[mid]] != 0:
        mid += 1  # a token never spans the cut; none found: the second half is empty
    out_a = np.empty(mid // 2 + 2, dtype=np.uint32)  # <= (n + 1) // 2 tokens in n bytes, + 1
    out_b = np.empty((size - mid) // 2 + 2, dtype=np.uint32)
    wa = wb = 0
    ha = hb = _FNV_OFFSET
    ta = tb = np.uint64(0)  # whether the previous byte was a token's
    both = min(mid, size - mid)
    for i in range(both):
        ca = np.uint64(fold[data[i]])
        cb = np.uint64(fold[data[mid + i]])
        ia = np.uint64(ca != 0)
        ib = np.uint64(cb != 0)
        out_a[wa] = ha & _MASK32  # kept only if a token ended just before this byte
        out_b[wb] = hb & _MASK32
        wa += int(ta & (ia ^ _ONE64))
        wb += int(tb & (ib ^ _ONE64))
        # The low 32 bits of a product depend on its operands' low 32 bits only: no mask
        # in the chain, one where the hash is stored.
        ha = (ha ^ ca) * _FNV_PRIME if ia else _FNV_OFFSET
        hb = (hb ^ cb) * _FNV_PRIME if ib else _FNV_OFFSET
        ta = ia
        tb = ib
    # What is left of the longer half, one chain.
    wa, ha, ta = _chain(data, fold, both, mid, out_a, wa, ha, ta)
    wb, hb, tb = _chain(data, fold, mid + both, size, out_b, wb, hb, tb)
    out_a[wa] = ha & _MASK32
    wa += int(ta)
    out_b[wb] = hb & _MASK32
    wb += int(tb)
    out = np.empty(wa + wb, dtype=np.uint32)
    out[:wa] = out_a[:wa]
    out[wa:] = out_b[:wb]
    return out


@njit(cache=True)
def _slot(table, h, shift, mask, key):
    """Where id ``h`` is in a counting table (see ``_count``), or the empty slot where it
    goes (linear probing from ``_mix64(h ^ key)``'s top bits).

    ``key`` is secret and random (``parsers.token_blob.TABLE_KEY``): an id is FNV-1a of a
    token, which anyone can compute, so without it a page could hold tens of thousands of
    distinct words whose slots all fall in one run of the table (found quickly by trying
    random words), and every new word would probe the whole run: quadratic in the page's
    distinct words. Which slots the ids take changes nothing the kernel returns.

    The probe stops at an empty entry or at ``h``'s: ``min(entry's id ^ h, entry) == 0``,
    one test where ``entry == 0 or id == h`` compiled to a branch on "empty", which a
    text's new and repeated words take at random (a misprediction every third token)."""
    slot = _mix64(h ^ key) >> shift
    entry = table[slot]
    while min((entry & _MASK32) ^ h, entry) != _ZERO64:
        slot = (slot + _ONE64) & mask
        entry = table[slot]
    return slot


@njit(cache=True)
def _count(hashes, cap, key):
    """Count ``hashes`` with room for ``cap`` distinct ids: (table, the slots of the ids in
    order of first occurrence, n), ``n`` -1 when ``cap`` was too small.

    An open-addressing table (linear probing, load <= 1/2, Fibonacci hashing) whose entry
    holds an id and its count together (``count << 32 | id``; 0: empty, as no count is 0):
    one load and one store a token, and no branch on whether the id is new."""
    table = np.zeros(cap * 2, dtype=np.uint64)
    shift = _shift_for(table.size)
    mask = np.uint64(table.size - 1)
    order = np.empty(cap + 1, dtype=np.uint64)  # + 1: each token writes one past the ids
    n = 0
    for k in range(hashes.size):
        h = np.uint64(hashes[k])
        slot = _slot(table, h, shift, mask, key)
        entry = table[slot]
        fresh = entry == _ZERO64
        table[slot] = entry + _COUNT_ONE + (h if fresh else _ZERO64)
        order[n] = slot
        n += int(fresh)
        if n > cap:  # not before: a test of ``fresh`` would be a branch again
            return table, order, -1
    return table, order, n


@njit(cache=True)
def _bag(hashes, query, key):
    """(distinct ids in first-occurrence order, their counts, the largest count, the
    counts of ``query``'s ids).

    Room for half the tokens as distinct ids (what prose needs, with a margin) up to 65,536
    at first, doubled on a retry: a huge text of few words stays small."""
    cap = 16
    while cap < min(hashes.size // 2, 1 << 16):
        cap *= 2
    while True:
        table, order, n = _count(hashes, cap, key)
        if n >= 0:
            break
        cap *= 2
    ids = np.empty(n, dtype=np.uint32)
    counts = np.empty(n, dtype=np.uint32)
    top = np.uint32(0)
    for j in range(n):
        entry = table[order[j]]
        ids[j] = np.uint32(entry & _MASK32)
        counts[j] = np.uint32(entry >> _COUNT_SHIFT)
        top = max(top, counts[j])
    shift = _shift_for(table.size)
    mask = np.uint64(table.size - 1)
    tf = np.zeros(query.size, dtype=np.uint32)
    for q in range(query.size):
        slot = _slot(table, np.uint64(query[q]), shift, mask, key)
        tf[q] = np.uint32(table[slot] >> _COUNT_SHIFT)
    return ids, counts, top, tf


@njit(cache=True)
def _half_add(bits, x):
    """One bit-sliced half adder: (the sum bits, the carry bits)."""
    return bits ^ x, bits & x


@njit(cache=True)
def _shingle_simhash(hashes, max_tokens):
    """SimHash over the word 3-gram shingles of the first ``max_tokens`` tokens: a bit is
    set when more than half of the shingles set it (``reference_simhash`` is the
    plain-Python definition; fewer than 3 tokens give 0).

    Shingles, not single words: documents drawn from one vocabulary share most words (and
    a word-weighted SimHash puts them within a few bits of each other), but rarely word
    order. The 64 per-bit tallies are bit-sliced: eight 64-bit words hold an 8-bit counter
    for every bit position (ripple-carry adds, all in registers), spilled into ``ones``
    every 255 shingles; half the cost of 64 separate adds per shingle."""
    m = min(hashes.size, max_tokens)
    ones = np.zeros(64, dtype=np.int64)
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = np.uint64(0)
    pending = 0
    for k in range(2, m):
        x = _mix64(
            (np.uint64(hashes[k - 2]) << np.uint64(32))
            ^ (np.uint64(hashes[k - 1]) * _MIX1)
            ^ np.uint64(hashes[k])
        )
        c0, x = _half_add(c0, x)  # x becomes the carry into the next bit of the counters
        c1, x = _half_add(c1, x)
        c2, x = _half_add(c2, x)
        c3, x = _half_add(c3, x)
        c4, x = _half_add(c4, x)
        c5, x = _half_add(c5, x)
        c6, x = _half_add(c6, x)
        c7 ^= x  # no overflow: at most 255 adds between spills
        pending += 1
        if pending == 255 or k == m - 1:
            for bit in range(64):
                s = np.uint64(bit)
                ones[bit] += np.int64(
                    ((c0 >> s) & _ONE64)
                    | (((c1 >> s) & _ONE64) << np.uint64(1))
                    | (((c2 >> s) & _ONE64) << np.uint64(2))
                    | (((c3 >> s) & _ONE64) << np.uint64(3))
                    | (((c4 >> s) & _ONE64) << np.uint64(4))
                    | (((c5 >> s) & _ONE64) << np.uint64(5))
                    | (((c6 >> s) & _ONE64) << np.uint64(6))
                    | (((c7 >> s) & _ONE64) << np.uint64(7))
                )
            c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = np.uint64(0)
            pending = 0
    shingles = max(m - 2, 0)
    out = np.uint64(0)
    for bit in range(64):
        if 2 * ones[bit] > shingles:
            out |= _ONE64 << np.uint64(bit)
    return out


@njit(cache=True)
def _terms(data, fold, max_tokens, query, key):
    """Everything a page needs in one call: (ids, counts, total tokens, SimHash, largest
    count, counts of ``query``'s ids). ``key``: the counting table's secret (``_slot``)."""
    hashes = _token_hashes(data, fold)
    ids, counts, top, tf = _bag(hashes, query, key)
    simhash = _shingle_simhash(hashes, max_tokens) if max_tokens > 0 else np.uint64(0)
    return ids, counts, hashes.size, simhash, top, tf


@njit(cache=True)
def _put_le(out, at, value, width):
    """``value``'s ``width`` low bytes into ``out[at:]``, little-endian."""
    for b in range(width):
        out[at + b] = np.uint8((value >> np.uint64(8 * b)) & np.uint64(0xFF))


@njit(cache=True)
def _page_terms(data, fold, max_tokens, query, key, out, tf):
    """``_terms`` with its results written out, not returned: the blob
    (``parsers.terms.BLOB_HEADER``, the ids as <u4, the counts in the narrowest of u1, <u2
    and <u4 that holds the largest) into ``out``, the counts of ``query``'s ids into ``tf``
    (as long as ``query``). Returns (the blob's size, total tokens, SimHash), or (-size, 0,
    0) where ``out`` is shorter than the blob, which is then not written.

    Why: a compiled module boxes each array it returns into a new numpy array, unpickling
    the array's type at every call (three for ``_terms``), and the caller then copied the
    arrays into the blob in Python. Here only integers come back."""
    hashes = _token_hashes(data, fold)
    ids, counts, top, found = _bag(hashes, query, key)
    simhash = _shingle_simhash(hashes, max_tokens) if max_tokens > 0 else np.uint64(0)
    n = ids.size
    width = 1 if top <= 0xFF else 2 if top <= 0xFFFF else 4
    flags = FLAG_U8_COUNTS if width == 1 else FLAG_U16_COUNTS if width == 2 else 0
    size = _HEADER_BYTES + n * (4 + width)
    if out.size < size:
        return -size, 0, np.uint64(0)
    out[0] = _MAGIC_BYTE0  # BLOB_HEADER: "<2sBBIQ"
    out[1] = _MAGIC_BYTE1
    out[2] = BLOB_VERSION
    out[3] = flags
    _put_le(out, 4, np.uint64(n), 4)
    _put_le(out, 8, np.uint64(hashes.size), 8)
    at = _HEADER_BYTES
    for j in range(n):
        _put_le(out, at, np.uint64(ids[j]), 4)
        at += 4
    for j in range(n):
        _put_le(out, at, np.uint64(counts[j]), width)
        at += width
    for q in range(query.size):
        tf[q] = found[q]
    return size, hashes.size, simhash


# ---------------------------------------------------------------------------------------------
# public API


def tokenize_bytes(data: bytes) -> TokenCounts:
    """Tokenize already UTF-8 encoded text (see the module docstring for what a token is)."""
    ids, counts, total, _, _, _ = _terms(
        np.frombuffer(data, dtype=np.uint8), _FOLD, 0, _NO_QUERY, _TABLE_KEY
    )
    return TokenCounts(ids=ids, counts=counts, length=int(total))


def tokenize(text: str) -> TokenCounts:
    """Distinct token ids of ``text`` with their counts and the total number of tokens."""
    return tokenize_bytes(_utf8(text))


def query_ids(query: str) -> npt.NDArray[np.uint32]:
    """Distinct token ids of a query (first-occurrence order), tokenized like documents.

    By ``reference_tokenize``, which the kernel equals: a query is a few words, and the crawl
    process then need not load the tokenizer kernel (~0.3 s) just for it."""
    return np.fromiter(query_token_ids(query), dtype=np.uint32)


def term_counts(tc: TokenCounts, ids: tuple[int, ...]) -> tuple[int, ...]:
    """How often each of ``ids`` occurs in the document ``tc`` (0 where it does not)."""
    out = []
    for term in ids:
        where = np.flatnonzero(tc.ids == term)
        out.append(int(tc.counts[where[0]]) if where.size else 0)
    return tuple(out)


def simhash64(ids: npt.NDArray[np.uint32], counts: npt.NDArray[np.uint32]) -> int:
    """64-bit SimHash of a bag of words: each id mixed to 64 bits, weighted by its count."""
    if ids.shape != counts.shape:
        raise ValueError(f"ids and counts differ in shape: {ids.shape} != {counts.shape}")
    return int(_simhash64(ids, counts))


def simhash_text(text: str, max_tokens: int = SIMHASH_TOKENS) -> int:
    """64-bit SimHash of ``text``'s word 3-grams (its first ``max_tokens`` tokens), unsigned.

    Texts of fewer than 3 tokens hash to 0."""
    return tokenize_and_simhash(text, max_tokens)[1]


def reference_simhash(text: str, max_tokens: int = SIMHASH_TOKENS) -> int:
    """Plain-Python SimHash the numba kernel must equal (``parsers.terms.shingle_simhash``
    of the first ``max_tokens`` token ids): each 3-gram of consecutive ids is mixed into 64
    bits; a bit of the result is set when more than half of the shingles set it."""
    return shingle_simhash([fnv1a32(t) for t in token_bytes(text)[:max_tokens]])


def tokenize_and_simhash(text: str, max_tokens: int = SIMHASH_TOKENS) -> tuple[TokenCounts, int]:
    """``(tokenize(text), simhash_text(text, max_tokens))`` in one pass over the text."""
    data = np.frombuffer(_utf8(text), dtype=np.uint8)
    ids, counts, total, simhash, _, _ = _terms(data, _FOLD, max_tokens, _NO_QUERY, _TABLE_KEY)
    return TokenCounts(ids=ids, counts=counts, length=int(total)), int(simhash)


def hamming64(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit hashes."""
    return ((a ^ b) & 0xFFFFFFFFFFFFFFFF).bit_count()


# ---------------------------------------------------------------------------------------------
# binary form (``parsers.terms.BLOB_HEADER``): header, ids (<u4 x n), counts (u1, <u2 or <u4
# x n: the narrowest that holds the largest count)

_MAGIC = BLOB_MAGIC
_VERSION = BLOB_VERSION
_FLAG_U16_COUNTS = FLAG_U16_COUNTS
_FLAG_U8_COUNTS = FLAG_U8_COUNTS
_HEADER = BLOB_HEADER


def encode_counts(tc: TokenCounts) -> bytes:
    """Compact little-endian form of ``tc`` for an SQLite BLOB (16-byte header + arrays)."""
    top = int(tc.counts.max()) if tc.ids.size else 0
    return _encode(tc.ids, tc.counts, tc.length, top)


def decode_counts(blob: bytes) -> TokenCounts:
    """Inverse of ``encode_counts`` (of any version of it: blobs stored with counts of 2 or
    4 bytes read as they were). Raises ValueError on a foreign or truncated blob."""
    if len(blob) < _HEADER.size:
        raise ValueError(f"token blob too short: {len(blob)} bytes")
    magic, version, flags, n, length = _HEADER.unpack_from(blob)
    if magic != _MAGIC or version != _VERSION:
        raise ValueError(f"not a token blob (magic {magic!r}, version {version})")
    counts_dtype = _COUNT_DTYPES.get(flags)
    if counts_dtype is None:
        raise ValueError(f"token blob with unknown flags {flags:#x}")
    count_bytes = np.dtype(counts_dtype).itemsize
    expected = _HEADER.size + n * (4 + count_bytes)
    if len(blob) != expected:
        raise ValueError(f"token blob is {len(blob)} bytes, expected {expected}")
    ids = np.frombuffer(blob, dtype="<u4", count=n, offset=_HEADER.size).astype(np.uint32)
    counts = np.frombuffer(blob, dtype=counts_dtype, count=n, offset=_HEADER.size + 4 * n)
    return TokenCounts(ids=ids, counts=counts.astype(np.uint32), length=int(length))
