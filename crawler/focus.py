"""Focus: the relevance of pages to a crawl's query, scored in batches with the BM25 kernels.

Owns: the query's token ids, the corpus statistics of the pages seen so far (N, average
length, the query terms' document frequencies, updated as pages arrive) and the batching of
pages into kernel calls. ``await focus.score_terms(tf, length)`` returns a page's BM25 score
from its query terms' counts (``Page.query_tf``, counted in the parse worker) and its length;
``await focus.score(tokens)`` does the same from an encoded token blob. Pages arriving
together share one call of the BM25 kernel (the serial twin of the fused CPU kernel, or the
CUDA one).

A page's score is relative to the statistics when it was scored: early pages see a small N.
``crawl rank`` re-scores the whole stored corpus with final statistics.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np

from crawler.scoring import BM25Stats, QueryScorer, TokenBatch, warm_up_serial
from parsers.tokens import decode_counts, query_ids, term_counts

log = logging.getLogger(__name__)


class Focus:
    """Scores pages against ``query`` on ``device`` (``auto``, ``cpu`` or ``gpu``)."""

    def __init__(
        self, query: str, device: str = "auto", *, batch_max: int = 256, wait_s: float = 0.005
    ) -> None:
        self.query = query
        self.query_ids = query_ids(query)
        self.ids: tuple[int, ...] = tuple(int(i) for i in self.query_ids)
        """The query's token ids, for ``ParseJob.query_ids``: workers count them."""
        self.terms = tuple(sorted({t.lower() for t in query.split() if t.strip()}))
        self._scorer = QueryScorer(self.query_ids, device)
        self.device = self._scorer.device
        if self.device == "cpu":
            # The kernel loads from numba's cache (~0.2 s) while the crawl starts (robots.txt,
            # the first pages, the parse workers' start), not on the loop at the first score.
            threading.Thread(target=warm_up_serial, name="bm25-warm-up", daemon=True).start()
        self.stats = BM25Stats(self.query_ids)
        self._batch_max = batch_max
        self._wait_s = wait_s
        self._pending: list[tuple[tuple[int, ...], int, asyncio.Future[float]]] = []
        self._timer: asyncio.TimerHandle | None = None
        log.info("scoring on %s (query %r)", self.device, query)

    async def score(self, tokens: bytes) -> float:
        """The BM25 score of a page from its encoded token counts."""
        counts = decode_counts(tokens)
        return await self.score_terms(term_counts(counts, self.ids), counts.length)

    async def score_terms(self, tf: tuple[int, ...], length: int) -> float:
        """The BM25 score of a page of ``length`` tokens where query term ``self.ids[i]``
        occurs ``tf[i]`` times (``Page.query_tf``, counted in the parse worker).

        BM25 reads nothing of a document but its length and its query terms' counts, so the
        main process never decodes a page's token blob (~1,000 ids) to score it.
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[float] = loop.create_future()
        self._pending.append((tf, length, waiter))
        if len(self._pending) >= self._batch_max:
            self._flush()
        elif self._timer is None:
            # Pages come back from the pool a few at a time: wait a little to score many at
            # once (one kernel call), which the fused kernel needs to pay off.
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
        except Exception as exc:  # handed to each waiter: a kernel failure fails the crawl
            for *_, waiter in pending:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        for (*_, waiter), value in zip(pending, scores, strict=True):
            if not waiter.done():
                waiter.set_result(float(value))

    def score_now(self, docs: list[tuple[tuple[int, ...], int]]) -> np.ndarray:
        """Observe and score a batch of (query term counts, length) synchronously (the kernel
        call itself).

        The batch holds only the query terms' entries, which is all the kernel reads: the
        scores equal those of the documents' full token counts. During a crawl the parse
        workers have the cores: the serial twin of the fused kernel runs here, so numba's
        thread pool is never started in the crawl (``crawl rank`` uses the parallel kernel
        and all cores).
        """
        batch = self._terms_batch(docs)
        self.stats.observe(batch)
        return self._scorer.score(batch, self.stats, parallel=False)

    def _terms_batch(self, docs: list[tuple[tuple[int, ...], int]]) -> TokenBatch:
        ids: list[int] = []
        counts: list[int] = []
        offsets = [0]
        for tf, _ in docs:
            for term, count in zip(self.ids, tf, strict=True):
                if count:
                    ids.append(term)
                    counts.append(count)
            offsets.append(len(ids))
        return TokenBatch(
            np.array(ids, dtype=np.uint32),
            np.array(counts, dtype=np.uint32),
            np.array(offsets, dtype=np.int64),
            np.array([length for _, length in docs], dtype=np.int64),
        )
