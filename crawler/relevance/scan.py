"""BM25 by scanning every stored token blob with numpy (``parsers.token_scan``): the answer
to a query while numba's cache lacks the search kernels, without compiling anything.

The first ``crawl rank`` after an install would otherwise spend seconds compiling the
index's kernels before its first answer; ``ScanIndex`` answers from the blobs in about the
time it takes SQLite to read them, and ``crawler.relevance.warmer`` compiles the kernels
(and builds the index) in a background process for the runs after it.

The same Okapi BM25 as ``crawler.relevance.search`` (k1 1.2, b 0.75, Lucene idf, float64;
N and average length over the pages with tokens), the same float operations in the same
order (a document's parts summed in its own token order, from 0.0), so the scores equal
the index's to the last bit, and the same top-k and tie order (lower page id).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from crawler.relevance.bm25 import K1, B
from crawler.relevance.bm25 import avgdl as average_length
from crawler.relevance.search import PageScores
from parsers.token_scan import TokenScan
from storage.base import StoreError
from storage.search import open_index_tables

F64Array = npt.NDArray[np.float64]
I64Array = npt.NDArray[np.int64]


class ScanIndex(PageScores):
    """Every token-bearing page of one crawl database, held for scanning."""

    indexed_now = 0

    def __init__(self, path: str) -> None:
        self._tables = open_index_tables(path, read_only=True)
        try:
            rows = self._tables.token_rows()
        except BaseException:
            self._tables.close()
            raise
        self.page_ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        try:
            self._scan = TokenScan.of([row[1] for row in rows])
        except ValueError as exc:
            self._tables.close()
            raise StoreError(f"{path}: cannot rank pages.tokens: {exc}") from exc
        del rows
        self.n_docs = self._scan.n_docs
        self._avgdl = average_length(self.n_docs, int(self._scan.lengths.sum()))

    def close(self) -> None:
        self._tables.close()

    def scores_of(self, query_ids: npt.ArrayLike) -> tuple[I64Array, F64Array]:
        """(document indexes holding a query term, ascending; their BM25 scores)."""
        q = np.unique(np.asarray(query_ids, dtype=np.uint32))
        docs, term, tf = self._scan.hits(q)
        if not docs.size:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        df = np.bincount(term, minlength=q.size).astype(np.int64)
        idf = np.log1p((self.n_docs - df + 0.5) / (df + 0.5))
        tfs = tf * 1.0
        norm = K1 * (1.0 - B + B * self._scan.lengths[docs] / self._avgdl)
        parts = idf[term] * tfs * (K1 + 1.0) / (tfs + norm)
        first = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
        group = np.cumsum(np.r_[False, docs[1:] != docs[:-1]])
        rank = np.arange(docs.size) - first[group]
        table = np.zeros((first.size, int(rank.max()) + 1), dtype=np.float64)
        table[group, rank] = parts
        scores = np.zeros(first.size, dtype=np.float64)
        for column in range(table.shape[1]):  # one by one, in token order, as the kernels
            scores += table[:, column]
        return docs[first], scores
