"""The definition of a token and of its id in plain Python (no numpy, no numba).

``parsers.tokens`` compiles the same definition into numba kernels for whole documents and
checks them against ``reference_tokenize`` here. This module is for the few words of a
query: the crawl process tokenizes its ``--query`` with it and so never imports numba or
numpy for a crawl on the CPU (~0.5 s of CPU at every start).

- A token is a maximal run of bytes of the text's UTF-8 encoding (``surrogatepass``) that
  are ASCII letters, ASCII digits or any byte >= 0x80. ASCII letters are lower-cased.
- A token's id is FNV-1a 32 of its lower-cased bytes.
"""

from __future__ import annotations

import re

_TOKEN_RE = re.compile(rb"[a-z0-9\x80-\xff]+")


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
