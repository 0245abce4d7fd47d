"""Ranking stored pages against a query, without re-parsing: BM25 over stored token counts.

Owns the choice of how: a SQLite database's inverted index (``crawler.relevance.search``,
brought up to date first; a query reads its terms' postings only); while numba's cache lacks
the index's kernels (the first run after an install), a numpy scan of the stored blobs
(``crawler.relevance.scan``), the kernels compiled and the index built in the background
(``crawler.relevance.warmer``) for the next run; or, for PostgreSQL, a
read-only file whose index is behind, and ``device="gpu"``, every token blob loaded into one
corpus (``TokenBatch``) ranked by ``crawler.relevance.scoring.Ranker`` (the fused CPU kernel,
or the CUDA one, the corpus kept on the device across queries). All give the same scores and
order. Duplicates (``duplicate_of``) carry no tokens and never rank.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from crawler.errors import StorageError
from crawler.relevance.scan import ScanIndex
from crawler.relevance.scoring import Ranker, TokenBatch, select_device
from crawler.relevance.search import SearchIndex, kernels_cached
from crawler.relevance.search_gpu import DeviceSearch
from crawler.relevance.warm import start_warming, warming
from parsers.kernel_cache import quick_cache_loads
from parsers.tokens import decode_counts, query_ids
from storage.base import StoreError
from storage.export import read_tokens
from storage.factory import is_postgres

log = logging.getLogger(__name__)

RECHECK_S = 1.0
"""How often a scanning ``CorpusIndex`` looks whether the index is ready."""


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
        self._search: SearchIndex | ScanIndex | None = None
        self._on_gpu: DeviceSearch | None = None
        self._db, self._read_only, self._checked = db, read_only, time.monotonic()
        if device == "gpu" and self._index_on_gpu():
            return
        if device != "gpu":
            # a warmer indexes a SQLite file it may write; a DSN stays out of process lists
            own_file = not read_only and not is_postgres(db)
            if not kernels_cached() and start_warming(db if own_file else None):
                self._search = ScanIndex(db)
                log.info("scanning the stored pages while the index's kernels compile "
                         "in the background")  # fmt: skip
                return
            try:
                with quick_cache_loads():  # cached kernels, without numba's compiler set-up
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

    def _index_on_gpu(self) -> bool:
        """The index's postings on the GPU (``GPUUnavailableError`` where it cannot run);
        False if the index cannot open (read-only and behind)."""
        select_device("gpu")
        try:
            with quick_cache_loads():
                self._search = SearchIndex(self._db, self._read_only)
        except LookupError as exc:
            log.info("%s; ranking the loaded corpus instead", exc)
            return False
        self._on_gpu = DeviceSearch(self._search)
        return True

    def close(self) -> None:
        """Close the database connection (and, on PostgreSQL, its thread)."""
        if self._search is not None:
            self._search.close()

    def __enter__(self) -> CorpusIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def device(self) -> str:
        if isinstance(self._search, ScanIndex):
            return "cpu (scan; the index builds in the background)"
        if self._on_gpu is not None:
            return "gpu (inverted index)"
        return "cpu (inverted index)" if self._search is not None else self._ranker.device

    @property
    def pages(self) -> int:
        return self._search.n_docs if self._search is not None else len(self._urls)

    def rank_many(self, queries: list[str], top: int = 10) -> list[list[RankedPage]]:
        """``rank`` of each query; on the GPU, a batch at a time."""
        if self._on_gpu is None or self._search is None:
            return [self.rank(query, top) for query in queries]
        found = self._on_gpu.rank_many([query_ids(query) for query in queries], top)
        return [self._pages(page_ids, scores) for page_ids, scores in found]

    def _pages(
        self, page_ids: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]
    ) -> list[RankedPage]:
        assert self._search is not None
        known = self._search.pages(page_ids.tolist())
        return [RankedPage(*known[p], float(s))  # a page deleted since the index opened: gone
                for p, s in zip(page_ids.tolist(), scores.tolist(), strict=True) if p in known]  # fmt: skip

    def rank(self, query: str, top: int = 10) -> list[RankedPage]:
        """The ``top`` pages holding a query word, best first."""
        if self._on_gpu is not None:
            return self.rank_many([query], top)[0]
        if isinstance(self._search, ScanIndex):
            self._index_when_ready()
        if self._search is not None:
            with quick_cache_loads():
                page_ids, found = self._search.rank(query_ids(query), top)
            return self._pages(page_ids, found)
        indices, scores = self._ranker.rank(query_ids(query), top)
        return [
            RankedPage(self._urls[i], self._titles[i], float(s))
            for i, s in zip(indices.tolist(), scores.tolist(), strict=True)
        ]

    def _index_when_ready(self) -> None:
        """Once the background warmer is done (checked at most every ``RECHECK_S``), the
        index takes over from the scan."""
        now = time.monotonic()
        if now - self._checked < RECHECK_S:
            return
        self._checked = now
        if warming() or not kernels_cached():
            return
        try:
            with quick_cache_loads():
                index = SearchIndex(self._db, self._read_only)
        except (LookupError, StoreError, sqlite3.Error) as exc:  # keep scanning
            log.debug("%s: the search index did not open (%s); scanning", self._db, exc)
            return
        assert isinstance(self._search, ScanIndex)
        self._search.close()
        self._search = index


def rank(db: str, query: str, top: int = 10, device: str = "auto") -> list[RankedPage]:
    """Rank the stored pages of ``db`` against ``query``; the ``top`` best, best first.
    ``StorageError`` for a database that cannot be read (the library's own error)."""
    try:
        with CorpusIndex(db, device) as index:
            return index.rank(query, top)
    except StoreError as exc:
        raise StorageError(str(exc)) from exc
