"""crawler.relevance.scoring's CUDA kernel equals the Python reference, run in numba's CUDA simulator.

NUMBA_ENABLE_CUDASIM must be set before numba is first imported, and this test process has
already imported it, so the checks run in a child interpreter with the variable set (and with
warnings as errors, like the rest of the suite). Where a real GPU is present the same script
also runs without the simulator.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.proc import ROOT as ROOT_DIR
from tests.proc import child_env

pytestmark = pytest.mark.gpu

REPO = ROOT_DIR

CHECKS = """
import numpy as np
from crawler.relevance.scoring import BM25Stats, Ranker, TokenBatch, reference_bm25, score_batch, select_device
from parsers.tokens import TokenCounts, query_ids, tokenize

assert select_device("gpu") == "gpu"
rng = np.random.default_rng(11)
vocab = [f"t{i}" for i in range(50)] + ["ÿnicode", "0042"]
docs = [tokenize(" ".join(rng.choice(vocab, int(rng.integers(0, 30))))) for _ in range(200)]
query = query_ids("t0 t3 t3 t17 ÿnicode 0042 absent")
batch = TokenBatch.from_counts(docs)
stats = BM25Stats(query)
stats.observe(batch)

df = {}
for d in docs:
    for t in d.ids.tolist():
        df[t] = df.get(t, 0) + 1
bags = [dict(zip(d.ids.tolist(), d.counts.tolist())) for d in docs]
want = reference_bm25(bags, [d.length for d in docs], query.tolist(), stats.n_docs, stats.avgdl, df)

got = score_batch(batch, stats, query, "gpu")
assert got.dtype == np.float64 and got.shape == (200,)
np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
assert (got > 0).sum() > 10

gpu, cpu = Ranker(batch, device="gpu"), Ranker(batch, device="cpu")
assert gpu.device == "gpu"
for q in (query, query_ids("t5"), query_ids("absent"), query[:0]):
    for _ in range(2):  # the corpus stays on the device across queries
        gi, gs = gpu.rank(q, top=20)
        ci, cs = cpu.rank(q, top=20)
        assert gi.tolist() == ci.tolist(), (gi, ci)
        np.testing.assert_allclose(gs, cs, rtol=1e-6, atol=0)

empty = TokenBatch.from_counts([])
assert score_batch(empty, stats, query, "gpu").size == 0
assert Ranker(empty, device="gpu").rank(query)[0].size == 0
from crawler.relevance.focus import Focus

on_gpu, on_cpu = Focus("t0 t3 t17 absent", "gpu"), Focus("t0 t3 t17 absent", "cpu")
assert (on_gpu.device, on_cpu.device) == ("gpu", "cpu")
for _ in range(3):  # running statistics, batch after batch, as in a crawl
    pages = [(tuple(int(c) for c in rng.integers(0, 4, 4)), int(rng.integers(5, 60)))
             for _ in range(int(rng.integers(1, 40)))]
    np.testing.assert_allclose(on_gpu.score_now(pages), on_cpu.score_now(pages), rtol=1e-6)
print("gpu checks passed")
"""


def run_checks(
    simulate: bool, script: str = CHECKS, args: tuple[str, ...] | list[str] = ()
) -> subprocess.CompletedProcess[str]:
    """``script`` (with ``args``) in a fresh interpreter (warnings as errors), in the
    simulator or not."""
    env = child_env(drop=("NUMBA_ENABLE_CUDASIM",))
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", script, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_cuda_kernel_in_simulator_equals_reference() -> None:
    result = run_checks(simulate=True)
    assert result.returncode == 0, result.stderr
    assert "gpu checks passed" in result.stdout


def test_cuda_kernel_on_a_real_gpu() -> None:
    from crawler.relevance.scoring import select_device

    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        pytest.skip("the CUDA simulator is on in this process: it is no device")
    if select_device("auto") != "gpu":
        pytest.skip("no CUDA device")
    result = run_checks(simulate=False)
    assert result.returncode == 0, result.stderr
    assert "gpu checks passed" in result.stdout


BROKEN = """
import logging, sys
import crawler.relevance.scoring as scoring

logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(levelname)s %(message)s")

def broken(*args):  # as numba-cuda 0.30.4 under numpy 2.5: compiling anything fails
    raise AttributeError("module 'numpy' has no attribute 'row_stack'")

scoring._doc_score = broken
assert scoring.select_device("auto") == "cpu"
try:
    scoring.select_device("gpu")
except scoring.GPUUnavailableError as exc:
    print("refused:", exc)
"""


def test_a_device_that_cannot_run_the_kernel_is_not_chosen() -> None:
    """A CUDA device whose numba-cuda cannot compile or run the kernel: "auto" scores on the
    CPU and says why; "gpu" is refused at once with the cause in one line (the CLI's exit 2),
    not at a crawl's first scored page. In the simulator, with the kernel's device function
    failing as numba-cuda 0.30.4's compiler does under numpy 2.5 (seen on an H200)."""
    done = run_checks(simulate=True, script=BROKEN)
    assert done.returncode == 0, done.stderr
    warning, refused = done.stdout.splitlines()
    cause = "module 'numpy' has no attribute 'row_stack')"  # the simulator prefixes thread ids
    assert warning.startswith("WARNING scoring on the CPU: the CUDA kernel cannot run here (")
    assert warning.endswith(cause)
    assert refused.startswith("refused: device 'gpu' requested but the CUDA kernel cannot run")
    assert refused.endswith(cause + "; use device 'cpu' or 'auto'")


MID_CRAWL = """
import logging, sys
import numpy as np
from crawler.relevance.focus import Focus

logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(levelname)s %(message)s")
rng = np.random.default_rng(5)
on_gpu, on_cpu = Focus("t0 t3 t17 absent", "gpu"), Focus("t0 t3 t17 absent", "cpu")
assert on_gpu.device == "gpu"
def batch():
    return [(tuple(int(c) for c in rng.integers(0, 4, 4)), int(rng.integers(5, 60)))
            for _ in range(int(rng.integers(1, 40)))]
pages = batch()
np.testing.assert_allclose(on_gpu.score_now(pages), on_cpu.score_now(pages), rtol=1e-9)

def lost(*args):
    raise RuntimeError("[CUDA_ERROR_OUT_OF_MEMORY] Call to cuMemAlloc results in OUT_OF_MEMORY")

on_gpu._observe_and_score.__self__.scorer.score = lost
for _ in range(3):
    pages = batch()
    np.testing.assert_allclose(on_gpu.score_now(pages), on_cpu.score_now(pages), rtol=1e-9)
print("scores equal")
"""


def test_a_gpu_failing_mid_crawl_hands_scoring_to_the_cpu() -> None:
    """The device fails after some batches (memory taken by another process, say): that batch
    and the rest are scored on the CPU from the statistics gathered so far, the same scores a
    CPU crawl gives, and the crawl goes on with one warning."""
    done = run_checks(simulate=True, script=MID_CRAWL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "WARNING scoring on the CPU from now on: the GPU failed (RuntimeError: "
        "[CUDA_ERROR_OUT_OF_MEMORY] Call to cuMemAlloc results in OUT_OF_MEMORY)",
        "scores equal",
    ]
