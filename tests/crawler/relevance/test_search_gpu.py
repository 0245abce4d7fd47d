"""The inverted index on the GPU (``crawler.relevance.search_gpu``) ranks as the CPU index: the
same pages and order (equal scores to the lower page id), scores to 1e-12, in batches and
alone, top-k on the device and past it, after changes and across segments; run in numba's
CUDA simulator in a child interpreter (see ``test_scoring_gpu``), and on a real GPU where
there is one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.crawler.relevance.test_scoring_gpu import run_checks

pytestmark = pytest.mark.gpu

CHECKS = """
import sys
from pathlib import Path
import numpy as np
from crawler.relevance.ranking import CorpusIndex
from storage import segments
from tests.crawler.relevance.test_search import make_db, put, random_counts

from crawler.relevance import search_gpu

segments.PARALLEL_PAGES = 50  # several segments, built in parallel
search_gpu.THREADS, search_gpu.TOP_ON_DEVICE = 8, 4  # each thread's candidates overflow
path = Path(sys.argv[1])
rng = np.random.default_rng(41)
make_db(path)
put(path, {n: random_counts(rng, int(rng.integers(5, 90))) for n in range(260)})
put(path, {n: None for n in range(0, 260, 13)})  # removed, named by a newer segment
put(path, {n: random_counts(rng, 30) for n in range(1, 260, 7)})  # changed

vocab = [((w * 2654435761) % (1 << 32)) for w in range(1, 40)]
cpu = CorpusIndex(str(path), "cpu")
gpu = CorpusIndex(str(path), "gpu")
assert gpu.device == "gpu (inverted index)" and gpu.pages == cpu.pages > 200, gpu.device
# queries by term id (the corpus's are test_search's hashed ids, not a text's words)
queries = [rng.choice(vocab, size=int(rng.integers(1, 6)), replace=False).tolist() for _ in range(12)]
queries += [[vocab[0]], [12345], []]
on_gpu = gpu._on_gpu
for top in (4, 3, 1, 10, 0):  # 10: past the device's candidates, picked on the host
    batch = on_gpu.rank_many(queries, top)
    for q, (page_ids, scores) in zip(queries, batch):
        want_ids, want_scores = cpu._search.rank(np.array(q, dtype=np.uint32), top)
        assert page_ids.tolist() == want_ids.tolist(), (q, top, page_ids, want_ids)
        np.testing.assert_allclose(scores, want_scores, rtol=1e-12)
        alone = on_gpu.rank_many([q], top)[0]
        assert alone[0].tolist() == page_ids.tolist()
on_gpu.batch = 4  # batches split by the accumulator's size
split = on_gpu.rank_many(queries, 10)
assert [p.tolist() for p, _ in split] == [p.tolist() for p, _ in on_gpu.rank_many(queries[:4], 10) + on_gpu.rank_many(queries[4:8], 10) + on_gpu.rank_many(queries[8:], 10)]
assert gpu.rank_many(["", "absent"], 5) == [[], []]
gpu.close(); cpu.close()
print("gpu search checks passed")
"""


def test_the_gpu_index_ranks_as_the_cpu_index_in_the_simulator(tmp_path: Path) -> None:
    result = run_checks(simulate=True, script=CHECKS, args=[str(tmp_path / "g.db")])
    assert result.returncode == 0, result.stderr[-4000:]
    assert "gpu search checks passed" in result.stdout


def test_the_gpu_index_on_a_real_gpu(tmp_path: Path) -> None:
    from crawler.relevance.scoring import select_device

    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        pytest.skip("the CUDA simulator is on in this process: it is no device")
    if select_device("auto") != "gpu":
        pytest.skip("no CUDA device")
    result = run_checks(simulate=False, script=CHECKS, args=[str(tmp_path / "g.db")])
    assert result.returncode == 0, result.stderr[-4000:]
    assert "gpu search checks passed" in result.stdout
