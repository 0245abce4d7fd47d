"""Focus: the relevance of pages to a crawl's query, scored as pages arrive.

Owns: the query's token ids, the corpus statistics of the pages seen so far (N, average
length, the query terms' document frequencies, updated as pages arrive) and, on a GPU, the
batching of pages into scoring calls. ``await focus.score_terms(tf, length)`` returns a
page's BM25 score from its query terms' counts (``Page.query_tf``, counted in the parse
worker) and its length; ``await focus.score(tokens)`` does the same from an encoded token
blob. A page is scored after the statistics count it.

On the CPU the arithmetic left per page (a multiply-add per query word) is done in plain
Python (``crawler.relevance.bm25``), each page at once: the crawl process never loads numba or numpy
for it, and a batch would cost what its pages cost apart, plus a timer and a wait for each
(in the event loop). On a GPU (``device`` "gpu", or "auto" where CUDA works)
pages arriving together (within ``wait_s``) are scored together by the CUDA kernel; should the
GPU fail during the crawl (the device lost, its memory taken by another process), the rest is
scored on the CPU from the same statistics, with a warning, and the crawl goes on.

A page's score is relative to the statistics when it was scored: early pages see a small N.
``crawl rank`` re-scores the whole stored corpus with final statistics.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from types import ModuleType

from crawler.relevance.bm25 import TermScorer, driver_present
from parsers.terms import query_token_ids, token_bytes, utf8

log = logging.getLogger(__name__)


def _numeric() -> ModuleType:
    """``crawler.relevance.numeric``: numba and numpy, loaded only where they are used."""
    from crawler.relevance import numeric

    return numeric


def resolve_device(requested: str) -> str:
    """Resolve ``requested`` to "cpu" or "gpu" without importing numba where no CUDA device
    exists (``crawler.relevance.scoring.select_device`` decides, and raises, otherwise)."""
    if requested == "cpu" or (requested == "auto" and not driver_present()):
        return "cpu"
    return _numeric().select_device(requested)


class Focus:
    """Scores pages against ``query`` on ``device`` (``auto``, ``cpu`` or ``gpu``)."""

    def __init__(
        self, query: str, device: str = "auto", *, batch_max: int = 256, wait_s: float = 0.005
    ) -> None:
        self.query = query
        self.ids: tuple[int, ...] = query_token_ids(query)
        """The query's distinct token ids, for ``ParseJob.query_ids``: workers count them."""
        self.terms = tuple(sorted({t.lower() for t in query.split() if t.strip()}))
        self._tokens = tuple(dict.fromkeys(token_bytes(query)))
        """The query's distinct tokens, aligned with ``ids`` (``query_token_ids`` hashes
        them in this order), for ``count_here``."""
        self.device = resolve_device(device)
        scorer = _numeric().GpuScorer(self.ids) if self.device == "gpu" else TermScorer(self.ids)
        self._observe_and_score = scorer.observe_and_score
        self._direct = self.device == "cpu"
        """Score each page as it comes: on the CPU a batch costs what its pages cost apart,
        and waiting ``wait_s`` for one only delays the page (and its links)."""
        self._batch_max = batch_max
        self._wait_s = wait_s
        self._pending: list[tuple[tuple[int, ...], int, asyncio.Future[float]]] = []
        self._timer: asyncio.TimerHandle | None = None
        log.info("scoring on %s (query %r)", self.device, query)

    def count_here(self, text: str) -> tuple[tuple[int, ...], int]:
        """(how often each of ``ids`` occurs in ``text``, its tokens): ``Page.query_tf`` and
        ``token_length`` in plain Python (``parsers.terms``), for a page parsed in this
        process before a worker can count them (~0.2 ms for 6 KB of text); ``(0, ...), 0``
        at once for a text without any of the query's tokens in it (relevance 0 either way)."""
        low = utf8(text).lower()
        if not any(token in low for token in self._tokens):
            return (0,) * len(self._tokens), 0
        tokens = token_bytes(text)
        counts = Counter(tokens)
        return tuple(counts.get(token, 0) for token in self._tokens), len(tokens)

    async def score(self, tokens: bytes) -> float:
        """The BM25 score of a page from its encoded token counts."""
        tf, length = _numeric().blob_terms(tokens, self.ids)
        return await self.score_terms(tf, length)

    async def score_terms(self, tf: tuple[int, ...], length: int) -> float:
        """The BM25 score of a page of ``length`` tokens where query term ``self.ids[i]``
        occurs ``tf[i]`` times (``Page.query_tf``, counted in the parse worker).

        BM25 reads nothing of a document but its length and its query terms' counts, so the
        main process never decodes a page's token blob (~1,000 ids) to score it.
        """
        if self._direct:
            return float(self._observe_and_score(((tf, length),))[0])
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[float] = loop.create_future()
        self._pending.append((tf, length, waiter))
        if len(self._pending) >= self._batch_max:
            self._flush()
        elif self._timer is None:
            # Pages come back from the pool a few at a time: wait a little to score many at
            # once (one call: a GPU round trip pays off only for many pages).
            self._timer = loop.call_later(self._wait_s, self._flush)
        return await waiter

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            scores = self.score_now([(tf, length) for tf, length, _ in pending])
        except Exception as exc:  # handed to each waiter: a scoring failure fails the crawl
            for *_, waiter in pending:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        for (*_, waiter), value in zip(pending, scores, strict=True):
            if not waiter.done():
                waiter.set_result(float(value))

    def score_now(self, docs: Sequence[tuple[Sequence[int], int]]) -> list[float]:
        """Observe and score a batch of (query term counts, length) synchronously.

        The batch holds only the query terms' counts, which is all BM25 reads: the scores
        equal those of the documents' full token counts."""
        return self._observe_and_score(docs)
