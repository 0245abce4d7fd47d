"""``parsers.kernel_cache.quick_cache_loads``: cached kernels load without numba's compiler set-up.

Each case runs in a fresh interpreter (numba's contexts are process-wide) on a small kernel
of its own that allocates (so it needs numba's runtime), with its own cache directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.proc import ROOT as ROOT_DIR
from tests.proc import child_env

REPO = ROOT_DIR

KERNEL = """
import numpy as np
from numba import njit


@njit(cache=True)
def squares(n):
    out = np.empty(n, dtype=np.int64)  # numba's np.empty: from numba.np.arrayobj
    if n > 100:
        raise ValueError("too many squares")
    for i in range(n):
        out[i] = i * i
    return out


@njit(cache=True)
def total(values):
    sum = 0
    for value in values:
        sum += value
    return sum
"""

RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from numba.core.caching import Cache
if sys.argv[2] == "quick-load-fails":
    real = Cache._load_overload
    failed = []

    def failing_once(self, sig, target_context):
        if not failed:
            failed.append(True)
            raise RuntimeError("symbol not found")
        return real(self, sig, target_context)

    Cache._load_overload = failing_once
original = Cache.load_overload
from parsers.kernel_cache import quick_cache_loads
from numba.core import environment
rebuild_env = environment._rebuild_env
import numpy as np
with quick_cache_loads() as quick:
    import kern
    result = kern.squares(6).tolist()
    result_total = kern.total(np.arange(5))  # numba's typeof of an ndarray: np.ma asked
ma_loaded = "numpy.ma" in sys.modules
import numba
try:
    numba.typeof(np.ma.array([1, 2]))  # the real np.ma after the block: refused as before
    masked = "accepted"
except numba.core.errors.NumbaTypeError:
    masked = "refused"
errors = []
for n in (101, -1):  # raised by our code, and by numba's np.empty (negative size)
    try:
        kern.squares(n)
    except ValueError as exc:
        errors.append(str(exc))
print(json.dumps({
    "errors": errors,
    "ma_loaded": ma_loaded,
    "masked": masked,
    "total": int(result_total),
    "arrayobj_loaded": "numba.np.arrayobj" in sys.modules,
    "env_restored": environment._rebuild_env is rebuild_env,
    "quick": quick,
    "result": result,
    "registries_loaded": "numba.np.arraymath" in sys.modules,
    "hits": sum(kern.squares.stats.cache_hits.values()),
    "misses": sum(kern.squares.stats.cache_misses.values()),
    "restored": Cache.load_overload is original,
}))
"""


def _run(tmp_path: Path, mode: str = "normal") -> dict[str, Any]:
    (tmp_path / "kern.py").write_text(textwrap.dedent(KERNEL))
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path), mode],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


SQUARES = [0, 1, 4, 9, 16, 25]


def test_a_cache_miss_compiles_and_a_hit_loads_without_the_lowering_registries(
    tmp_path: Path,
) -> None:
    first = _run(tmp_path)
    assert first["quick"] and first["restored"]
    assert first["result"] == SQUARES
    assert (first["misses"], first["hits"]) == (1, 0)  # compiled, with numba's full set-up
    assert first["registries_loaded"]

    second = _run(tmp_path)
    assert second["result"] == SQUARES
    assert (second["misses"], second["hits"]) == (0, 1)  # from the cache
    assert not second["registries_loaded"]  # numba's lowering registries were not imported
    assert not second["arrayobj_loaded"]  # nor the module of np.empty's environment
    assert not second["ma_loaded"]  # nor numpy's masked arrays, for the ndarray's typeof
    assert first["total"] == second["total"] == 10
    assert first["masked"] == second["masked"] == "refused"  # and np.ma is numpy's after
    assert second["restored"] and second["env_restored"]
    # the kernel's exceptions, its own and numba's, need no module globals either
    assert (
        first["errors"]
        == second["errors"]
        == [
            "too many squares",
            "negative dimensions not allowed",
        ]
    )


def test_a_quick_load_that_fails_is_retried_the_normal_way(tmp_path: Path) -> None:
    _run(tmp_path)  # fills the cache
    retried = _run(tmp_path, "quick-load-fails")
    assert retried["result"] == SQUARES
    assert retried["hits"] == 1  # loaded from the cache all the same, after a refresh
    assert retried["registries_loaded"]
    assert retried["restored"]


STUB = """
import json, pickle, sys
sys.path.insert(0, sys.argv[1])
from numba.core import environment
from parsers.kernel_cache import _environments_without_imports

assert "numba.np.arrayobj" not in sys.modules
env = environment.Environment({"__name__": "numba.np.arrayobj"})
env.consts[:] = [7, "seven"]
env.env_name = "stub-test-env"
mine = environment.Environment({"__name__": "kern_of_a_hook"})
mine.env_name = "hook-env"
blobs = pickle.dumps(env), pickle.dumps(mine)
del env, mine  # out of numba's memo (weak values): unpickling must rebuild them
numba_own = _environments_without_imports()
with numba_own():
    with _environments_without_imports()():  # nested: the outer swap stays in charge
        pass
    env = pickle.loads(blobs[0])
    repickled = pickle.loads(pickle.dumps(env))  # an Environment pickles while swapped
    try:
        pickle.loads(blobs[1])
        other = "rebuilt"
    except ModuleNotFoundError:
        other = "imported"  # numba's own rebuilding: it imports the module
print(json.dumps({
    "consts": list(env.consts),
    "same": repickled is env,
    "arrayobj_loaded": "numba.np.arrayobj" in sys.modules,
    "other": other,
    "restored": environment._rebuild_env.__name__ == "_rebuild_env"
    and not getattr(environment._rebuild_env, "_without_imports", False),
}))
"""


def test_only_numbas_own_modules_get_environments_without_their_globals() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STUB, str(REPO)],
        capture_output=True, text=True, env=child_env(), timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["consts"] == [7, "seven"]  # what nopython code reads is there
    assert not result["arrayobj_loaded"]
    assert result["same"]  # rebuilt once, then found in numba's memo
    assert result["other"] == "imported"  # a module not numba's own: imported as numba would
    assert result["restored"]
