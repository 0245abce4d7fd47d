"""crawler.frontier.seen: the compact set of 64-bit URL hashes (pure)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.frontier import seen
from crawler.frontier.seen import SeenSet

KEYS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_seen_set_matches_a_python_set_across_merges() -> None:
    rng = random.Random(7)
    keys = [rng.getrandbits(64) - 2**63 for _ in range(3 * seen._MERGE_MIN + 100)]
    keys += keys[:1000]  # repeats, before and after merges
    compact, plain = SeenSet(), set()
    for key in keys:
        assert compact.add(key) == (key not in plain)
        plain.add(key)
    assert len(compact) == len(plain)
    assert compact._sorted and compact._recent  # both parts in use
    probe = keys[:500] + [rng.getrandbits(64) - 2**63 for _ in range(500)]
    assert [key in compact for key in probe] == [key in plain for key in probe]
    assert compact.missing(probe) == [key not in plain for key in probe]
    assert list(compact._sorted) == sorted(set(compact._sorted))


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


def test_seen_set_small_merge_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many merges (threshold lowered): the sorted part stays sorted and repeat-free."""
    monkeypatch.setattr(seen, "_MERGE_MIN", 8)
    rng = random.Random(3)
    compact, plain = SeenSet(), set()
    for _ in range(2_000):
        key = rng.randrange(-5_000, 5_000)
        assert compact.add(key) == (key not in plain)
        plain.add(key)
    assert list(compact._sorted) == sorted(set(compact._sorted))
    assert all(key in compact for key in plain)
    assert len(compact) == len(plain)
