"""The definition of a token and of its id in plain Python (no numpy, no numba).

``parsers.tokens`` compiles the same definition into numba kernels for whole documents and
checks them against ``reference_tokenize`` here. This module is for the few words of a
query: the crawl process tokenizes its ``--query`` with it and so never imports numba or
numpy for a crawl on the CPU (~0.5 s of CPU at every start).

- A token is a maximal run of bytes of the text's UTF-8 encoding (``surrogatepass``) that
  are ASCII letters, ASCII digits or any byte >= 0x80. ASCII letters are lower-cased.
- A token's id is FNV-1a 32 of its lower-cased bytes.

``plain_terms`` is a parse worker's ``page_terms`` in plain Python, byte for byte: for the
crawl's first pages, parsed in the crawl process before a worker is up, so that a short
crawl need not wait for the workers' numba start (~0.2-0.4 s).
"""

from __future__ import annotations

import re
import struct
import sys
from array import array

_TOKEN_RE = re.compile(rb"[a-z0-9\x80-\xff]+")

# The token blob's binary form (``parsers.tokens.encode_counts``): a header, the ids (<u4 x n),
# the counts (u1, <u2 or <u4 x n: the narrowest that holds the largest count).
BLOB_MAGIC = b"TK"
BLOB_VERSION = 1
FLAG_U16_COUNTS = 1
FLAG_U8_COUNTS = 2
"""Counts of one byte each: most pages' largest count is under 256 (the benchmark site's
blob 7.6 -> 6.3 KB a page, which every page's trip to the store and its row carry)."""
BLOB_HEADER = struct.Struct("<2sBBIQ")  # magic, version, flags, n distinct, total tokens
SIMHASH_TOKENS = 4096
"""The tokens a page's SimHash reads (its first)."""
_MASK64 = 0xFFFFFFFFFFFFFFFF
_U32 = "I" if array("I").itemsize == 4 else "L"


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def fnv1a32(data: bytes) -> int:
    h = 2166136261
    for c in data:
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def token_bytes(text: str) -> list[bytes]:
    """The tokens of ``text``, lower-cased, in order (with repeats)."""
    return _TOKEN_RE.findall(utf8(text).lower())


def reference_tokenize(text: str) -> dict[int, int]:
    """Plain-Python tokenizer the numba kernel must equal: {token id: count}, in order of
    first occurrence."""
    out: dict[int, int] = {}
    for token in token_bytes(text):
        h = fnv1a32(token)
        out[h] = out.get(h, 0) + 1
    return out


def token_id(term: str) -> int:
    """Id of one token. Raises ValueError unless ``term`` is exactly one token."""
    tokens = token_bytes(term)
    if len(tokens) != 1:
        raise ValueError(f"expected exactly one token, got {len(tokens)} in {term!r}")
    return fnv1a32(tokens[0])


def query_token_ids(query: str) -> tuple[int, ...]:
    """Distinct token ids of a query, in order of first occurrence."""
    return tuple(reference_tokenize(query))


def mix64(x: int) -> int:
    """splitmix64's finaliser (64-bit wrap-around): a 32-bit id spread over 64 bits."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def shingle_simhash(ids: list[int]) -> int:
    """SimHash of the word 3-grams of ``ids`` (a page's first token ids): each shingle
    (a, b, c) mixed to 64 bits; a bit is set when more than half of the shingles set it;
    0 for fewer than 3 ids. The per-bit tallies are counted in C: every shingle's 64 bits
    as one string of digits, read a column at a time."""
    shingles = [
        mix64(((a << 32) ^ ((b * 0xBF58476D1CE4E5B9) & _MASK64) ^ c) & _MASK64)
        for a, b, c in zip(ids, ids[1:], ids[2:], strict=False)  # the windows of 3
    ]
    digits = "".join([format(x, "064b") for x in shingles])
    out = 0
    for bit in range(64):
        if 2 * digits[63 - bit :: 64].count("1") > len(shingles):
            out |= 1 << bit
    return out


def plain_terms(text: str, query: tuple[int, ...] = ()) -> tuple[bytes, int, int, tuple[int, ...]]:
    """``parsers.tokens.page_terms(text, query)`` as ``parsers.worker.text_terms`` returns
    it, in plain Python: (the token blob, tokens with repeats, SimHash, the counts of the
    ``query`` ids), equal to the kernel's byte for byte. Linear in the text, and some fifty
    times the kernel's time once the kernel is loaded: for short texts only."""
    counts: dict[int, int] = {}
    ids_in_order: list[int] = []
    known: dict[bytes, int] = {}
    for token in token_bytes(text):
        h = known.get(token)
        if h is None:
            h = known[token] = fnv1a32(token)
        if len(ids_in_order) < SIMHASH_TOKENS:
            ids_in_order.append(h)
        counts[h] = counts.get(h, 0) + 1
    length = sum(counts.values())
    top = max(counts.values(), default=0)
    flags, code = (
        (FLAG_U8_COUNTS, "B")
        if top <= 0xFF
        else (FLAG_U16_COUNTS, "H")
        if top <= 0xFFFF
        else (0, _U32)
    )
    ids = array(_U32, counts)
    narrow = array(code, counts.values())
    if sys.byteorder != "little":
        ids.byteswap()
        narrow.byteswap()
    header = BLOB_HEADER.pack(BLOB_MAGIC, BLOB_VERSION, flags, len(counts), length)
    blob = b"".join((header, ids.tobytes(), narrow.tobytes()))
    return blob, length, shingle_simhash(ids_in_order), tuple(counts.get(q, 0) for q in query)
