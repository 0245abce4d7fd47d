"""Search for ``crawl serve``: BM25 over the stored token counts, kept warm across queries.

Owns: one ``CorpusIndex`` (``crawl rank``'s: the same kernels, the GPU when ``device`` says
so), opened read-only, used from one thread of its own (its SQLite connection and numba
state belong to that thread), reopened when it is older than ``REFRESH_S`` so that a
running crawl's new pages become findable; a query's deadline (``SearchTimeout``: the
request answers, the ranking finishes in the background, the next query waits for it);
and snippets: a window of a page's text around the first query word, with the words
marked, escaped first (``snippet``).
"""

from __future__ import annotations

import asyncio
import re
import time
from concurrent.futures import ThreadPoolExecutor
from html import escape

from crawler.relevance.ranking import CorpusIndex, RankedPage
from parsers.tokens import query_ids

REFRESH_S = 30.0
"""An index older than this is reopened before the next query (a crawl may be running)."""
SNIPPET_CHARS = 240
MAX_QUERY_CHARS = 500
"""Longer queries are refused (400)."""
_WORD = re.compile(r"\w+", re.UNICODE)


class SearchTimeout(Exception):
    """A query took longer than its deadline to rank."""


class Search:
    """The database's pages ranked against queries, one at a time, on a thread of its own."""

    def __init__(self, db: str, device: str) -> None:
        self._db, self._device = db, device
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="crawl-serve-search")
        self._index: CorpusIndex | None = None
        self._opened = 0.0

    def _warm(self) -> CorpusIndex:
        now = time.monotonic()
        if self._index is not None and now - self._opened > REFRESH_S:
            self._index.close()
            self._index = None
        if self._index is None:
            self._index = CorpusIndex(self._db, self._device, read_only=True)
            self._opened = now
        return self._index

    def _rank(self, query: str, top: int) -> tuple[list[RankedPage], str, int]:
        index = self._warm()
        return index.rank(query, top), index.device, index.pages

    async def rank(
        self, query: str, top: int, deadline_s: float
    ) -> tuple[list[RankedPage], str, int]:
        """The ``top`` best pages for ``query``, the device that ranked them and how many
        pages the index holds; ``SearchTimeout`` after ``deadline_s``."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._thread, self._rank, query, top)
        try:
            return await asyncio.wait_for(asyncio.shield(future), deadline_s)
        except TimeoutError:
            raise SearchTimeout(f"ranking took longer than {deadline_s:g} s") from None

    async def warm_up(self) -> None:
        """Open the index now (the first query is then as fast as the rest)."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self._warm)

    def close(self) -> None:
        def close_index() -> None:
            if self._index is not None:
                self._index.close()
                self._index = None

        self._thread.submit(close_index)
        self._thread.shutdown(wait=True, cancel_futures=True)


def query_words(query: str) -> set[str]:
    """The query's words as the index knows them (lower case; those that tokenize)."""
    return {word.lower() for word in _WORD.findall(query) if len(query_ids(word))}


def snippet(text: str, words: set[str]) -> str:
    """HTML: about ``SNIPPET_CHARS`` of ``text`` around its first query word, each query
    word wrapped in ``<mark>``; everything from the page escaped."""
    first = None
    for match in _WORD.finditer(text):
        if match.group().lower() in words:
            first = match.start()
            break
    start = 0 if first is None else max(0, first - SNIPPET_CHARS // 3)
    window = text[start : start + SNIPPET_CHARS]
    out = ["…" if start else ""]
    last = 0
    for match in _WORD.finditer(window):
        if match.group().lower() in words:
            out.append(escape(window[last : match.start()]))
            out.append(f"<mark>{escape(match.group())}</mark>")
            last = match.end()
    out.append(escape(window[last:]))
    if start + SNIPPET_CHARS < len(text):
        out.append("…")
    return "".join(out)
