"""crawler.policy.retry: the pure retry decision and Retry-After parsing."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.policy.retry import Outcome, RetryPolicy, backoff_s, classify, parse_retry_after

POLICY = RetryPolicy()


@pytest.mark.parametrize("status", [200, 204, 301, 304, 400, 401, 403, 404, 410, 451, 501, 505])
def test_final_statuses_are_ok(status: int) -> None:
    assert classify(status, None, 0, POLICY) == Outcome("ok", f"status-{status}")


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_transient_statuses_are_retried_then_fail(status: int) -> None:
    rng = random.Random(1)
    for attempt in range(POLICY.max_retries):
        outcome = classify(status, None, attempt, POLICY, rng=rng)
        assert outcome.kind == "retry" and outcome.reason == f"status-{status}"
    assert classify(status, None, POLICY.max_retries, POLICY) == Outcome(
        "failed", f"status-{status}"
    )


@pytest.mark.parametrize("reason", ["timeout", "connect"])
def test_transport_errors_are_retried(reason: str) -> None:
    assert classify(None, reason, 0, POLICY, rng=random.Random(0)).kind == "retry"
    assert classify(None, reason, 2, POLICY) == Outcome("failed", reason)


@pytest.mark.parametrize("reason", ["too-large", "bad-response", "blocked", "robots"])
def test_other_errors_fail_at_once(reason: str) -> None:
    assert classify(None, reason, 0, POLICY) == Outcome("failed", reason)


def test_error_wins_over_status() -> None:
    assert classify(200, "bad-response", 0, POLICY) == Outcome("failed", "bad-response")
    assert classify(404, "timeout", 0, POLICY, rng=random.Random(0)).kind == "retry"


def test_needs_status_or_error() -> None:
    with pytest.raises(ValueError):
        classify(None, None, 0, POLICY)


def test_configurable_sets_and_counts() -> None:
    policy = RetryPolicy(max_retries=0, retry_statuses=frozenset({418}))
    assert classify(418, None, 0, policy).kind == "failed"
    policy = RetryPolicy(max_retries=5, retry_statuses=frozenset({418}), retry_errors=frozenset())
    assert classify(418, None, 4, policy, rng=random.Random(0)).kind == "retry"
    assert classify(503, None, 0, policy).kind == "ok"
    assert classify(None, "timeout", 0, policy).kind == "failed"


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError):
        RetryPolicy(backoff_base_s=float("nan"))


def test_jitter_is_deterministic_with_a_seeded_rng() -> None:
    first = [classify(503, None, a, POLICY, rng=random.Random(42)) for a in range(2)]
    again = [classify(503, None, a, POLICY, rng=random.Random(42)) for a in range(2)]
    assert first == again
    assert first[0].delay_s != first[1].delay_s


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=10.0)
    rng = random.Random(7)
    for attempt, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (100, 10.0)]:
        draws = [backoff_s(attempt, policy, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > ceiling * 0.9  # full jitter spans the whole range


def test_retry_after_replaces_backoff_and_is_capped() -> None:
    assert classify(429, None, 0, POLICY, retry_after_s=12.5).delay_s == 12.5
    assert classify(503, None, 1, POLICY, retry_after_s=10_000).delay_s == 300.0
    assert classify(503, None, 0, POLICY, retry_after_s=-5).delay_s == 0.0
    nan = classify(503, None, 0, POLICY, retry_after_s=float("nan"), rng=random.Random(0))
    assert 0.0 <= nan.delay_s <= POLICY.backoff_base_s
    assert classify(503, None, 2, POLICY, retry_after_s=1).kind == "failed"
    assert classify(404, None, 0, POLICY, retry_after_s=1).kind == "ok"


@given(
    status=st.one_of(st.none(), st.integers(100, 599)),
    error=st.one_of(st.none(), st.sampled_from(["timeout", "connect", "too-large"])),
    attempt=st.integers(0, 10),
    retry_after=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    seed=st.integers(0, 2**32),
)
def test_classify_invariants(
    status: int | None, error: str | None, attempt: int, retry_after: float | None, seed: int
) -> None:
    if status is None and error is None:
        return
    outcome = classify(status, error, attempt, POLICY, retry_after_s=retry_after,
                       rng=random.Random(seed))  # fmt: skip
    bound = max(POLICY.backoff_max_s, POLICY.max_retry_after_s)
    assert 0.0 <= outcome.delay_s <= bound
    if outcome.kind == "retry":
        assert attempt < POLICY.max_retries
    if error is None and status is not None and 400 <= status < 500:
        assert outcome.kind != "retry" or status in (408, 429)


# -- parse_retry_after ------------------------------------------------------------------------

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("  0 ", 0.0),
        ("1.5", 1.5),
        ("99999999999999999999", 300.0),
        ("Sun, 01 Jun 2025 12:00:30 GMT", 30.0),
        ("Sunday, 01-Jun-25 12:01:00 GMT", 60.0),  # RFC 850 form
        ("Sun Jun  1 12:00:10 2025", 10.0),  # asctime form (no zone: UTC)
        ("Sun, 01 Jun 2025 11:00:00 GMT", 0.0),  # in the past
        ("Sun, 01 Jun 2025 14:00:00 GMT", 300.0),  # capped
        ("Sun, 01 Jun 2025 14:00:00 +0200", 0.0),  # 12:00 UTC
        ("", None),
        ("-5", None),
        ("soon", None),
        ("1e3", None),
        ("nan", None),
        ("inf", None),
        ("Sun, 99 Jun 2025 12:00:00 GMT", None),
    ],
)
def test_parse_retry_after(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


def test_parse_retry_after_round_trips_format_datetime() -> None:
    when = datetime(2025, 6, 1, 12, 2, 0, tzinfo=UTC)
    assert parse_retry_after(format_datetime(when, usegmt=True), NOW, max_s=1000) == 120.0


@given(st.text(max_size=60), st.floats(0, 4e9))
def test_parse_retry_after_never_raises(value: str, now: float) -> None:
    seconds = parse_retry_after(value, now)
    assert seconds is None or 0.0 <= seconds <= 300.0
