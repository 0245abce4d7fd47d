"""crawler.frontier.seen: the compact set of 64-bit URL hashes (pure)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.frontier import seen
from crawler.frontier.seen import SeenSet

KEYS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def assert_invariants(compact: SeenSet) -> None:
    """Runs non-empty, bounded, sorted, repeat-free, in order; maxes and size agree."""
    runs = compact._runs
    assert all(0 < len(run) <= 2 * seen.LOAD for run in runs)
    flat = [key for run in runs for key in run]
    assert flat == sorted(set(flat))
    assert list(compact._maxes) == [run[-1] for run in runs]
    assert len(compact) == len(flat)


def test_seen_set_matches_a_python_set_across_splits() -> None:
    rng = random.Random(7)
    keys = [rng.getrandbits(64) - 2**63 for _ in range(20 * seen.LOAD)]
    keys += keys[:1000]  # repeats, after splits
    compact, plain = SeenSet(), set()
    for key in keys:
        assert compact.add(key) == (key not in plain)
        plain.add(key)
    assert len(compact) == len(plain)
    assert len(compact._runs) > 10  # many splits
    probe = keys[:500] + [rng.getrandbits(64) - 2**63 for _ in range(500)]
    assert [key in compact for key in probe] == [key in plain for key in probe]
    assert compact.missing(probe) == [key not in plain for key in probe]
    assert_invariants(compact)


@given(st.lists(st.tuples(st.booleans(), KEYS), max_size=300))
def test_seen_set_behaves_as_a_set(ops: list[tuple[bool, int]]) -> None:
    compact, plain = SeenSet(), set()
    for is_add, key in ops:
        if is_add:
            assert compact.add(key) == (key not in plain)
            plain.add(key)
        else:
            assert (key in compact) == (key in plain)
    assert len(compact) == len(plain)
    assert compact.missing(k for _, k in ops) == [k not in plain for _, k in ops]


@pytest.mark.parametrize("order", ["rising", "falling", "one-place", "random"])
def test_seen_set_small_runs_any_order(monkeypatch: pytest.MonkeyPatch, order: str) -> None:
    """Tiny runs (LOAD 4): every order of keys, a skewed one too, keeps the runs bounded,
    sorted and in order, and the set answers like a Python set."""
    monkeypatch.setattr(seen, "LOAD", 4)
    rng = random.Random(3)
    keys = {
        "rising": list(range(-1_000, 1_000)),
        "falling": list(range(1_000, -1_000, -1)),
        "one-place": [2**62 + i for i in range(500)] + [-(2**62) + i for i in range(500)],
        "random": [rng.randrange(-5_000, 5_000) for _ in range(2_000)],
    }[order]
    compact, plain = SeenSet(), set()
    for key in keys + keys[::7]:
        assert compact.add(key) == (key not in plain)
        plain.add(key)
    assert_invariants(compact)
    assert all(key in compact for key in plain)
    assert (
        compact.missing([min(plain) - 1, max(plain) + 1, *sorted(plain)[:9]])
        == [True] * 2 + [False] * 9
    )


def test_seen_set_empty_and_extremes() -> None:
    compact = SeenSet()
    assert len(compact) == 0 and 5 not in compact and compact.missing([1, 2]) == [True, True]
    for key in (2**63 - 1, -(2**63), 0):
        assert compact.add(key) and not compact.add(key)
    assert all(key in compact for key in (2**63 - 1, -(2**63), 0)) and len(compact) == 3
    assert 1 not in compact


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
