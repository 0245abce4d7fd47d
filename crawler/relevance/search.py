"""BM25 over the persistent inverted index (``storage.segments``, on SQLite or PostgreSQL): a
query touches only its terms' postings, never the whole corpus.

``SearchIndex(path)`` brings the index up to date (``catch_up``: the pages written since it
last did), then loads each segment's small arrays: which pages are live where, their
lengths, the term dictionaries. A query reads its terms' runs of postings by byte range
(all of them in one read: one round trip on PostgreSQL), decodes them (``parsers.postings.decode``), keeping live documents only, and scores them
document by document (``_score``, a merge of the terms' runs): the same Okapi BM25 as
``crawler.relevance.scoring`` (k1 1.2, b 0.75, Lucene idf, float64; N, average length and
document frequencies over the live pages), the same top-k and tie order (lower page id).

No dynamic pruning (MaxScore/WAND): every posting of a query term is scored, which is
already 14-50x faster than bm25s on one thread here. The GPU path is ``search_gpu``.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit
from numba.core.registry import cpu_target

from crawler.relevance.bm25 import K1, B
from crawler.relevance.bm25 import avgdl as average_length
from crawler.relevance.scoring import _top_k
from parsers import postings
from parsers.postings import decode
from storage.search import open_index_tables
from storage.segments import IndexTables

log = logging.getLogger(__name__)

F64Array = npt.NDArray[np.float64]
I64Array = npt.NDArray[np.int64]


@njit(cache=True)
def _score(docs, tfs, places, bounds, idf, lengths, k1, b, avgdl, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Score the documents of the query terms' runs (term ``t`` owns
    ``docs[bounds[t]:bounds[t+1]]``, documents ascending), merged document by document; a
    document's parts are summed in its own token order (``places``), as
    ``crawler.relevance.scoring._doc_score`` sums them, so the two agree to the last bit.
    Writes documents ascending and their scores; returns how many."""
    k = bounds.size - 1
    heads = bounds[:-1].copy()
    parts = np.empty(k, dtype=np.float64)
    order = np.empty(k, dtype=np.int64)
    n_out = 0
    while True:
        best = -1
        for t in range(k):
            if heads[t] < bounds[t + 1]:
                d = docs[heads[t]]
                if best < 0 or d < best:
                    best = d
        if best < 0:
            return n_out
        norm = k1 * (1.0 - b + b * lengths[best] / avgdl)
        m = 0
        for t in range(k):
            j = heads[t]
            if j < bounds[t + 1] and docs[j] == best:
                tf = tfs[j] * 1.0
                part = idf[t] * tf * (k1 + 1.0) / (tf + norm)
                i = m
                while i > 0 and order[i - 1] > places[j]:
                    parts[i] = parts[i - 1]
                    order[i] = order[i - 1]
                    i -= 1
                parts[i] = part
                order[i] = places[j]
                m += 1
                heads[t] = j + 1
        score = 0.0
        for i in range(m):
            score += parts[i]
        out_docs[n_out] = best
        out_scores[n_out] = score
        n_out += 1


def _kernels() -> list[Any]:
    return [postings._unpack, postings._sizes, postings._write, postings.decode, _score]


def kernels_cached() -> bool:
    """Whether numba's cache holds machine code of every search kernel, for this CPU and
    this source: read from numba's cache index files (about 10 ms), nothing compiled.
    Private numba API, so defensive: where its names are missing (another numba version),
    the kernels count as cached and numba compiles them as it always would."""
    try:
        magic = cpu_target.target_context.codegen().magic_tuple()
        for kernel in _kernels():
            code = hashlib.sha256(kernel.py_func.__code__.co_code).hexdigest()
            index = kernel._cache._cache_file._load_index()
            if not any(key[1] == magic and key[2][0] == code for key in index):
                return False
    except Exception:  # numba's internals changed: let numba decide, as it always did
        log.debug("cannot read numba's cache index; assuming the kernels are cached",
                  exc_info=True)  # fmt: skip
        return True
    return True


class PageScores:
    """What ranks a database's pages by their ``scores_of`` a query: its ``page_ids``
    (document index -> page id, ascending) and the database's open ``_tables``."""

    page_ids: I64Array
    _tables: IndexTables

    def scores_of(self, query_ids: npt.ArrayLike) -> tuple[I64Array, F64Array]:
        raise NotImplementedError

    def rank(self, query_ids: npt.ArrayLike, top: int = 10) -> tuple[I64Array, F64Array]:
        """The ``top`` best pages (page ids) and their scores, best first."""
        touched, scores = self.scores_of(query_ids)
        local, best = _top_k(scores, top)
        return self.page_ids[touched[local]], best

    def pages(self, page_ids: list[int]) -> dict[int, tuple[str, str | None]]:
        """(url, title) of each page id."""
        return self._tables.titles_urls(page_ids)


class SearchIndex(PageScores):
    """The index of one crawl database (a SQLite file or a PostgreSQL DSN), kept open
    across queries."""

    def __init__(self, db: str, read_only: bool = False) -> None:
        """``read_only``: never write (``crawl serve``): an index that is behind is then
        a ``LookupError``, as one that is missing."""
        self._tables = open_index_tables(db, read_only)
        try:
            self.indexed_now = 0
            if not self._tables.has_index():
                raise LookupError(f"{db}: no search index (schema before version 3, read-only)")
            if self._tables.writable:
                self.indexed_now = self._tables.catch_up()
            elif self._tables.pending_count():
                raise LookupError(f"{db}: the search index is behind and the database is "
                                  "read-only")  # fmt: skip
            self._segments = self._tables.load()
            self._settle()
        except BaseException:
            self._tables.close()
            raise

    def _settle(self) -> None:
        """Which documents are live where: the newest segment naming a page decides."""
        newest: dict[int, int] = {}
        for position, segment in enumerate(self._segments):
            for page_id in segment.removed.tolist():
                newest[page_id] = -1 - position  # gone as of this segment
            for page_id in segment.docs.tolist():
                newest[page_id] = position
        live_pages = np.array(sorted(p for p, at in newest.items() if at >= 0), dtype=np.int64)
        self.page_ids = live_pages
        """Global document index -> page id, ascending (ties rank to the lower page id)."""
        self.lengths = np.zeros(live_pages.size, dtype=np.int64)
        self._maps: list[I64Array] = []
        for position, segment in enumerate(self._segments):
            where = np.searchsorted(live_pages, segment.docs)
            keep = np.array([newest[p] == position for p in segment.docs.tolist()], dtype=bool)
            mapping = np.where(keep, where, -1).astype(np.int64)
            self._maps.append(mapping)
            self.lengths[mapping[keep]] = segment.lengths[keep]
        self.n_docs = int(live_pages.size)
        self._avgdl = average_length(self.n_docs, int(self.lengths.sum()))

    def close(self) -> None:
        self._tables.close()

    def scores_of(self, query_ids: npt.ArrayLike) -> tuple[I64Array, F64Array]:
        """(global document indexes holding a query term, their BM25 scores)."""
        q = np.unique(np.asarray(query_ids, dtype=np.uint32))
        try:
            runs = self._runs(q)
        except LookupError:  # another process merged segments since they were loaded
            self._segments = self._tables.load()
            self._settle()
            runs = self._runs(q)
        df = np.zeros(q.size, dtype=np.int64)
        all_docs: list[I64Array] = []
        all_tfs: list[I64Array] = []
        all_places: list[I64Array] = []
        bounds = [0]
        for k, term_runs in enumerate(runs):
            if len(term_runs) == 1:
                docs, tfs, places = term_runs[0]
            elif term_runs:  # runs of several segments: one, documents ascending
                docs, tfs, places = (np.concatenate([r[i] for r in term_runs]) for i in range(3))
                by_doc = np.argsort(docs, kind="stable")
                docs, tfs, places = docs[by_doc], tfs[by_doc], places[by_doc]
            else:
                docs = tfs = places = np.empty(0, dtype=np.int64)
            df[k] = docs.size
            all_docs.append(docs)
            all_tfs.append(tfs)
            all_places.append(places)
            bounds.append(bounds[-1] + docs.size)
        if not bounds[-1]:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        idf = np.log1p((self.n_docs - df + 0.5) / (df + 0.5))
        out_docs = np.empty(bounds[-1], dtype=np.int64)
        out_scores = np.empty(bounds[-1], dtype=np.float64)
        n = _score(np.concatenate(all_docs), np.concatenate(all_tfs), np.concatenate(all_places),
                   np.asarray(bounds, dtype=np.int64), idf, self.lengths, K1, B, self._avgdl,
                   out_docs, out_scores)  # fmt: skip
        return out_docs[:n], out_scores[:n]

    def _runs(self, q: npt.NDArray[np.uint32]) -> list[list[tuple[I64Array, I64Array, I64Array]]]:
        """Each query term's decoded runs (documents, term frequencies, token places), one a
        segment that holds it, live documents only; every byte range in one read."""
        wanted: list[tuple[int, int, int, int]] = []  # term, segment position, df, at
        ranges: list[tuple[int, int, int]] = []
        for k, term in enumerate(q.tolist()):
            for position, segment in enumerate(self._segments):
                at = int(np.searchsorted(segment.terms, term))
                if at >= segment.terms.size or segment.terms[at] != term:
                    continue
                wanted.append((k, position, int(segment.df[at]), at))
                ranges.append((segment.id, int(segment.starts[at]), int(segment.starts[at + 1])))
        datas = self._tables.read(ranges)
        runs: list[list[tuple[I64Array, I64Array, I64Array]]] = [[] for _ in range(q.size)]
        for (k, position, count, _), data in zip(wanted, datas, strict=True):
            found = np.empty(count, dtype=np.int64)
            tfs = np.empty(count, dtype=np.int64)
            places = np.empty(count, dtype=np.int64)
            kept = decode(np.frombuffer(data, dtype=np.uint8), count, self._maps[position],
                          found, tfs, places, 0)  # fmt: skip
            runs[k].append((found[:kept], tfs[:kept], places[:kept]))
        return runs
