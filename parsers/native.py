"""The two kernels a parse worker runs for every page, as it calls them: ``page_terms`` (a
text's token blob, length, SimHash and query counts) and ``resolve_all`` (a page's hrefs).

Each runs in the module compiled ahead of time (``parsers.aot``) when one is built for this
source, else in numba's JIT (``parsers.tokens._terms``, ``parsers.hrefs._resolve_all``):
the same functions either way, so the same results. Without numba imported, a
worker starts in a fraction of the time and memory (``parsers.aot``).

This module imports numpy, not numba: ``kernel`` picks the implementation at the first call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from parsers import aot
from parsers.links import Resolver
from parsers.terms import SIMHASH_TOKENS
from parsers.terms import utf8 as _utf8
from parsers.token_blob import FOLD, NO_QUERY, TABLE_KEY, encode_blob

_kernels: dict[str, Callable[..., Any]] = {}
_backend: list[str] = []


def kernel(name: str) -> Callable[..., Any]:
    """``"terms"`` (``parsers.tokens._terms``) or ``"resolve_all"``
    (``parsers.hrefs._resolve_all``): the compiled module's where it loads, else numba's."""
    found = _kernels.get(name)
    if found is None:
        _bind()
        found = _kernels[name]
    return found


def backend() -> str:
    """``"aot"`` or ``"jit"``: which implementation the kernels run in, in this process."""
    kernel("terms")
    return _backend[0]


def _bind() -> None:
    module = aot.load()
    if module is not None:
        _kernels.update(terms=module.terms, resolve_all=module.resolve_all)
        _backend[:] = ["aot"]
        return
    from parsers import hrefs, tokens  # numba: only where no module is built

    _kernels.update(terms=tokens._terms, resolve_all=hrefs._resolve_all)
    _backend[:] = ["jit"]


class PageTerms(NamedTuple):
    """What a parsed page keeps of its text's tokens (``page_terms``)."""

    blob: bytes
    """``encode_counts`` of the text's bag of words."""
    length: int
    """Tokens in the text, with repeats."""
    simhash: int
    """``simhash_text`` of the text."""
    query_tf: tuple[int, ...]
    """How often each of the query's ids occurs (``term_counts``)."""


def page_terms(
    text: str,
    query: tuple[int, ...] = (),
    max_tokens: int = SIMHASH_TOKENS,
    *,
    utf8: bytes | None = None,
) -> PageTerms:
    """``encode_counts(tokenize(text))``, ``simhash_text``, and ``term_counts`` of the
    ``query`` ids, from one kernel call: what a parse worker computes for every page.
    ``utf8``: ``text`` encoded already (``parsers.terms.utf8``), where the caller has it."""
    data = np.frombuffer(_utf8(text) if utf8 is None else utf8, dtype=np.uint8)
    wanted = np.array(query, dtype=np.uint32) if query else NO_QUERY
    terms = _kernels.get("terms") or kernel("terms")
    ids, counts, total, simhash, top, tf = terms(data, FOLD, int(max_tokens), wanted, TABLE_KEY)
    blob = encode_blob(ids, counts, int(total), int(top))
    return PageTerms(blob, int(total), int(simhash), tuple(tf.tolist()))


def resolve_all(resolver: Resolver, hrefs: list[str]) -> list[str | None]:
    """``[resolver.resolve(href.strip()) for href in hrefs]``, mostly in one kernel call."""
    origin = resolver.origin
    if origin is None or not hrefs:
        return [resolver.resolve(href.strip()) for href in hrefs]
    joined = "\n".join(hrefs)
    if joined.count("\n") != len(hrefs) - 1:  # an href holds a newline
        return [resolver.resolve(href.strip()) for href in hrefs]
    directory = resolver.directory
    context = np.frombuffer(f"{origin}{directory}{resolver.base}".encode("ascii"), np.uint8)
    buf = np.frombuffer(joined.encode("utf-8", "surrogatepass"), np.uint8)
    resolve = _kernels.get("resolve_all") or kernel("resolve_all")
    out, fixes = resolve(buf, len(hrefs), context, len(origin), len(directory))
    urls: list[str | None] = out.tobytes().decode("ascii").split("\n")  # type: ignore[assignment]
    if fixes.size:
        for k in fixes.tolist():
            if k >= 0:
                urls[k] = resolver.resolve(hrefs[k].strip())
            else:
                urls[-k - 1] = None
    return urls
