"""When a fetched page is due again: the adaptive recrawl interval. Pure.

Owns: the schedule of incremental recrawls. A page starts at ``recrawl_after``; each
recrawl that finds it unchanged (304, or the same body) doubles its interval up to
``max_interval``; each change halves it, down to a quarter of ``recrawl_after``. Failures
keep the base interval. Like Heritrix's wait evaluator, in powers of two.
"""

from __future__ import annotations

UNCHANGED, CHANGED, FIRST, FAILED = "unchanged", "changed", "first", "failed"


def next_interval(previous_s: float | None, outcome: str, base_s: float, max_s: float) -> float:
    """The interval until the next fetch, given the last one and what this fetch found."""
    if previous_s is None or outcome in (FIRST, FAILED):
        return min(base_s, max_s)
    floor_s = min(base_s / 4, max_s)
    if outcome == UNCHANGED:
        return min(max(previous_s, floor_s) * 2, max_s)
    if outcome == CHANGED:
        return max(previous_s / 2, floor_s)
    raise ValueError(f"unknown recrawl outcome {outcome!r}")
