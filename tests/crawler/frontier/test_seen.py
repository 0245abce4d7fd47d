"""crawler.frontier.seen: the compact set of 64-bit URL hashes (pure), in both forms: the C
type (``crawler/frontier/_seen.c``) and the Python class it stands in for."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.frontier import seen
from crawler.frontier.seen import PySeenSet

KEYS = st.integers(min_value=-(2**63), max_value=2**63 - 1)

try:
    from crawler.frontier._seen import SeenSet as CSeenSet
except ImportError:  # not compiled here; CI compiles it
    CSeenSet = None
    if os.environ.get("CI"):
        raise

KINDS = [PySeenSet, pytest.param(CSeenSet, marks=pytest.mark.skipif(CSeenSet is None,
         reason="crawler.frontier._seen not compiled"))]  # fmt: skip


@pytest.fixture(params=KINDS, ids=["python", "c"])
def kind(request: pytest.FixtureRequest) -> type[PySeenSet]:
    """Each form of the set: the tests hold both to the same answers."""
    return request.param  # type: ignore[no-any-return]


def test_the_seen_set_is_the_c_type_where_it_is_compiled() -> None:
    assert seen.SeenSet is (CSeenSet or PySeenSet)


def assert_invariants(compact: PySeenSet, load: int = seen.LOAD) -> None:
    """Runs non-empty, bounded, sorted, repeat-free, in order; maxes and size agree."""
    runs = compact._runs
    assert all(0 < len(run) <= 2 * load for run in runs)
    flat = [key for run in runs for key in run]
    assert flat == sorted(set(flat))
    assert list(compact._maxes) == [run[-1] for run in runs]
    assert len(compact) == len(flat)


def test_seen_set_matches_a_python_set_across_splits(kind: type[PySeenSet]) -> None:
    rng = random.Random(7)
    keys = [rng.getrandbits(64) - 2**63 for _ in range(20 * seen.LOAD)]
    keys += keys[:1000]  # repeats, after splits
    compact, plain = kind(), set()
    for key in keys:
        assert compact.add(key) == (key not in plain)
        plain.add(key)
    assert len(compact) == len(plain)
    assert len(compact._runs) > 10  # many splits
    probe = keys[:500] + [rng.getrandbits(64) - 2**63 for _ in range(500)]
    assert [key in compact for key in probe] == [key in plain for key in probe]
    assert compact.missing(probe) == [key not in plain for key in probe]
    assert_invariants(compact)


@given(st.lists(st.tuples(st.booleans(), KEYS), max_size=300), st.sampled_from([1, 2, 4, 1024]))
def test_seen_set_behaves_as_a_set(ops: list[tuple[bool, int]], load: int) -> None:
    """Both forms answer every step as a Python set does, at any load, and keep the same
    layout: the same runs, split at the same keys."""
    sets = [PySeenSet(load)] + ([CSeenSet(load)] if CSeenSet is not None else [])
    plain: set[int] = set()
    for is_add, key in ops:
        if is_add:
            assert [s.add(key) for s in sets] == [key not in plain] * len(sets)
            plain.add(key)
        else:
            assert [key in s for s in sets] == [key in plain] * len(sets)
    for compact in sets:
        assert len(compact) == len(plain)
        assert compact.missing(k for _, k in ops) == [k not in plain for _, k in ops]
        assert_invariants(compact, load)
    assert len({repr([list(run) for run in s._runs]) for s in sets}) == 1


@pytest.mark.parametrize("order", ["rising", "falling", "one-place", "random"])
def test_seen_set_small_runs_any_order(kind: type[PySeenSet], order: str) -> None:
    """Tiny runs (load 4): every order of keys, a skewed one too, keeps the runs bounded,
    sorted and in order, and the set answers like a Python set."""
    rng = random.Random(3)
    keys = {
        "rising": list(range(-1_000, 1_000)),
        "falling": list(range(1_000, -1_000, -1)),
        "one-place": [2**62 + i for i in range(500)] + [-(2**62) + i for i in range(500)],
        "random": [rng.randrange(-5_000, 5_000) for _ in range(2_000)],
    }[order]
    compact, plain = kind(4), set()
    for key in keys + keys[::7]:
        assert compact.add(key) == (key not in plain)
        plain.add(key)
    assert_invariants(compact, 4)
    assert all(key in compact for key in plain)
    assert (
        compact.missing([min(plain) - 1, max(plain) + 1, *sorted(plain)[:9]])
        == [True] * 2 + [False] * 9
    )


def test_seen_set_empty_and_extremes(kind: type[PySeenSet]) -> None:
    compact = kind()
    assert len(compact) == 0 and 5 not in compact and compact.missing([1, 2]) == [True, True]
    for key in (2**63 - 1, -(2**63), 0):
        assert compact.add(key) and not compact.add(key)
    assert all(key in compact for key in (2**63 - 1, -(2**63), 0)) and len(compact) == 3
    assert 1 not in compact


def test_seen_set_refuses_what_is_no_64_bit_int(kind: type[PySeenSet]) -> None:
    """An int outside 64 bits is never added, and never there; anything else is refused."""
    compact = kind()
    compact.add(1)
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(OverflowError):
            compact.add(bad)
        assert bad not in compact and compact.missing([1, bad]) == [False, True]
    for wrong in ("1", None):
        with pytest.raises(TypeError):
            compact.add(wrong)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            compact.missing([wrong])  # type: ignore[list-item]
    assert len(compact) == 1 and compact.missing(iter([1, 2])) == [False, True]


def test_seen_set_does_not_load_numpy() -> None:
    """The crawl process holds the set: a hundred thousand keys load no numpy (~20 MB)."""
    code = (
        "import random, sys\n"
        "from crawler.frontier.seen import SeenSet\n"
        "s = SeenSet()\n"
        "for _ in range(100_000): s.add(random.getrandbits(63))\n"
        "print('numpy' in sys.modules, len(s))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "100000"]
