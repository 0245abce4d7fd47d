"""crawler.relevance.scoring on the CPU: kernel vs the Python reference, statistics, ranking, devices."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.errors import ConfigError
from crawler.relevance.scoring import (
    K1,
    B,
    BM25Stats,
    GPUUnavailableError,
    Ranker,
    TokenBatch,
    reference_bm25,
    score_batch,
    select_device,
)
from parsers.tokens import TokenCounts, decode_counts, encode_counts, query_ids, tokenize
from tests.proc import ROOT as ROOT_DIR
from tests.proc import child_env

REPO = ROOT_DIR
RTOL = 1e-9


def counts_of(doc: dict[int, int], extra_length: int = 0) -> TokenCounts:
    ids = np.array(list(doc), dtype=np.uint32)
    counts = np.array(list(doc.values()), dtype=np.uint32)
    return TokenCounts(ids=ids, counts=counts, length=sum(doc.values()) + extra_length)


def python_stats(docs: list[TokenCounts]) -> tuple[int, float, dict[int, int]]:
    """N, avgdl and df of every id, computed the slow, obvious way."""
    df: dict[int, int] = {}
    for doc in docs:
        for term in set(doc.ids.tolist()):
            df[term] = df.get(term, 0) + 1
    total = sum(doc.length for doc in docs)
    return len(docs), (total / len(docs) if total else 1.0), df


def reference_for(docs: list[TokenCounts], query: list[int]) -> list[float]:
    n_docs, avgdl, df = python_stats(docs)
    bags = [dict(zip(d.ids.tolist(), d.counts.tolist(), strict=True)) for d in docs]
    return reference_bm25(bags, [d.length for d in docs], query, n_docs, avgdl, df)


def scored(docs: list[TokenCounts], query: list[int]) -> np.ndarray:
    batch = TokenBatch.from_counts(docs)
    stats = BM25Stats(np.array(query, dtype=np.uint32))
    stats.observe(batch)
    return score_batch(batch, stats, query, "cpu")


ID = st.sampled_from([0, 1, 2, 7, 1_000, 2**31, 2**32 - 1, *range(10, 40)])
DOC = st.tuples(st.dictionaries(ID, st.integers(1, 50), max_size=25), st.integers(0, 40))


@settings(max_examples=150, deadline=None)
@given(st.lists(DOC, min_size=1, max_size=30), st.lists(ID, max_size=6))
def test_cpu_kernel_equals_reference(
    docs: list[tuple[dict[int, int], int]], query: list[int]
) -> None:
    token_docs = [counts_of(bag, extra) for bag, extra in docs]
    got = scored(token_docs, query)
    want = reference_for(token_docs, query)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=0)
    batch = TokenBatch.from_counts(token_docs)
    stats = BM25Stats(np.array(query, dtype=np.uint32))
    stats.observe(batch)
    serial = score_batch(batch, stats, query, "cpu", parallel=False)
    np.testing.assert_array_equal(serial, got)  # the serial twin: the same numbers


def test_cpu_kernel_on_tokenized_text() -> None:
    texts = [
        "the quick brown fox jumps over the lazy dog",
        "a fox, a fox! foxes are not dogs",
        "nothing relevant here",
        "",
        "Dog dog DOG the the the",
    ]
    docs = [tokenize(t) for t in texts]
    query = query_ids("fox dog the").tolist()
    got = scored(docs, query)
    np.testing.assert_allclose(got, reference_for(docs, query), rtol=RTOL, atol=0)
    assert got[2] == 0.0
    assert got[3] == 0.0
    assert got[1] > 0.0


def test_bm25_by_hand() -> None:
    # Two documents of length 2 and 4 (avgdl 3); the term occurs once, in the first only.
    docs = [counts_of({5: 1, 6: 1}), counts_of({6: 4})]
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    norm = K1 * (1 - B + B * 2 / 3)
    expected = idf * 1 * (K1 + 1) / (1 + norm)
    assert scored(docs, [5]).tolist() == pytest.approx([expected, 0.0], rel=1e-12)


def test_query_duplicates_count_once_and_empty_inputs() -> None:
    docs = [counts_of({1: 2, 2: 1}), counts_of({2: 3})]
    assert scored(docs, [1, 2, 2, 1]).tolist() == scored(docs, [2, 1]).tolist()
    assert scored(docs, []).tolist() == [0.0, 0.0]
    empty = TokenBatch.from_counts([])
    assert empty.n_docs == 0
    assert score_batch(empty, BM25Stats(np.array([1], np.uint32)), [1], "cpu").size == 0


def test_stats_accumulate_over_batches() -> None:
    rng = np.random.default_rng(3)
    docs = [
        counts_of(
            {
                int(t): int(c)
                for t, c in zip(rng.integers(0, 30, 8), rng.integers(1, 5, 8), strict=True)
            }
        )
        for _ in range(40)
    ]
    query = [0, 3, 17, 29, 99]
    stats = BM25Stats(np.array(query, dtype=np.uint32))
    for start in range(0, 40, 7):
        stats.observe(TokenBatch.from_counts(docs[start : start + 7]))
    n_docs, avgdl, df = python_stats(docs)
    assert stats.n_docs == n_docs
    assert stats.avgdl == pytest.approx(avgdl, rel=1e-12)
    assert stats.df.tolist() == [df.get(t, 0) for t in sorted(query)]
    expected_idf = [
        math.log(1 + (n_docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in query
    ]
    assert stats.idf(query).tolist() == pytest.approx(expected_idf, rel=1e-12)


def test_stats_reject_untracked_query_ids() -> None:
    stats = BM25Stats(np.array([1, 2], dtype=np.uint32))
    batch = TokenBatch.from_counts([counts_of({1: 1})])
    stats.observe(batch)
    with pytest.raises(ValueError, match="not tracked"):
        score_batch(batch, stats, [1, 3], "cpu")
    with pytest.raises(ValueError, match="not tracked"):
        BM25Stats(np.array([], dtype=np.uint32)).idf([1])


def test_empty_stats_do_not_divide_by_zero() -> None:
    stats = BM25Stats(np.array([1], dtype=np.uint32))
    assert stats.avgdl == 1.0
    batch = TokenBatch.from_counts([TokenCounts(np.empty(0, np.uint32), np.empty(0, np.uint32), 0)])
    stats.observe(batch)
    assert score_batch(batch, stats, [1], "cpu").tolist() == [0.0]


def test_token_batch_validation() -> None:
    u32 = np.zeros(3, dtype=np.uint32)
    ok = {
        "ids": u32,
        "counts": u32,
        "offsets": np.array([0, 3], np.int64),
        "lengths": np.array([5], np.int64),
    }
    TokenBatch(**ok)
    with pytest.raises(TypeError):
        TokenBatch(**{**ok, "ids": np.zeros(3, dtype=np.int64)})
    with pytest.raises(ValueError):
        TokenBatch(**{**ok, "offsets": np.array([0, 2], np.int64)})
    with pytest.raises(ValueError):
        TokenBatch(
            **{**ok, "offsets": np.array([0, 4, 3], np.int64), "lengths": np.zeros(2, np.int64)}
        )
    with pytest.raises(ValueError):
        TokenBatch(**{**ok, "counts": np.zeros(2, dtype=np.uint32)})


# ---------------------------------------------------------------------------------------------
# Ranker


def corpus(n_docs: int, seed: int) -> list[TokenCounts]:
    rng = np.random.default_rng(seed)
    vocab = [f"t{i}" for i in range(60)]
    return [tokenize(" ".join(rng.choice(vocab, int(rng.integers(0, 40))))) for _ in range(n_docs)]


def test_ranker_scores_equal_reference_and_rank_sorts_them() -> None:
    docs = corpus(120, seed=5)
    query = query_ids("t1 t7 t42 absent").tolist()
    ranker = Ranker(TokenBatch.from_counts(docs), device="cpu")
    want = np.array(reference_for(docs, query))
    np.testing.assert_allclose(ranker.scores(query), want, rtol=RTOL, atol=0)
    indices, scores = ranker.rank(query, top=10)
    expected = sorted(np.flatnonzero(want > 0), key=lambda d: (-want[d], d))[:10]
    assert indices.tolist() == expected
    np.testing.assert_allclose(scores, want[expected], rtol=RTOL, atol=0)


def test_ranker_edges() -> None:
    docs = [tokenize(t) for t in ["cat", "dog", "cat", "bird cat", "cat"]]
    ranker = Ranker(TokenBatch.from_counts(docs), device="cpu")
    q = query_ids("cat")
    indices, _ = ranker.rank(q, top=3)
    assert indices.tolist() == [0, 2, 4]  # equal scores: lower index first
    assert ranker.rank(q, top=100)[0].tolist() == [0, 2, 4, 3]  # only documents that match
    assert ranker.rank(q, top=0)[0].size == 0
    assert ranker.rank(query_ids("fish"), top=5)[0].size == 0
    assert ranker.rank([], top=5)[0].size == 0
    with pytest.raises(ValueError):
        ranker.rank(q, top=-1)
    assert Ranker(TokenBatch.from_counts([]), device="cpu").rank(q)[0].size == 0


def test_ranker_over_stored_blobs_matches_crawl_time_scores() -> None:
    docs = corpus(50, seed=9)
    stored = [decode_counts(encode_counts(d)) for d in docs]
    query = query_ids("t3 t4")
    batch = TokenBatch.from_counts(docs)
    stats = BM25Stats(query)
    stats.observe(batch)
    crawl_time = score_batch(batch, stats, query, "cpu")
    rerank = Ranker(TokenBatch.from_counts(stored), device="cpu").scores(query)
    np.testing.assert_allclose(rerank, crawl_time, rtol=RTOL, atol=0)


# ---------------------------------------------------------------------------------------------
# devices


def test_select_device() -> None:
    assert select_device("cpu") == "cpu"
    assert select_device("auto") in ("cpu", "gpu")
    with pytest.raises(ValueError, match="unknown device"):
        select_device("tpu")
    with pytest.raises(ValueError, match="unknown device"):
        score_batch(TokenBatch.from_counts([]), BM25Stats(np.array([], np.uint32)), [], "cuda")


def test_gpu_request_without_cuda_raises_a_clear_error() -> None:
    if select_device("auto") == "gpu":
        pytest.skip("a CUDA device is present")
    # no device, or one the kernel cannot run on (numba-cuda 0.30.4 under numpy 2.5, say)
    with pytest.raises(GPUUnavailableError, match=r"no CUDA device|cannot run here") as caught:
        select_device("gpu")
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, ConfigError)  # the CLI maps it to exit 2
    assert "\n" not in str(caught.value)


def test_cpu_path_never_imports_numba_cuda() -> None:
    script = (
        "import sys, numpy as np\n"
        "from crawler.relevance.scoring import BM25Stats, Ranker, TokenBatch, score_batch\n"
        "from parsers.tokens import tokenize, query_ids\n"
        "b = TokenBatch.from_counts([tokenize('a b c'), tokenize('b c d')])\n"
        "s = BM25Stats(query_ids('b')); s.observe(b)\n"
        "score_batch(b, s, query_ids('b'), 'cpu')\n"
        "Ranker(b, device='cpu').rank(query_ids('b'))\n"
        "assert 'numba.cuda' not in sys.modules, 'numba.cuda was imported'\n"
    )
    env = child_env(drop=("NUMBA_ENABLE_CUDASIM",))
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_auto_device_check_runs_no_program_on_linux(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``find_library`` runs ldconfig, gcc and the linker (~25 ms): a crawl with a query on
    device "auto" must not pay that at every start. On Linux the look is the NVIDIA control
    device or ``libcuda`` in the loader's directories."""
    import ctypes.util

    from crawler.relevance import bm25

    if not sys.platform.startswith("linux"):
        pytest.skip("the Linux look")
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"called with {args}")

    monkeypatch.setattr(ctypes.util, "find_library", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    assert isinstance(bm25.driver_present(), bool)
    (tmp_path / "libcuda.so.1").write_bytes(b"")  # where LD_LIBRARY_PATH says the driver is
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nonexistent:{tmp_path}")
    assert bm25.driver_present() is True
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert bm25.driver_present() is True
