"""The two kernels a parse worker runs for every page, as it calls them: ``page_terms`` (a
text's token blob, length, SimHash and query counts) and ``resolve_all`` (a page's hrefs).

Each runs in the module compiled ahead of time (``parsers.aot``) when one is built for this
source, else in numba's JIT (``parsers.tokens._page_terms``, ``parsers.hrefs._resolve_all``):
the same functions either way, so the same results. Without numba imported, a
worker starts in a fraction of the time and memory (``parsers.aot``).

This module imports numpy, not numba: ``kernel`` picks the implementation at the first call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from parsers import aot
from parsers.links import Resolver
from parsers.terms import SIMHASH_TOKENS
from parsers.terms import utf8 as _utf8
from parsers.token_blob import FOLD, NO_QUERY, TABLE_KEY

_kernels: dict[str, Callable[..., Any]] = {}
_backend: list[str] = []


def kernel(name: str) -> Callable[..., Any]:
    """``"page_terms"`` (``parsers.tokens._page_terms``) or ``"resolve_all"``
    (``parsers.hrefs._resolve_all``): the compiled module's where it loads, else numba's."""
    found = _kernels.get(name)
    if found is None:
        _bind()
        found = _kernels[name]
    return found


def backend() -> str:
    """``"aot"`` or ``"jit"``: which implementation the kernels run in, in this process."""
    kernel("page_terms")
    return _backend[0]


def _bind() -> None:
    module = aot.load()
    if module is not None:
        _kernels.update(page_terms=module.page_terms, resolve_all=module.resolve_all)
        _backend[:] = ["aot"]
        return
    from parsers import hrefs, tokens  # numba: only where no module is built

    _kernels.update(page_terms=tokens._page_terms, resolve_all=hrefs._resolve_all)
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
    wanted = _query_array(query)
    found = np.empty(wanted.size, dtype=np.uint32)
    # The blob takes 16 bytes and at most 8 a token, and a token takes 2 bytes of text at
    # least (a letter and a separator), so 4 a byte of text and a little more always hold it.
    room = 4 * data.size + 64
    out = _blob_room if room <= _blob_room.size else np.empty(room, dtype=np.uint8)
    terms = _kernels.get("page_terms") or kernel("page_terms")
    size, total, simhash = terms(data, FOLD, int(max_tokens), wanted, TABLE_KEY, out, found)
    if size < 0:
        raise RuntimeError(f"a token blob of {-size} bytes outgrew its {out.size}")
    blob = out[:size].tobytes()
    return PageTerms(blob, int(total), int(simhash), tuple(found.tolist()) if query else ())


_blob_room = np.empty(1 << 18, dtype=np.uint8)
"""Where ``page_terms`` has the kernel write a blob of a text up to ~64 KB (a larger one
gets room of its own): one buffer for the process, copied out at once."""

_queries: dict[tuple[int, ...], npt.NDArray[np.uint32]] = {}


def _query_array(query: tuple[int, ...]) -> npt.NDArray[np.uint32]:
    """``query``'s ids as the kernel reads them; a crawl has one query, made once."""
    if not query:
        return NO_QUERY
    found = _queries.get(query)
    if found is None:
        if len(_queries) >= 16:
            _queries.clear()
        found = _queries[query] = np.array(query, dtype=np.uint32)
    return found


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
