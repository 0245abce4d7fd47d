"""Ranking stored pages against a query, without re-parsing: BM25 over stored token counts.

Owns: loading a database's token blobs into one corpus (``TokenBatch``) and ranking it with
``crawler.relevance.scoring.Ranker`` (the fused CPU kernel, or the CUDA one, where the corpus stays on
the device across queries). Duplicates (``duplicate_of``) carry no tokens and never rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawler.relevance.scoring import Ranker, TokenBatch
from parsers.tokens import decode_counts, query_ids
from storage.export import read_tokens


@dataclass(frozen=True, slots=True)
class RankedPage:
    """One result: the page, its title and its BM25 score (higher is more relevant)."""

    url: str
    title: str | None
    score: float


class CorpusIndex:
    """All token-bearing pages of a database, ready to rank many queries (``rank``)."""

    def __init__(self, db: str, device: str = "auto") -> None:
        rows = read_tokens(db)
        self._urls = [url for url, _, _ in rows]
        self._titles = [title for _, title, _ in rows]
        batch = TokenBatch.from_counts([decode_counts(blob) for _, _, blob in rows])
        self._ranker = Ranker(batch, device)

    @property
    def device(self) -> str:
        return self._ranker.device

    @property
    def pages(self) -> int:
        return len(self._urls)

    def rank(self, query: str, top: int = 10) -> list[RankedPage]:
        """The ``top`` pages holding a query word, best first."""
        indices, scores = self._ranker.rank(query_ids(query), top)
        return [
            RankedPage(self._urls[i], self._titles[i], float(s))
            for i, s in zip(indices.tolist(), scores.tolist(), strict=True)
        ]


def rank(db: str, query: str, top: int = 10, device: str = "auto") -> list[RankedPage]:
    """Rank the stored pages of ``db`` against ``query``; the ``top`` best, best first."""
    return CorpusIndex(db, device).rank(query, top)
