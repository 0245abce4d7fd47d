"""Ranking stored pages against a query, without re-parsing: BM25 over stored token counts.

Owns the choice of how: a SQLite database's inverted index (``crawler.relevance.search``,
brought up to date first; a query reads its terms' postings only), or, for PostgreSQL, a
read-only file whose index is behind, and ``device="gpu"``, every token blob loaded into one
corpus (``TokenBatch``) ranked by ``crawler.relevance.scoring.Ranker`` (the fused CPU kernel,
or the CUDA one, the corpus kept on the device across queries). Both give the same scores and
order. Duplicates (``duplicate_of``) carry no tokens and never rank.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from crawler.relevance.scoring import Ranker, TokenBatch
from crawler.relevance.search import SearchIndex
from parsers.tokens import decode_counts, query_ids
from storage.export import read_tokens
from storage.factory import is_postgres

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RankedPage:
    """One result: the page, its title and its BM25 score (higher is more relevant)."""

    url: str
    title: str | None
    score: float


class CorpusIndex:
    """All token-bearing pages of a database, ready to rank many queries (``rank``)."""

    def __init__(self, db: str, device: str = "auto", read_only: bool = False) -> None:
        """``read_only``: never write the database (the index is used if it is up to
        date)."""
        self._search: SearchIndex | None = None
        if device != "gpu" and not is_postgres(db):
            try:
                self._search = SearchIndex(db, read_only)
            except LookupError as exc:
                log.info("%s; ranking the loaded corpus instead", exc)
            else:
                if self._search.indexed_now:
                    log.info("indexed %d pages", self._search.indexed_now)
                return
        rows = read_tokens(db)
        self._urls = [url for url, _, _ in rows]
        self._titles = [title for _, title, _ in rows]
        batch = TokenBatch.from_counts([decode_counts(blob) for _, _, blob in rows])
        self._ranker = Ranker(batch, device)

    @property
    def device(self) -> str:
        return "cpu (inverted index)" if self._search is not None else self._ranker.device

    @property
    def pages(self) -> int:
        return self._search.n_docs if self._search is not None else len(self._urls)

    def rank(self, query: str, top: int = 10) -> list[RankedPage]:
        """The ``top`` pages holding a query word, best first."""
        if self._search is not None:
            page_ids, found = self._search.rank(query_ids(query), top)
            known = self._search.pages(page_ids.tolist())
            return [RankedPage(*known[p], float(s))
                    for p, s in zip(page_ids.tolist(), found.tolist(), strict=True)]  # fmt: skip
        indices, scores = self._ranker.rank(query_ids(query), top)
        return [
            RankedPage(self._urls[i], self._titles[i], float(s))
            for i, s in zip(indices.tolist(), scores.tolist(), strict=True)
        ]


def rank(db: str, query: str, top: int = 10, device: str = "auto") -> list[RankedPage]:
    """Rank the stored pages of ``db`` against ``query``; the ``top`` best, best first."""
    return CorpusIndex(db, device).rank(query, top)
