"""The parse workers' heavy side: the HTML parser (lexbor) and the numba kernels, loaded as
one, from numba's cache the quick way (``parsers.kernel_cache``).

Imported through ``parsers.worker.kernels()`` only: in a worker and its fork server's preload,
and in the crawl process only when it parses pages itself (the pool not up yet, or gone).
The crawl process imports ``parsers.worker`` for the names of the functions it sends, never
this.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from parsers.kernel_cache import quick_cache_loads
from parsers.page import Page, ParseFailure, ParseJob

with quick_cache_loads():  # the kernels' machine code, without numba's compiler set-up
    from parsers import html
    from parsers.hrefs import resolve_all
    from parsers.links import Resolver
    from parsers.tokens import page_terms

__all__ = ["html", "parse_batch", "text_terms", "warm_up"]


def parse_batch(jobs: list[ParseJob]) -> list[Page | ParseFailure]:
    """``parsers.html.parse_batch``."""
    return html.parse_batch(jobs)


def text_terms(text: str, query: tuple[int, ...]) -> tuple[bytes, int, int, tuple[int, ...]]:
    """``page_terms`` of ``text`` as a plain tuple (blob, token length, SimHash, query counts)."""
    terms = page_terms(text, query)
    return terms.blob, terms.length, terms.simhash, terms.query_tf


def warm_up() -> None:
    """Run lexbor and every kernel once, so that the first real batch pays for nothing."""
    with quick_cache_loads():
        LexborHTMLParser("<p>warm</p>").css_first("p")
        resolve_all(Resolver("http://warm.up/a/"), ["../b#c", "/d"])
        page_terms("warm up the kernels", (1,))
        page_terms("warm up the kernels")
