"""BM25 relevance of token batches: corpus statistics, CPU and CUDA kernels, device selection.

Owns how a batch of tokenized documents (``parsers.tokens.TokenCounts``) is scored against a
query (``BM25Stats`` + ``score_batch``; a crawl on a GPU) and how a stored corpus is re-ranked
(``Ranker``). A crawl on the CPU scores with ``crawler.relevance.bm25`` instead (the same formula in plain
Python, equal to ``_bm25_serial``), so that it never loads numba. Pure: no IO, no clock, no
global state beyond numba's compiled kernels.

Invariants:
- Okapi BM25 with k1 = 1.2, b = 0.75 and Lucene's idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
  always > 0; a document scores sum_t idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
  over the distinct query terms, in float64 on every device. The (k1 + 1) factor is classic
  Okapi (and rank_bm25); Lucene >= 8 drops it, a constant factor that changes no ranking.
- A ``TokenBatch`` is CSR: ``ids``/``counts`` of all documents concatenated, document d owning
  ``[offsets[d], offsets[d + 1])``; ids are distinct within a document (``tokenize`` guarantees
  it, and document frequency counting relies on it).
- One source for the per-document loop (``_doc_score``), compiled twice: by ``@njit`` inside one
  fused ``parallel=True, cache=True`` kernel, and by ``numba.cuda`` as a device function.
- ``numba.cuda`` is imported only when the GPU path is asked for (or "auto" finds a CUDA device
  node or driver library), so the CPU path never pays for it. The CUDA context then lives in this process:
  never fork after it (or after a ``prange`` kernel) ran; the crawler's pool forks its workers
  from a fork server, a separate process that runs neither.
- Ties in ``Ranker.rank`` break towards the lower document index, so results are deterministic.
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit, prange

from crawler.errors import DeviceError, GPUUnavailableError
from crawler.relevance import bm25
from crawler.relevance.bm25 import DEVICES, K1, B, driver_present
from parsers.tokens import TokenCounts

log = logging.getLogger(__name__)

__all__ = [
    "K1",
    "B",
    "BM25Stats",
    "DeviceError",
    "GPUUnavailableError",
    "Ranker",
    "TokenBatch",
    "reference_bm25",
    "score_batch",
    "select_device",
]

_THREADS_PER_BLOCK = 128
_FILTER_BITS = 12  # a 4 KiB filter: stays in L1 (CPU) and in the cache of each GPU SM
_FILTER_SHIFT = 32 - _FILTER_BITS  # top bits: FNV-1a's low bits are its weakest

U32Array = npt.NDArray[np.uint32]
I64Array = npt.NDArray[np.int64]
F64Array = npt.NDArray[np.float64]


# ---------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True, slots=True, eq=False)
class TokenBatch:
    """Documents in CSR form: ids/counts (uint32) concatenated, offsets and lengths (int64)."""

    ids: U32Array
    counts: U32Array
    offsets: I64Array
    lengths: I64Array

    def __post_init__(self) -> None:
        for name, want in (("ids", np.uint32), ("counts", np.uint32)):
            _check_array(name, getattr(self, name), want)
        for name in ("offsets", "lengths"):
            _check_array(name, getattr(self, name), np.int64)
        if self.ids.shape != self.counts.shape:
            raise ValueError(f"ids and counts differ: {self.ids.shape} != {self.counts.shape}")
        if self.offsets.size != self.lengths.size + 1:
            raise ValueError("offsets must have one more entry than lengths")
        if self.offsets[0] != 0 or self.offsets[-1] != self.ids.size:
            raise ValueError("offsets must start at 0 and end at len(ids)")
        if np.any(np.diff(self.offsets) < 0):
            raise ValueError("offsets must not decrease")

    @classmethod
    def from_counts(cls, docs: Sequence[TokenCounts]) -> TokenBatch:
        """Concatenate per-document token counts into one batch."""
        sizes = np.fromiter((d.ids.size for d in docs), dtype=np.int64, count=len(docs))
        offsets = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        empty = np.empty(0, dtype=np.uint32)
        ids = np.concatenate([d.ids for d in docs]) if docs else empty
        counts = np.concatenate([d.counts for d in docs]) if docs else empty
        lengths = np.fromiter((d.length for d in docs), dtype=np.int64, count=len(docs))
        return cls(
            ids.astype(np.uint32, copy=False),
            counts.astype(np.uint32, copy=False),
            offsets,
            lengths,
        )

    @property
    def n_docs(self) -> int:
        return int(self.lengths.size)


def _check_array(name: str, array: Any, dtype: type[np.generic]) -> None:
    if not isinstance(array, np.ndarray) or array.dtype != dtype or array.ndim != 1:
        raise TypeError(f"TokenBatch.{name} must be a 1-d numpy array of {np.dtype(dtype)}")
    if not array.flags.c_contiguous:
        raise ValueError(f"TokenBatch.{name} must be C-contiguous")


def _distinct_sorted(query_ids: npt.ArrayLike) -> U32Array:
    return np.unique(np.asarray(query_ids, dtype=np.uint32))


def _lucene_idf(n_docs: int, df: npt.NDArray[np.int64]) -> F64Array:
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


@dataclass(slots=True)
class BM25Stats:
    """Running corpus statistics for a fixed set of query term ids: N, total length, df.

    Update with ``observe(batch)`` as documents arrive (before scoring that batch, so that its
    own documents count). Mutable, but pure: it never reads anything but its arguments.
    """

    query_ids: U32Array  # sorted, distinct
    df: I64Array = field(init=False)
    n_docs: int = 0
    total_length: int = 0

    def __post_init__(self) -> None:
        self.query_ids = _distinct_sorted(self.query_ids)
        self.df = np.zeros(self.query_ids.size, dtype=np.int64)

    def observe(self, batch: TokenBatch) -> None:
        """Count a batch's documents, their lengths and the documents holding each term."""
        self.n_docs += batch.n_docs
        self.total_length += int(batch.lengths.sum())
        self.df += _count_in_sorted(self.query_ids, batch.ids)

    @property
    def avgdl(self) -> float:
        return bm25.avgdl(self.n_docs, self.total_length)

    def idf(self, query_ids: npt.ArrayLike) -> F64Array:
        """Lucene idf of each id in ``query_ids`` (each must be one this object tracks)."""
        q = np.asarray(query_ids, dtype=np.uint32)
        pos, known = _lookup(self.query_ids, q)
        if not np.all(known):
            raise ValueError(f"query ids not tracked by these BM25Stats: {q[~known].tolist()}")
        return _lucene_idf(self.n_docs, self.df[pos])


def _lookup(sorted_keys: U32Array, ids: U32Array) -> tuple[I64Array, npt.NDArray[np.bool_]]:
    """For each id: (a valid index into ``sorted_keys``, whether the key there is that id)."""
    if sorted_keys.size == 0:
        return np.zeros(ids.size, dtype=np.int64), np.zeros(ids.size, dtype=np.bool_)
    pos = np.searchsorted(sorted_keys, ids).astype(np.int64)
    np.minimum(pos, sorted_keys.size - 1, out=pos)
    return pos, sorted_keys[pos] == ids


def _count_in_sorted(sorted_ids: U32Array, ids: U32Array) -> I64Array:
    """How often each of ``sorted_ids`` occurs in ``ids``."""
    pos, hit = _lookup(sorted_ids, ids)
    return np.bincount(pos[hit], minlength=sorted_ids.size).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# kernels


def _query_filter(q: U32Array) -> npt.NDArray[np.uint8]:
    """1 where some query id has these top FILTER_BITS bits: most document ids skip the search."""
    marks = np.zeros(1 << _FILTER_BITS, dtype=np.uint8)
    marks[q >> np.uint32(32 - _FILTER_BITS)] = 1
    return marks


def _doc_score(d, ids, counts, offsets, lengths, q, idf, qfilter, k1, b, avgdl):
    """BM25 of document ``d``; ``q`` sorted, ``idf`` aligned with it. Compiled for CPU and GPU.

    ``qfilter`` (from ``_query_filter``) rejects almost every id with one load and a well
    predicted branch; a binary search on every id costs ~8x more (mispredicted branches).
    """
    norm = k1 * (1.0 - b + b * lengths[d] / avgdl)
    score = 0.0
    for j in range(offsets[d], offsets[d + 1]):
        t = ids[j]
        if qfilter[t >> _FILTER_SHIFT] == 0:
            continue
        lo = 0
        hi = q.size
        while lo < hi:
            mid = (lo + hi) // 2
            if q[mid] < t:
                lo = mid + 1
            else:
                hi = mid
        if lo < q.size and q[lo] == t:
            tf = counts[j] * 1.0
            score += idf[lo] * tf * (k1 + 1.0) / (tf + norm)
    return score


_doc_score_cpu = njit(cache=True)(_doc_score)


@njit(parallel=True, cache=True)
def _bm25_cpu(ids, counts, offsets, lengths, q, idf, qfilter, k1, b, avgdl):
    out = np.empty(lengths.size, dtype=np.float64)
    for d in prange(lengths.size):
        out[d] = _doc_score_cpu(d, ids, counts, offsets, lengths, q, idf, qfilter, k1, b, avgdl)
    return out


@njit(cache=True)
def _bm25_serial(ids, counts, offsets, lengths, q, idf, qfilter, k1, b, avgdl):
    """The same loop on the calling thread, for small batches where a parallel launch costs
    more than it saves (``score_batch(..., parallel=False)``; ``crawler.relevance.bm25`` equals it)."""
    out = np.empty(lengths.size, dtype=np.float64)
    for d in range(lengths.size):
        out[d] = _doc_score_cpu(d, ids, counts, offsets, lengths, q, idf, qfilter, k1, b, avgdl)
    return out


# Bound by _cuda() on first GPU use. Module globals, not closure cells: the CUDA simulator swaps
# the numba.cuda module for its fake only where a kernel's __globals__ refer to it.
_cuda_module: Any = None
_cuda_doc_score: Any = None


def _bm25_cuda(ids, counts, offsets, lengths, q, idf, qfilter, k1, b, avgdl, out):
    """One thread per document."""
    d = _cuda_module.grid(1)
    if d < out.size:
        out[d] = _cuda_doc_score(d, ids, counts, offsets, lengths, q, idf, qfilter, k1, b, avgdl)


@functools.cache
def _cuda() -> tuple[Any, Any]:
    """(numba.cuda, the BM25 kernel), imported and compiled on first use only."""
    global _cuda_module, _cuda_doc_score
    from numba import cuda

    _cuda_module = cuda
    _cuda_doc_score = cuda.jit(device=True)(_doc_score)
    return cuda, cuda.jit(_bm25_cuda)


@functools.cache
def _cuda_problem() -> str | None:
    """None where the BM25 kernel compiles and runs on a CUDA device here, else why not.

    A device is not enough: numba-cuda must import and compile the kernel with the numpy and
    CUDA toolkit installed beside it (numba-cuda 0.30.4 fails to compile anything under numpy
    2.5, seen on an H200), so the kernel is compiled and launched once, on a one-document
    corpus, before the GPU is chosen: a crawl finds out at start, not at its first scored page.
    """
    try:
        cuda, _ = _cuda()
        if not cuda.is_available():
            return "no CUDA device is available"
        probe = TokenBatch.from_counts(
            [TokenCounts(np.array([7], np.uint32), np.array([2], np.uint32), 2)]
        )
        q = np.array([7], np.uint32)
        got = _DeviceCorpus(probe).score(q, np.array([1.0]), 2.0)
        want = _score(probe, q, np.array([1.0]), 2.0, "cpu", parallel=False)
        if not np.allclose(got, want, rtol=1e-9):
            return f"the CUDA kernel gave {got[0]!r} where the CPU gives {want[0]!r}"
    except Exception as exc:  # any failure to import, compile or launch: not usable here
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"the CUDA kernel cannot run here ({type(exc).__name__}: {first})"
    return None


def select_device(requested: str = "auto") -> str:
    """Resolve "auto" | "cpu" | "gpu" to "cpu" or "gpu".

    "cpu" never imports numba.cuda; "auto" imports it only where ``crawler.relevance.bm25.driver_present``
    finds a CUDA device node or driver library, and falls back to the CPU, with a warning, where
    the kernel cannot run on the device; "gpu" where it cannot raises ``GPUUnavailableError``
    saying why (one line).
    """
    if requested not in DEVICES:
        raise DeviceError(f"unknown device {requested!r}; expected one of {', '.join(DEVICES)}")
    if requested == "cpu" or (requested == "auto" and not driver_present()):
        return "cpu"
    problem = _cuda_problem()
    if problem is None:
        return "gpu"
    if requested == "gpu":
        raise GPUUnavailableError(
            f"device 'gpu' requested but {problem}; use device 'cpu' or 'auto'"
        )
    if problem != "no CUDA device is available":
        log.warning("scoring on the CPU: %s", problem)
    return "cpu"


_LOW_OCCUPANCY = r".*Grid size \d+ will likely result in GPU under-utilization"


class _DeviceCorpus:
    """A batch's arrays copied to the GPU once, with a reusable output buffer."""

    def __init__(self, batch: TokenBatch) -> None:
        self._cuda, self._kernel = _cuda()
        to_device = self._cuda.to_device
        self.arrays = tuple(
            to_device(a) for a in (batch.ids, batch.counts, batch.offsets, batch.lengths)
        )
        self.out = self._cuda.device_array(batch.n_docs, dtype=np.float64)

    def score(self, q: U32Array, idf: F64Array, avgdl: float) -> F64Array:
        n_docs = self.out.size
        if n_docs == 0:
            return np.zeros(0, dtype=np.float64)
        blocks = (n_docs + _THREADS_PER_BLOCK - 1) // _THREADS_PER_BLOCK
        query = tuple(self._cuda.to_device(a) for a in (q, idf, _query_filter(q)))
        with warnings.catch_warnings():
            # numba-cuda warns of low occupancy below 128 blocks (16,384 documents here): a
            # crawl's batches are that small by design, and the warning is an error under -W
            # error (seen on an H200: it failed the one-document probe of _cuda_problem)
            warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
            self._kernel[blocks, _THREADS_PER_BLOCK](*self.arrays, *query, K1, B, avgdl, self.out)
        return np.asarray(self.out.copy_to_host(), dtype=np.float64)


def _score(
    batch: TokenBatch, q: U32Array, idf: F64Array, avgdl: float, device: str, parallel: bool = True
) -> F64Array:
    if device == "gpu":
        return _DeviceCorpus(batch).score(q, idf, avgdl)
    arrays = (batch.ids, batch.counts, batch.offsets, batch.lengths)
    kernel = _bm25_cpu if parallel else _bm25_serial
    scores = kernel(*arrays, q, idf, _query_filter(q), K1, B, avgdl)
    return np.asarray(scores, dtype=np.float64)


class QueryScorer:
    """``score_batch`` for one fixed query, for many small batches (a crawl's): the query's
    sorted ids, its filter and the device are worked out once, not per call."""

    def __init__(self, query_ids: npt.ArrayLike, device: str = "cpu") -> None:
        self.device = select_device(device)
        self.q = _distinct_sorted(query_ids)
        self._filter = _query_filter(self.q)

    def score(self, batch: TokenBatch, stats: BM25Stats, *, parallel: bool = True) -> F64Array:
        """As ``score_batch(batch, stats, query_ids, device, parallel=parallel)``."""
        if self.q.size == 0 or batch.n_docs == 0:
            return np.zeros(batch.n_docs, dtype=np.float64)
        idf = stats.idf(self.q)
        if self.device == "gpu":
            return _DeviceCorpus(batch).score(self.q, idf, stats.avgdl)
        kernel = _bm25_cpu if parallel else _bm25_serial
        arrays = (batch.ids, batch.counts, batch.offsets, batch.lengths)
        scores = kernel(*arrays, self.q, idf, self._filter, K1, B, stats.avgdl)
        return np.asarray(scores, dtype=np.float64)


def score_batch(
    batch: TokenBatch,
    stats: BM25Stats,
    query_ids: npt.ArrayLike,
    device: str = "cpu",
    *,
    parallel: bool = True,
) -> F64Array:
    """BM25 score of each document of ``batch`` (float64, in batch order).

    ``stats`` must track every id of ``query_ids`` (duplicates count once). ``parallel=False``
    runs the serial twin of the fused kernel (same ``_doc_score``, same results). The default is the
    CPU: during a crawl tokenizing dominates and a GPU round trip per batch does not pay off.
    """
    target = select_device(device)
    q = _distinct_sorted(query_ids)
    if q.size == 0 or batch.n_docs == 0:
        return np.zeros(batch.n_docs, dtype=np.float64)
    return _score(batch, q, stats.idf(q), stats.avgdl, target, parallel)


def reference_bm25(
    docs: Sequence[Mapping[int, int]],
    lengths: Sequence[int],
    query_ids: Sequence[int],
    n_docs: int,
    avgdl: float,
    df: Mapping[int, int],
) -> list[float]:
    """Plain-Python BM25 (float64) that the kernels must equal; terms missing from df have df 0."""
    scores = []
    for doc, length in zip(docs, lengths, strict=True):
        norm = K1 * (1.0 - B + B * length / avgdl)
        score = 0.0
        for term in dict.fromkeys(query_ids):
            tf = doc.get(term, 0)
            if tf:
                n_t = df.get(term, 0)
                idf = math.log(1.0 + (n_docs - n_t + 0.5) / (n_t + 0.5))
                score += idf * tf * (K1 + 1.0) / (tf + norm)
        scores.append(score)
    return scores


# ---------------------------------------------------------------------------------------------
# re-ranking a stored corpus


class Ranker:
    """Ranks a fixed corpus against queries; on the GPU the corpus stays on the device."""

    def __init__(self, corpus: TokenBatch, device: str = "auto") -> None:
        self.device = select_device(device)
        self._corpus = corpus
        self._vocab, df = np.unique(corpus.ids, return_counts=True)
        self._df = df.astype(np.int64)
        self._avgdl = bm25.avgdl(corpus.n_docs, int(corpus.lengths.sum()))
        self._on_device = _DeviceCorpus(corpus) if self.device == "gpu" else None

    @property
    def n_docs(self) -> int:
        return self._corpus.n_docs

    def scores(self, query_ids: npt.ArrayLike) -> F64Array:
        """BM25 score of every document of the corpus."""
        q = _distinct_sorted(query_ids)
        if q.size == 0 or self.n_docs == 0:
            return np.zeros(self.n_docs, dtype=np.float64)
        idf = _lucene_idf(self.n_docs, self._df_of(q))
        if self._on_device is not None:
            return self._on_device.score(q, idf, self._avgdl)
        return _score(self._corpus, q, idf, self._avgdl, "cpu")

    def rank(self, query_ids: npt.ArrayLike, top: int = 10) -> tuple[I64Array, F64Array]:
        """The ``top`` best documents holding a query term: (indices, scores), best first."""
        if top < 0:
            raise ValueError(f"top must be >= 0, got {top}")
        return _top_k(self.scores(query_ids), top)

    def _df_of(self, q: U32Array) -> I64Array:
        pos, hit = _lookup(self._vocab, q)
        return np.where(hit, self._df[pos] if self._df.size else 0, 0).astype(np.int64)


def _top_k(scores: F64Array, top: int) -> tuple[I64Array, F64Array]:
    """Indices of the ``top`` highest positive scores, best first, ties by lower index."""
    candidates = np.flatnonzero(scores > 0.0)
    if top == 0:
        candidates = candidates[:0]
    elif candidates.size > top:
        kth = np.partition(scores[candidates], candidates.size - top)[candidates.size - top]
        candidates = candidates[scores[candidates] >= kth]
    order = np.lexsort((candidates, -scores[candidates]))[:top]
    chosen = candidates[order].astype(np.int64)
    return chosen, scores[chosen]
