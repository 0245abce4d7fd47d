"""The inverted index on a CUDA GPU: ``DeviceSearch`` copies a ``SearchIndex``'s live postings
to the device once and ranks batches of queries there, top-k included.

At open, every segment's postings are decoded (live documents only) and merged into one
run per term: document indexes (int32) and term frequencies (int32), with each document's
BM25 length norm (float64). A batch of queries is scored term at a time into one float64
accumulator row per query (``_add_term``: one launch per term position, a thread per
posting; a term holds a document at most once, so no two threads add to one cell and no
atomics are needed), then each row's best ``TOP_ON_DEVICE`` per thread are picked on the
device (``_local_top``, one block a query) and only those come back: the host merges a few
thousand candidates a query, not the corpus.

The same Okapi BM25 as ``crawler.relevance.search`` (k1 1.2, b 0.75, Lucene idf, float64),
the same parts; a document's parts are summed in query-term order here, in its own token
order there, so scores agree to about 1e-15 relative, not always to the last bit, and
documents of equal scores rank by lower page id on both. A ``top`` above
``TOP_ON_DEVICE`` copies the whole row back and picks on the host.

Module globals for the kernels, bound on first use (``_kernels``): numba.cuda is imported
only when the GPU is asked for, and the CUDA simulator swaps the module only where a
kernel's ``__globals__`` name it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from crawler.relevance.bm25 import K1, B
from crawler.relevance.scoring import _LOW_OCCUPANCY, _top_k
from crawler.relevance.search import SearchIndex
from parsers.postings import decode

F64Array = npt.NDArray[np.float64]
I64Array = npt.NDArray[np.int64]

TOP_ON_DEVICE = 32
"""Candidates each thread keeps per query (a ``top`` up to this is picked on the device)."""
THREADS = 128
ACCUMULATOR_BYTES = 256 * 2**20
"""Device memory for one batch's accumulator rows: the batch size follows the corpus size."""

_cuda: Any = None


def _add_term(term_of, item_starts, doc_of, tf_of, norm, idf, k1, rows, acc):  # type: ignore[no-untyped-def]
    """One thread a posting of the batch's ``item``s (a query's term at this position):
    ``acc[row, doc] += part``."""
    i = _cuda.grid(1)
    n_items = item_starts.size - 1
    if i >= item_starts[n_items]:
        return
    lo, hi = 0, n_items  # the item whose postings hold i
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if item_starts[mid] <= i:
            lo = mid
        else:
            hi = mid
    j = term_of[lo] + (i - item_starts[lo])
    d = doc_of[j]
    tf = tf_of[j] * 1.0
    acc[rows[lo], d] += idf[lo] * tf * (k1 + 1.0) / (tf + norm[d])


def _zero(acc):  # type: ignore[no-untyped-def]
    i, d = _cuda.grid(2)
    if i < acc.shape[0] and d < acc.shape[1]:
        acc[i, d] = 0.0


def _local_top(acc, out_docs, out_scores):  # type: ignore[no-untyped-def]
    """Block ``q``, thread ``t``: the best ``TOP_ON_DEVICE`` positive scores of documents
    ``t, t + THREADS, ...`` of row ``q`` (ties: the lower document), best first; -1 pads."""
    q = _cuda.blockIdx.x
    t = _cuda.threadIdx.x
    docs = out_docs[q, t]
    scores = out_scores[q, t]
    k = docs.size
    for s in range(k):
        docs[s] = -1
        scores[s] = 0.0
    n = 0
    d = t
    while d < acc.shape[1]:
        v = acc[q, d]
        if v > 0.0 and (n < k or v > scores[k - 1]):
            at = n if n < k else k - 1
            while at > 0 and scores[at - 1] < v:  # equal scores: the earlier (lower) doc first
                if at < k:
                    docs[at] = docs[at - 1]
                    scores[at] = scores[at - 1]
                at -= 1
            docs[at] = d
            scores[at] = v
            if n < k:
                n += 1
        d += _cuda.blockDim.x


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Without numba-cuda's low-occupancy warning (an error under ``-W error``): a small
    batch or corpus is a small grid by nature."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
        yield


@functools.cache
def _kernels() -> tuple[Any, Any, Any, Any]:
    global _cuda
    from numba import cuda

    _cuda = cuda
    return cuda, cuda.jit(_add_term), cuda.jit(_zero), cuda.jit(_local_top)


@njit(cache=True)
def _fill(data, counts, starts, mapping, slots, cursor, doc_of, tf_of, scratch_docs,
          scratch_tfs, scratch_places):  # type: ignore[no-untyped-def]  # fmt: skip
    """Decode one segment's runs into the merged per-term arrays at each term's cursor."""
    for k in range(counts.size):
        at = decode(data[starts[k] : starts[k + 1]], counts[k], mapping, scratch_docs,
                    scratch_tfs, scratch_places, 0)  # fmt: skip
        g = slots[k]
        c = cursor[g]
        for i in range(at):
            doc_of[c + i] = scratch_docs[i]
            tf_of[c + i] = scratch_tfs[i]
        cursor[g] = c + at


class DeviceSearch:
    """A ``SearchIndex``'s live postings on the GPU, ranked a batch of queries at a time."""

    def __init__(self, index: SearchIndex) -> None:
        self._index = index
        cuda, self._add, self._zero, self._top = _kernels()
        self._cuda = cuda
        segments = index._segments
        self.terms = np.unique(
            np.concatenate([s.terms for s in segments] or [np.empty(0, np.uint32)])
        )
        slots = [np.searchsorted(self.terms, s.terms) for s in segments]
        blobs = index._tables.read([(s.id, 0, s.postings_bytes) for s in segments])
        size = np.zeros(self.terms.size + 1, dtype=np.int64)
        for segment, slot in zip(segments, slots, strict=True):
            np.add.at(size, slot + 1, segment.df.astype(np.int64))  # an upper bound: dead ones
        bound = np.cumsum(size)
        doc_of = np.empty(int(bound[-1]), dtype=np.int32)
        tf_of = np.empty(int(bound[-1]), dtype=np.int32)
        cursor = bound[:-1].copy()
        largest = max((int(s.df.max()) for s in segments if s.df.size), default=0)
        scratch = [np.empty(largest, dtype=np.int64) for _ in range(3)]
        for segment, slot, blob, mapping in zip(segments, slots, blobs, index._maps, strict=True):
            _fill(np.frombuffer(blob, dtype=np.uint8), segment.df.astype(np.int64),
                  segment.starts, mapping, slot, cursor, doc_of, tf_of, *scratch)  # fmt: skip
        self._start, self._count = bound[:-1], cursor - bound[:-1]  # live postings per term
        norm = K1 * (1.0 - B + B * index.lengths / index._avgdl)  # as search._score's
        self._df = self._count.astype(np.int64)
        to_device = cuda.to_device
        self._doc_of = to_device(doc_of if doc_of.size else np.zeros(1, np.int32))
        self._tf_of = to_device(tf_of if tf_of.size else np.zeros(1, np.int32))
        self._norm = to_device(norm if norm.size else np.ones(1))
        self.n_docs = index.n_docs
        self.batch = max(1, min(1024, ACCUMULATOR_BYTES // (8 * max(1, self.n_docs))))

    def rank_many(
        self, queries: list[npt.ArrayLike], top: int = 10
    ) -> list[tuple[I64Array, F64Array]]:
        """Each query's ``top`` best pages (page ids) and scores, best first."""
        out: list[tuple[I64Array, F64Array]] = []
        for first in range(0, len(queries), self.batch):
            out += self._batch(queries[first : first + self.batch], top)
        return out

    def _batch(self, queries: list[npt.ArrayLike], top: int) -> list[tuple[I64Array, F64Array]]:
        empty = (np.empty(0, np.int64), np.empty(0, np.float64))
        if self.n_docs == 0 or top == 0:
            return [empty for _ in queries]
        per_query = []
        for query in queries:
            q = np.unique(np.asarray(query, dtype=np.uint32))
            at = np.searchsorted(self.terms, q)
            known = at < self.terms.size
            known[known] = self.terms[at[known]] == q[known]
            slot = at[known]
            slot = slot[self._df[slot] > 0]
            per_query.append(slot)
        to_device = self._cuda.to_device
        acc = self._cuda.device_array((len(queries), self.n_docs), dtype=np.float64)
        grid = (math.ceil(len(queries) / 8), math.ceil(self.n_docs / 32))
        with quiet():
            self._zero[grid, (8, 32)](acc)
        for position in range(max((s.size for s in per_query), default=0)):
            rows = [r for r, s in enumerate(per_query) if s.size > position]
            slots = np.array([per_query[r][position] for r in rows], dtype=np.int64)
            df = self._df[slots]
            idf = np.log1p((self.n_docs - df + 0.5) / (df + 0.5))
            item_starts = np.concatenate([[0], np.cumsum(self._count[slots])]).astype(np.int64)
            total = int(item_starts[-1])
            blocks = max(1, math.ceil(total / THREADS))
            args = (to_device(self._start[slots]), to_device(item_starts), self._doc_of,
                    self._tf_of, self._norm, to_device(idf), K1,
                    to_device(np.array(rows, np.int64)), acc)  # fmt: skip
            with quiet():
                self._add[blocks, THREADS](*args)
        if top > TOP_ON_DEVICE:
            rows_host = acc.copy_to_host()
            picked = [_top_k(rows_host[r], top) for r in range(len(queries))]
        else:
            docs = self._cuda.device_array((len(queries), THREADS, TOP_ON_DEVICE), np.int64)
            scores = self._cuda.device_array((len(queries), THREADS, TOP_ON_DEVICE), np.float64)
            with quiet():
                self._top[len(queries), THREADS](acc, docs, scores)
            docs_host, scores_host = docs.copy_to_host(), scores.copy_to_host()
            picked = []
            for r in range(len(queries)):
                d, s = docs_host[r].ravel(), scores_host[r].ravel()
                keep = d >= 0
                d, s = d[keep], s[keep]
                order = np.lexsort((d, -s))[:top]  # best first, ties: the lower document
                picked.append((d[order], s[order]))
        return [(self._index.page_ids[d], s) for d, s in picked]
