"""The parse workers' heavy side: the HTML parser (lexbor) and the two kernels, loaded as
one: compiled ahead of time where that module is built (``parsers.aot``: no numba at all),
else from numba's cache the quick way (``parsers.kernel_cache``).

Imported through ``parsers.worker.kernels()`` only: in a worker and its fork server's preload,
and in the crawl process only when it parses pages itself (the pool not up yet, or gone).
The crawl process imports ``parsers.worker`` for the names of the functions it sends, never
this.
"""

from __future__ import annotations

import contextlib

from selectolax.lexbor import LexborHTMLParser

from parsers import html, native
from parsers.kernel_cache import quick_cache_loads
from parsers.links import Resolver
from parsers.page import Page, ParseFailure, ParseJob

__all__ = ["html", "parse_batch", "text_terms", "warm_up"]


def _loading() -> contextlib.AbstractContextManager[object]:
    """Where numba runs the kernels (no compiled module loads: ``native.backend``, which
    picks the implementation), its cache loaded the quick way; else nothing to do."""
    return contextlib.nullcontext() if native.backend() == "aot" else quick_cache_loads()


def parse_batch(jobs: list[ParseJob]) -> list[Page | ParseFailure]:
    """``parsers.html.parse_batch``."""
    return html.parse_batch(jobs)


def text_terms(text: str, query: tuple[int, ...]) -> tuple[bytes, int, int, tuple[int, ...]]:
    """``page_terms`` of ``text`` as a plain tuple (blob, token length, SimHash, query counts)."""
    terms = native.page_terms(text, query)
    return terms.blob, terms.length, terms.simhash, terms.query_tf


def warm_up() -> None:
    """Run lexbor and every kernel once, so that the first real batch pays for nothing."""
    with _loading():
        LexborHTMLParser("<p>warm</p>").css_first("p")
        native.resolve_all(Resolver("http://warm.up/a/"), ["../b#c", "/d"])
        native.page_terms("warm up the kernels", (1,))
        native.page_terms("warm up the kernels")
