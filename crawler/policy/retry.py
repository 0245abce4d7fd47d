"""Retry policy: after one attempt at a URL, is it done, worth another try (when), or failed?

Owns: which failures are transient, how many retries a URL gets, and how long to wait before
the next one. Pure: no clock, no IO; randomness (the backoff jitter) comes from an injected
``random.Random``, so a seeded generator makes every decision reproducible.

Invariants:
- at most ``max_retries`` retries: ``attempt`` counts the retries already made (0 after the
  first request), and ``attempt >= max_retries`` never yields ``retry``;
- a 4xx status other than those in ``retry_statuses`` (408, 429 by default) is never retried;
- ``0 <= delay_s <= max(backoff_max_s, max_retry_after_s)`` for every ``retry``;
- backoff is "full jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter"): a
  uniform draw in ``[0, min(backoff_max_s, backoff_base_s * 2**attempt)]``, which spreads
  retries of many URLs of one host instead of bunching them;
- a server's ``Retry-After`` (parsed by ``parse_retry_after``) replaces the backoff, capped by
  ``max_retry_after_s``.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from datetime import UTC
from typing import Literal

__all__ = ["Outcome", "OutcomeKind", "RetryPolicy", "classify", "parse_retry_after"]

OutcomeKind = Literal["ok", "retry", "failed"]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
RETRY_ERRORS = frozenset({"timeout", "connect", "proxy"})
"""``FetchError.reason`` words of transient transport failures (``crawler.errors``)."""

_SECONDS = re.compile(r"\d{1,20}(\.\d{1,9})?")
_RNG = random.Random()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a crawl retries. The defaults suit a polite crawl."""

    max_retries: int = 2
    """Retries after the first attempt (so at most ``max_retries + 1`` requests per URL)."""
    retry_statuses: frozenset[int] = RETRY_STATUSES
    """HTTP statuses worth another try."""
    retry_errors: frozenset[str] = RETRY_ERRORS
    """Transport error reasons worth another try."""
    backoff_base_s: float = 2.0
    """Upper bound of the first retry's jittered wait; doubles with each retry."""
    backoff_max_s: float = 60.0
    """Upper bound of any jittered wait."""
    max_retry_after_s: float = 300.0
    """Longest ``Retry-After`` honoured; longer ones are cut to this."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        for name in ("backoff_base_s", "backoff_max_s", "max_retry_after_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict on one attempt.

    ``kind``: ``ok`` (the response is final and is recorded as it is, HTTP errors such as 404
    included), ``retry`` (try again after ``delay_s`` seconds) or ``failed`` (give up).
    ``reason``: the error word (``timeout``, ``connect``, ``too-large`` ...) or ``status-NNN``.
    """

    kind: OutcomeKind
    reason: str
    delay_s: float = 0.0


def classify(
    status: int | None,
    error_reason: str | None,
    attempt: int,
    policy: RetryPolicy,
    *,
    retry_after_s: float | None = None,
    rng: random.Random | None = None,
) -> Outcome:
    """Decide what follows an attempt that got ``status`` or failed with ``error_reason``.

    ``error_reason`` (a ``FetchError.reason``) wins when both are given: a body that broke
    off after the status line is judged by the error. ``attempt`` is the number of retries
    already made. ``retry_after_s`` is the server's ``Retry-After`` in seconds, if any.

    >>> policy = RetryPolicy()
    >>> classify(404, None, 0, policy)
    Outcome(kind='ok', reason='status-404', delay_s=0.0)
    >>> classify(503, None, 0, policy, retry_after_s=7)
    Outcome(kind='retry', reason='status-503', delay_s=7.0)
    >>> classify(None, "timeout", 2, policy).kind
    'failed'
    """
    if error_reason is not None:
        reason, transient = error_reason, error_reason in policy.retry_errors
    elif status is not None:
        transient = status in policy.retry_statuses
        if not transient:
            return _ok(status)
        reason = f"status-{status}"
    else:
        raise ValueError("classify needs a status or an error reason")
    if not transient or attempt >= policy.max_retries:
        return Outcome("failed", reason)
    if retry_after_s is not None and math.isfinite(retry_after_s):
        delay_s = min(max(retry_after_s, 0.0), policy.max_retry_after_s)
    else:
        delay_s = backoff_s(attempt, policy, rng or _RNG)
    return Outcome("retry", reason, float(delay_s))


_OK_OUTCOMES: dict[int, Outcome] = {}


def _ok(status: int) -> Outcome:
    """The ``ok`` outcome of ``status``: one shared instance per status (one is needed per
    response, and an ``Outcome`` is immutable)."""
    outcome = _OK_OUTCOMES.get(status)
    if outcome is None:
        outcome = _OK_OUTCOMES[status] = Outcome("ok", f"status-{status}")
    return outcome


def backoff_s(attempt: int, policy: RetryPolicy, rng: random.Random) -> float:
    """A full-jitter wait before retry number ``attempt + 1``."""
    ceiling_s = min(policy.backoff_max_s, policy.backoff_base_s * 2.0 ** min(attempt, 64))
    return rng.uniform(0.0, ceiling_s)


def parse_retry_after(value: str, now_epoch: float, max_s: float = 300.0) -> float | None:
    """Seconds to wait from a ``Retry-After`` header, at most ``max_s``; ``None`` if unusable.

    Accepts delay-seconds (``120``; a fraction is tolerated) and an HTTP-date, which is
    compared with ``now_epoch`` (wall-clock seconds since the epoch, UTC). A date in the past
    means 0.

    >>> parse_retry_after("120", 0.0)
    120.0
    >>> parse_retry_after("Thu, 01 Jan 1970 00:01:00 GMT", 30.0)
    30.0
    >>> parse_retry_after("soon", 0.0) is None
    True
    """
    text = value.strip()
    if _SECONDS.fullmatch(text):
        return min(float(text), max_s)
    from email.utils import parsedate_to_datetime  # slow to import: only for a date

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # "-0000" dates: the RFC says UTC
    try:
        delay_s = when.timestamp() - now_epoch
    except (OverflowError, OSError, ValueError):
        return None
    return min(max(delay_s, 0.0), max_s)
