"""crawler.frontier.pace: adaptive per-host delay (pure; time passed in)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.frontier.pace import HostPace


def test_starts_at_the_minimum() -> None:
    pace = HostPace(min_delay_s=1.0)
    assert pace.next_delay_s() == 1.0
    assert pace.next_start_after(10.0) == 11.0


def test_delay_follows_latency_over_target_concurrency() -> None:
    pace = HostPace(min_delay_s=0.0, target_concurrency=2.0)
    pace.on_response(4.0, 200, now=0.0)
    assert pace.delay_s == 2.0  # a rising latency is followed at once
    pace.on_response(0.0, 200, now=1.0)
    assert pace.delay_s == 1.0  # a falling one halfway per response
    pace.on_response(0.0, 200, now=2.0)
    assert pace.delay_s == 0.5


def test_error_statuses_never_lower_the_delay() -> None:
    pace = HostPace(min_delay_s=0.0)
    pace.on_response(3.0, 200, now=0.0)
    for status in (404, 410, 301):
        pace.on_response(0.01, status, now=1.0)
        assert pace.delay_s == 3.0
    pace.on_response(5.0, 404, now=2.0)
    assert pace.delay_s == 5.0  # but they may raise it


@pytest.mark.parametrize("status", [429, 503, 500, 502, 504])
def test_backoff_doubles_up_to_the_maximum_then_relaxes(status: int) -> None:
    pace = HostPace(min_delay_s=0.5, max_delay_s=10.0)
    delays = []
    for _ in range(6):
        pace.on_response(0.1, status, now=0.0)
        delays.append(pace.delay_s)
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    pace.on_response(0.1, 200, now=1.0)
    assert pace.delay_s == pytest.approx(5.05)
    for _ in range(30):
        pace.on_response(0.1, 200, now=2.0)
    assert pace.delay_s == pytest.approx(0.5)  # back at the floor (latency 0.1 < 0.5)


def test_backoff_from_zero_uses_the_start_value() -> None:
    pace = HostPace(min_delay_s=0.0, backoff_start_s=0.25)
    pace.on_error(now=0.0)
    assert pace.delay_s == 0.25
    pace.on_error(now=0.0)
    assert pace.delay_s == 0.5


def test_pause_until_only_extends() -> None:
    pace = HostPace(min_delay_s=1.0)
    pace.pause_until(100.0)
    pace.pause_until(50.0)
    pace.pause_until(float("nan"))
    assert pace.paused_until == 100.0
    assert pace.next_start_after(10.0) == 100.0
    assert pace.next_start_after(200.0) == 201.0


def test_raise_min_delay_for_crawl_delay() -> None:
    pace = HostPace(min_delay_s=1.0, max_delay_s=5.0)
    pace.raise_min_delay(0.5)
    assert pace.min_delay_s == 1.0
    pace.raise_min_delay(20.0)  # Crawl-delay above the maximum wins
    assert (pace.min_delay_s, pace.max_delay_s, pace.delay_s) == (20.0, 20.0, 20.0)


def test_max_below_min_is_raised_and_bad_values_refused() -> None:
    assert HostPace(min_delay_s=3.0, max_delay_s=1.0).max_delay_s == 3.0
    for kwargs in ({"min_delay_s": -1.0}, {"min_delay_s": math.inf},
                   {"min_delay_s": 1.0, "target_concurrency": 0.0}):  # fmt: skip
        with pytest.raises(ValueError):
            HostPace(**kwargs)  # type: ignore[arg-type]


def test_non_finite_latency() -> None:
    pace = HostPace(min_delay_s=1.0, max_delay_s=30.0)
    pace.on_response(math.nan, 200, now=0.0)
    assert pace.delay_s == 1.0
    pace.on_response(math.inf, 200, now=0.0)
    assert pace.delay_s == 30.0


latencies = st.floats(allow_nan=True, allow_infinity=True)
events = st.one_of(
    st.tuples(st.just("response"), latencies, st.integers(100, 599)),
    st.tuples(st.just("response"), latencies, st.sampled_from([429, 503])),
    st.tuples(st.just("error"), st.just(0.0), st.just(0)),
    st.tuples(st.just("pause"), st.floats(allow_nan=True), st.just(0)),
    st.tuples(st.just("crawl-delay"), st.floats(allow_nan=True), st.just(0)),
)


@given(
    min_delay=st.floats(0.0, 100.0),
    max_delay=st.floats(0.0, 1000.0),
    target=st.floats(0.01, 64.0),
    script=st.lists(events, max_size=60),
)
def test_delay_always_within_bounds(
    min_delay: float, max_delay: float, target: float, script: list[tuple[str, float, int]]
) -> None:
    pace = HostPace(min_delay_s=min_delay, max_delay_s=max_delay, target_concurrency=target)
    floor = min_delay
    for now, (kind, value, status) in enumerate(script):
        if kind == "response":
            pace.on_response(value, status, float(now))
        elif kind == "error":
            pace.on_error(float(now))
        elif kind == "pause":
            pace.pause_until(value)
        elif value >= 0:
            pace.raise_min_delay(value)
            if math.isfinite(value):
                floor = max(floor, value)
        assert pace.min_delay_s == floor  # never below the configured minimum
        assert floor <= pace.delay_s <= pace.max_delay_s
        assert math.isfinite(pace.delay_s)
        assert pace.next_start_after(float(now)) >= now + floor
