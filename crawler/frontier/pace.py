"""Per-host pacing that adapts to the server (like Scrapy's AutoThrottle). Pure: ``now`` comes in.

Owns: one host's delay between request starts, and the pause a ``Retry-After`` imposes.

The delay follows the server's latency: a server that answers in ``L`` seconds can take about
``target_concurrency`` requests in flight, that is one request start every
``L / target_concurrency`` seconds. Each response moves the delay halfway towards that target
(``new = (old + L / target) / 2``), but a rising latency is followed at once
(``new >= L / target``). Responses other than 2xx never lower the delay: error pages and
redirects are small and fast and would otherwise speed the crawl up against a failing server
(Scrapy's rule). Server distress doubles the delay (from at least ``backoff_start_s``): 429 and
any 5xx response, and a failure of the transport (timeout, refused or reset connection);
successful responses then relax it again, halfway per response. The crawler's own refusals
(scope, robots.txt, the SSRF guard, a body too large ...) are not the server's distress and
are not reported here at all.

Invariants (tested as properties):
- ``min_delay_s <= delay_s <= max_delay_s`` after every call;
- ``min_delay_s`` is never below what the user asked for (``--delay``) nor below the site's
  ``Crawl-delay`` once known: ``raise_min_delay`` only ever raises it;
- ``next_start_after(t) >= t + min_delay_s`` and ``>= paused_until``.

The ``now`` arguments are not used by today's rules; they are part of the API so that
time-based rules (relaxing after a quiet period) need no change in the callers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["HostPace", "distress"]


def distress(status: int) -> bool:
    """Whether a response says the server is struggling: 429, or any 5xx."""
    return status == 429 or status >= 500


@dataclass(slots=True)
class HostPace:
    """The pace of one host. Build it with the crawl's ``--delay`` as ``min_delay_s``."""

    min_delay_s: float
    """Floor of the delay: ``max(--delay, Crawl-delay)``."""
    max_delay_s: float = 60.0
    """Ceiling of the delay (raised to ``min_delay_s`` if that is higher)."""
    target_concurrency: float = 1.0
    """Requests the server should be handling at once, on average."""
    backoff_start_s: float = 1.0
    """Smallest delay after a backoff, so that doubling a zero delay slows down at all."""
    delay_s: float = field(init=False)
    """Current delay between two request starts."""
    paused_until: float = field(default=0.0, init=False)
    """No request may start before this time (``Retry-After``)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min_delay_s) and self.min_delay_s >= 0):
            raise ValueError(f"min_delay_s must be finite and >= 0, got {self.min_delay_s}")
        if not math.isfinite(self.max_delay_s):
            raise ValueError(f"max_delay_s must be finite, got {self.max_delay_s}")
        if not (math.isfinite(self.target_concurrency) and self.target_concurrency > 0):
            raise ValueError(f"target_concurrency must be > 0, got {self.target_concurrency}")
        if not (math.isfinite(self.backoff_start_s) and self.backoff_start_s >= 0):
            raise ValueError(f"backoff_start_s must be finite and >= 0, got {self.backoff_start_s}")
        self.max_delay_s = max(self.max_delay_s, self.min_delay_s)
        self.delay_s = self.min_delay_s

    def on_response(self, latency_s: float, status: int, now: float) -> None:
        """A response arrived ``latency_s`` seconds after its request started."""
        if distress(status):
            self._back_off()
            return
        if not math.isfinite(latency_s):
            if latency_s > 0:  # an unbounded latency: as slow as we ever go
                self._set(self.max_delay_s)
            return  # NaN: no information
        target_s = max(latency_s, 0.0) / self.target_concurrency
        new_s = max(target_s, (self.delay_s + target_s) / 2.0)
        if not 200 <= status < 300 and new_s <= self.delay_s:
            return
        self._set(new_s)

    def on_error(self, now: float) -> None:
        """A request failed without a response for the server's sake (timeout, refused,
        reset): slow down."""
        self._back_off()

    def pause_until(self, t: float) -> None:
        """Start nothing on this host before ``t`` (from ``Retry-After``); pauses only extend."""
        if t > self.paused_until:  # False for NaN
            self.paused_until = t

    def raise_min_delay(self, delay_s: float) -> None:
        """Raise the floor, e.g. to the ``Crawl-delay`` of robots.txt; a lower value is ignored."""
        if delay_s > self.min_delay_s and math.isfinite(delay_s):
            self.min_delay_s = delay_s
            self.max_delay_s = max(self.max_delay_s, delay_s)
            self._set(self.delay_s)

    def next_delay_s(self) -> float:
        """Seconds between the start of a request and the start of the next one."""
        return self.delay_s

    def next_start_after(self, start: float) -> float:
        """When the next request may start, given that one started at ``start``."""
        return max(start + self.delay_s, self.paused_until)

    def _back_off(self) -> None:
        self._set(max(self.delay_s * 2.0, self.backoff_start_s))

    def _set(self, delay_s: float) -> None:
        self.delay_s = min(max(delay_s, self.min_delay_s), self.max_delay_s)
