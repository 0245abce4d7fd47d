"""BM25 of pages from their query terms' counts, in plain Python: the crawl's running scores.

Owns: the BM25 constants (shared with the kernels of ``crawler.relevance.scoring``), the cheap look
for a CUDA driver, and ``TermScorer``: a crawl's corpus statistics (N, total length, each
query term's document frequency) and the scores of batches of pages given as (query-term
counts, length).

Why not the kernels here: during a crawl the parse workers count each page's query terms
(with the tokenizer kernel); what is left per page is a multiply-add per query word. The
kernels' work, scanning a document's ~1,000 token ids, is already done, and loading them
costs the crawl process ~0.5 s of CPU (numba, numpy, LLVM) at every start, for a few
microseconds of arithmetic a page. ``crawl rank`` and the GPU keep the kernels.

Invariant: the scores equal the serial CPU kernel's given the same batches: the same float64
operations in the same order, but for the idf's logarithm (libm's ``log1p`` here, numpy's
there: they differ in the last bit at times). Tests check to a relative 1e-14.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence

K1 = 1.2
B = 0.75
DEVICES = ("auto", "cpu", "gpu")


_CUDA_LIBRARIES = ("libcuda.so.1", "libcuda.so")
_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
    "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64", "/lib",
    "/usr/local/lib", "/usr/lib/wsl/lib",  # WSL 2: the Windows driver's libcuda
)  # fmt: skip


def driver_present() -> bool:
    """Cheap look for a CUDA driver, so that "auto" need not import numba.cuda.

    On Linux: the NVIDIA control device, or the driver library (``libcuda``) in the loader's
    directories (the standard ones, ``/etc/ld.so.conf``'s, ``LD_LIBRARY_PATH``'s), looked up
    directly: ``ctypes.util.find_library`` runs ``ldconfig`` and then ``gcc`` and the linker
    at every start of a crawl with a query, for nothing without a GPU. Elsewhere,
    ``find_library``."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return True
    if sys.platform.startswith("linux"):
        if os.path.exists("/dev/nvidiactl"):
            return True
        return any(
            os.path.exists(os.path.join(directory, name))
            for directory in _library_dirs()
            for name in _CUDA_LIBRARIES
        )
    import ctypes.util

    return bool(ctypes.util.find_library("cuda") or ctypes.util.find_library("nvcuda"))


def _library_dirs() -> list[str]:
    """Where the dynamic loader looks: ``LD_LIBRARY_PATH``, ``/etc/ld.so.conf`` (one level of
    ``include``), the standard directories."""
    import glob  # here: only where a GPU is looked for

    found = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    configs = ["/etc/ld.so.conf"]
    while configs:
        try:
            with open(configs.pop(0), encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    line = line.split("#", 1)[0].strip()
                    if line.startswith("include "):
                        configs.extend(sorted(glob.glob(line.split(None, 1)[1].strip())))
                    elif line.startswith("/"):
                        found.append(line)
        except OSError:
            continue
    return [*found, *_LIBRARY_DIRS]


def avgdl(n_docs: int, total_length: int) -> float:
    """Mean document length; 1.0 for an empty corpus (then every tf is 0 and it is unused)."""
    return total_length / n_docs if n_docs and total_length else 1.0


def idf(n_docs: int, df: int) -> float:
    """Lucene's idf: never negative, even for a term in every document."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


Doc = tuple[Sequence[int], int]
"""A page as the crawl scores it: the counts of the query's terms (aligned with the
scorer's ``ids``) and its length in tokens."""


class TermScorer:
    """Running BM25 statistics for one query, and the scores of batches of pages.

    ``ids``: the query's distinct token ids; a page's term counts align with them."""

    __slots__ = ("df", "ids", "n_docs", "total_length")

    def __init__(self, ids: Sequence[int]) -> None:
        if len(set(ids)) != len(ids):
            raise ValueError(f"query term ids must be distinct: {list(ids)}")
        self.ids = tuple(ids)
        self.df = [0] * len(self.ids)
        self.n_docs = 0
        self.total_length = 0

    def observe(self, docs: Sequence[Doc]) -> None:
        """Count a batch's pages, their lengths and the pages holding each term."""
        df = self.df
        for tf, _ in docs:  # the whole batch first: a bad page leaves the statistics as they were
            if len(tf) != len(df):
                raise ValueError(f"{len(tf)} term counts for a query of {len(df)} terms")
        for tf, length in docs:
            self.n_docs += 1
            self.total_length += length
            for j, count in enumerate(tf):
                if count:
                    df[j] += 1

    def score(self, docs: Sequence[Doc]) -> list[float]:
        """BM25 of each page with the statistics as they are now."""
        n_docs = self.n_docs
        weights = [idf(n_docs, df) for df in self.df]
        mean = avgdl(n_docs, self.total_length)
        scores = []
        for tf, length in docs:
            norm = K1 * (1.0 - B + B * length / mean)
            score = 0.0
            for weight, count in zip(weights, tf, strict=True):
                if count:
                    t = float(count)
                    score += weight * t * (K1 + 1.0) / (t + norm)
            scores.append(score)
        return scores

    def observe_and_score(self, docs: Sequence[Doc]) -> list[float]:
        """What a crawl does with each batch: its pages count in the statistics first."""
        self.observe(docs)
        return self.score(docs)
