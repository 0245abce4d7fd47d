"""Focus's numeric side: the CUDA scorer's batches and token blobs, with numpy and numba.

Imported by ``crawler.relevance.focus`` only where a GPU may score or a token blob is read,
so that a CPU crawl with a query never loads numba or numpy in the crawl process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from crawler.relevance.bm25 import TermScorer
from crawler.relevance.scoring import BM25Stats, QueryScorer, TokenBatch, select_device
from parsers.tokens import decode_counts, term_counts

log = logging.getLogger("crawler.relevance.focus")

__all__ = ["GpuScorer", "blob_terms", "select_device"]


def blob_terms(tokens: bytes, ids: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """The counts of the query terms ``ids`` in an encoded token blob, and its length."""
    counts = decode_counts(tokens)
    return term_counts(counts, ids), counts.length


class GpuScorer:
    """The CUDA kernel's path: each batch of query-term counts goes to it as a ``TokenBatch``."""

    def __init__(self, ids: tuple[int, ...]) -> None:
        self.ids = ids
        self.stats: BM25Stats = BM25Stats(np.array(ids, dtype=np.uint32))
        self.scorer: QueryScorer = QueryScorer(ids, "gpu")
        self.cpu: TermScorer | None = None
        """Set when the GPU failed during the crawl: the rest is scored on the CPU."""

    def observe_and_score(self, docs: Sequence[tuple[Sequence[int], int]]) -> list[float]:
        if self.cpu is not None:
            return self.cpu.observe_and_score(docs)
        batch = self._batch(docs)
        self.stats.observe(batch)
        try:
            return [float(s) for s in self.scorer.score(batch, self.stats)]
        except Exception as exc:  # the device lost, out of memory (another process took it)...
            log.warning("scoring on the CPU from now on: the GPU failed (%s: %s)",
                        type(exc).__name__, (str(exc).strip().splitlines() or [""])[0])  # fmt: skip
            self.cpu = self._cpu_from_stats()
            return self.cpu.score(docs)

    def _cpu_from_stats(self) -> TermScorer:
        """A CPU scorer that goes on from the statistics the GPU path has gathered."""
        cpu = TermScorer(self.ids)
        position = {int(t): i for i, t in enumerate(self.stats.query_ids.tolist())}
        cpu.df = [int(self.stats.df[position[t]]) for t in self.ids]
        cpu.n_docs, cpu.total_length = self.stats.n_docs, self.stats.total_length
        return cpu

    def _batch(self, docs: Sequence[tuple[Sequence[int], int]]) -> TokenBatch:
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
