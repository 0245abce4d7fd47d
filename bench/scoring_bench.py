"""Tokenizing and BM25 scoring speed on a synthetic Zipfian corpus, side by side with peers.

    python bench/scoring_bench.py [--docs 20000] [--tokens 1000] [--repeats 3]

Generates a deterministic corpus (seeded numpy; Zipf s = 1 over a 50,000-word vocabulary,
documents of 0.8-1.2 x --tokens words), then times, as medians of --repeats runs:
- tokenizing: ``parsers.tokens.tokenize`` (numba, one core) vs ``re.findall`` + ``Counter``;
- scoring one 3-term query over the whole corpus: the fused numba kernel (all threads and one
  thread), a plain numpy version over the same CSR arrays, ``rank_bm25.BM25Okapi.get_scores``
  (skipped with a message when rank_bm25 is absent) and, where CUDA is available, the CUDA kernel
  per batch (with transfers) and the device-resident ``Ranker``.
rank_bm25 scores with its own idf (no "1 +", negative idf floored), so only its speed compares;
the numpy baseline must equal the kernel and is checked. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.relevance.scoring import (
    K1,
    B,
    BM25Stats,
    Ranker,
    TokenBatch,
    score_batch,
    select_device,
)
from parsers.tokens import TokenCounts, decode_counts, encode_counts, simhash64, tokenize

VOCAB_SIZE = 50_000
BASELINE_TOKENIZE_DOCS = 2_000  # the Python tokenizer is ~10x slower: time it on a prefix
_PY_TOKEN_RE = re.compile(rb"[a-z0-9\x80-\xff]+")


@dataclass(frozen=True, slots=True)
class Row:
    stage: str
    implementation: str
    docs_per_s: float
    note: str = ""


def make_corpus(n_docs: int, tokens_per_doc: int, seed: int) -> tuple[list[str], list[str]]:
    """(documents, vocabulary by frequency rank), deterministic for a seed."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = list(
        dict.fromkeys(
            "".join(letters[rng.integers(0, 26, int(rng.integers(2, 11)))])
            for _ in range(VOCAB_SIZE * 2)
        )
    )[:VOCAB_SIZE]
    weights = 1.0 / np.arange(1, VOCAB_SIZE + 1)
    cdf = np.cumsum(weights / weights.sum())
    lengths = rng.integers(int(tokens_per_doc * 0.8), int(tokens_per_doc * 1.2) + 1, n_docs)
    words = np.searchsorted(cdf, rng.random(int(lengths.sum())), side="right")
    np.minimum(words, VOCAB_SIZE - 1, out=words)
    vocab_arr = np.array(vocab, dtype=object)
    docs, start = [], 0
    for length in lengths.tolist():
        docs.append(" ".join(vocab_arr[words[start : start + length]]))
        start += length
    return docs, vocab


def median_s(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm up: compile or load numba's cache, fault pages in
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def python_tokenize(text: str) -> Counter[bytes]:
    return Counter(_PY_TOKEN_RE.findall(text.encode("utf-8").lower()))


def tokenize_rows(docs: list[str], repeats: int) -> tuple[list[Row], list[TokenCounts]]:
    counts: list[TokenCounts] = []

    def run_numba() -> None:
        counts[:] = [tokenize(d) for d in docs]

    numba_s = median_s(run_numba, repeats)
    prefix = docs[:BASELINE_TOKENIZE_DOCS]
    python_s = median_s(lambda: [python_tokenize(d) for d in prefix], repeats)
    hashes_s = median_s(lambda: [simhash64(c.ids, c.counts) for c in counts], repeats)
    blobs_s = median_s(lambda: [decode_counts(encode_counts(c)) for c in counts], repeats)
    rows = [
        Row("tokenize", "numba `tokenize` (1 core)", len(docs) / numba_s),
        Row("tokenize", "Python `re.findall` + `Counter` (1 core)", len(prefix) / python_s),
        Row("simhash", "numba `simhash64` (1 core)", len(docs) / hashes_s),
        Row("blob", "`encode_counts` + `decode_counts`", len(docs) / blobs_s),
    ]
    return rows, counts


def numpy_bm25(
    batch: TokenBatch,
    q: npt.NDArray[np.uint32],
    idf: npt.NDArray[np.float64],
    avgdl: float,
    doc_of: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """Vectorised numpy BM25 over the same CSR arrays (``doc_of`` maps each entry to its doc)."""
    pos = np.minimum(np.searchsorted(q, batch.ids), q.size - 1)
    hit = q[pos] == batch.ids
    tf = batch.counts[hit].astype(np.float64)
    docs = doc_of[hit]
    norm = K1 * (1.0 - B + B * batch.lengths / avgdl)
    weights = idf[pos[hit]] * tf * (K1 + 1.0) / (tf + norm[docs])
    return np.bincount(docs, weights=weights, minlength=batch.n_docs)


def cpu_rows(
    batch: TokenBatch, stats: BM25Stats, q: npt.NDArray[np.uint32], repeats: int
) -> list[Row]:
    n = batch.n_docs
    threads = numba.get_num_threads()
    kernel = score_batch(batch, stats, q, "cpu")
    all_s = median_s(lambda: score_batch(batch, stats, q, "cpu"), repeats)
    numba.set_num_threads(1)
    one_s = median_s(lambda: score_batch(batch, stats, q, "cpu"), repeats)
    numba.set_num_threads(threads)
    doc_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(batch.offsets))
    idf, avgdl = stats.idf(q), stats.avgdl
    np.testing.assert_allclose(numpy_bm25(batch, q, idf, avgdl, doc_of), kernel, rtol=1e-9)
    numpy_s = median_s(lambda: numpy_bm25(batch, q, idf, avgdl, doc_of), repeats)
    ranker = Ranker(batch, device="cpu")
    rank_s = median_s(lambda: ranker.rank(q, top=10), repeats)
    return [
        Row("score", f"numba fused `prange` kernel ({threads} threads)", n / all_s),
        Row("score", "numba fused `prange` kernel (1 thread)", n / one_s),
        Row("score", "numpy vectorised (same CSR arrays)", n / numpy_s, "equals the kernel"),
        Row("rank", "`Ranker.rank(top=10)`, CPU", n / rank_s, f"{rank_s * 1e3:.2f} ms/query"),
    ]


def rank_bm25_rows(docs: list[str], query_words: list[str], repeats: int) -> list[Row]:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        print("rank_bm25 not installed: skipping it (pip install rank_bm25)", file=sys.stderr)
        return []
    start = time.perf_counter()
    model = BM25Okapi([d.split() for d in docs])
    build_s = time.perf_counter() - start
    score_s = median_s(lambda: model.get_scores(query_words), repeats)
    note = f"index built in {build_s:.1f} s; its own idf"
    return [Row("score", "`rank_bm25.BM25Okapi.get_scores`", len(docs) / score_s, note)]


def gpu_rows(
    batch: TokenBatch, stats: BM25Stats, q: npt.NDArray[np.uint32], repeats: int
) -> list[Row]:
    if select_device("auto") != "gpu":
        print("no CUDA device: skipping the GPU rows", file=sys.stderr)
        return []
    n = batch.n_docs
    cpu = score_batch(batch, stats, q, "cpu")
    np.testing.assert_allclose(score_batch(batch, stats, q, "gpu"), cpu, rtol=1e-6)
    batch_s = median_s(lambda: score_batch(batch, stats, q, "gpu"), repeats)
    ranker = Ranker(batch, device="gpu")
    np.testing.assert_allclose(ranker.scores(q), Ranker(batch, device="cpu").scores(q), rtol=1e-6)
    rank_s = median_s(lambda: ranker.rank(q, top=10), repeats)
    return [
        Row("score", "CUDA kernel per batch (with transfers)", n / batch_s),
        Row(
            "rank",
            "`Ranker.rank(top=10)`, GPU (corpus on device)",
            n / rank_s,
            f"{rank_s * 1e3:.2f} ms/query",
        ),
    ]


def table(rows: list[Row]) -> str:
    lines = [
        "| stage | implementation | docs/s | vs first of stage | note |",
        "|---|---|---:|---:|---|",
    ]
    first: dict[str, float] = {}
    for row in rows:
        base = first.setdefault(row.stage, row.docs_per_s)
        ratio = row.docs_per_s / base
        lines.append(
            f"| {row.stage} | {row.implementation} | {row.docs_per_s:,.0f} | {ratio:.2f}x | {row.note} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=1_000, help="mean tokens per document")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    docs, vocab = make_corpus(args.docs, args.tokens, args.seed)
    made_s = time.perf_counter() - start
    rows, counts = tokenize_rows(docs, args.repeats)
    batch = TokenBatch.from_counts(counts)
    query_words = [vocab[9], vocab[99], vocab[999]]  # a common, a middling and a rare term
    q = np.array([tokenize(w).ids[0] for w in query_words], dtype=np.uint32)
    stats = BM25Stats(q)
    stats.observe(batch)
    rows += cpu_rows(batch, stats, q, args.repeats)
    rows += rank_bm25_rows(docs, query_words, args.repeats)
    rows += gpu_rows(batch, stats, q, args.repeats)

    mean_tokens = batch.lengths.mean()
    print(
        f"corpus: {batch.n_docs:,} docs, {mean_tokens:,.0f} tokens/doc on average, "
        f"{batch.ids.size / batch.n_docs:,.0f} distinct/doc, {sum(map(len, docs)) / 1e6:,.0f} MB of text "
        f"(made in {made_s:.1f} s); query {query_words}; numba {numba.__version__}, "
        f"{numba.get_num_threads()} threads; medians of {args.repeats} runs\n"
    )
    print(table(rows))


if __name__ == "__main__":
    main()
