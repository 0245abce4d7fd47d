"""BestFirstFrontier: the frontier of a crawl with a query, highest priority first. Sans-IO.

Owns, beyond ``crawler.frontier.hosts.Frontier`` (whose politeness it keeps to the letter):
- moving a queued URL up when another page links to it (``raise_priority``: its priority
  is the sum of its links' evidence, ``parsers.priority``); a heap has no decrease-key, so
  the URL gets a new entry and the old one, no longer its live entry, is dropped when it
  comes up (``Frontier._take``); a host's heap of mostly dropped entries is compacted;
- the order across hosts: the hosts whose start time has come wait in ``_due`` by their best
  queued priority, so that with ``--concurrency N`` the best URL among the hosts that may be
  fetched now goes first (a plain frontier takes the host whose time came first).

Invariants (tested with the plain frontier's properties): every URL handed out once; the
per-host limit and delays as in ``Frontier``; ``queued`` counts live entries only.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from crawler.frontier.hosts import _YIELD, PAGE, FetchJob, Frontier, _Entry, _Host
from crawler.policy.scope import url_origin


class BestFirstFrontier(Frontier):
    """A ``Frontier`` whose queued URLs are taken by priority, across hosts too, and move up."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._live: dict[str, _Entry] = {}
        """Each queued page URL's live heap entry."""
        self._due: list[tuple[float, int, str]] = []
        """(minus the host's best queued priority, sequence, origin) of the hosts whose start
        time has come; an entry whose key is not its host's ``due_key`` is dropped."""

    def _queued_live(self, host: _Host, entry: _Entry) -> None:
        self._live[entry[2]] = entry
        self._moved_up(host, entry[0])

    def raise_priority(self, url: str, by: float, now: float) -> bool:
        """Add ``by`` (> 0) to the priority of ``url`` if it is queued in memory (another
        page links to it); whether it moved. A URL not queued here (fetched, in flight, or
        waiting in the store) is left as it is."""
        return self.raise_priorities([(url, by)], now)

    def raise_priorities(self, raises: Iterable[tuple[str, float]], now: float) -> bool:
        """``raise_priority`` of each (url, by), in order; whether any moved. A page's known
        links in one call: each host's place in ``_due``, its compaction and its schedule
        are seen to once, after its entries (a page re-offers dozens of known links, and
        this was the crawl process's costliest call with a query)."""
        live, hosts, push = self._live, self._hosts, heapq.heappush
        seq = self._seq
        moved: dict[str, tuple[_Host, float]] = {}
        """origin -> (its host, its best new key)"""
        for url, by in raises:
            entry = live.get(url)
            if entry is None or by <= 0:
                continue
            origin = url_origin(url)
            host = hosts[origin]
            seq += 1
            key = entry[0] - by
            raised = (key, seq, *entry[2:])
            push(host.queue, raised)  # type: ignore[arg-type]  # an _Entry: two fields anew
            live[url] = raised  # type: ignore[assignment]
            best = moved.get(origin)
            if best is None or key < best[1]:
                moved[origin] = (host, key)
        self._seq = seq
        for host, key in moved.values():
            self._moved_up(host, key)
            if len(host.queue) > 2 * len(live) + 1024:  # mostly dropped entries: compact
                host.queue = [e for e in host.queue if e[4] != PAGE or e[5] or live.get(e[2]) is e]
                heapq.heapify(host.queue)
            self._schedule(host, now)
        return bool(moved)

    def priority_of(self, url: str) -> float | None:
        """The priority ``url`` is queued at in memory, else ``None``."""
        entry = self._live.get(url)
        return None if entry is None else -entry[0]

    def best_due(self, now: float) -> float | None:
        """The highest priority queued on a host that may start now; ``None`` if none may."""
        host = self._due_top(now)
        return None if host is None else -_head(host)

    def next(self, now: float) -> FetchJob | float | None:
        """``Frontier.next``, the host due now with the best queued URL first."""
        while True:
            host = self._due_top(now)
            if host is None:
                return self._ready[0][0] if self._ready else None
            heapq.heappop(self._due)
            host.due_key = None
            host.scheduled = False
            if host.next_start > now + self._early_s(host, now):  # pushed back meanwhile
                self._schedule(host, now)
                continue
            job = self._take(host, now)
            if job is _YIELD:
                return now
            if job is not None:
                return job  # type: ignore[return-value]

    def _moved_up(self, host: _Host, key: float) -> None:
        """``host``'s queue got an entry of heap key ``key``: if the host waits in ``_due``
        at a worse key, it goes in again at this one."""
        if host.due_key is not None and key < host.due_key:
            self._to_due(host)

    def _to_due(self, host: _Host) -> None:
        host.due_key = key = _head(host)
        self._seq += 1
        heapq.heappush(self._due, (key, self._seq, host.origin))

    def _due_top(self, now: float) -> _Host | None:
        """The host due now with the best queued URL (left in ``_due``), after moving the
        hosts whose time came from the time heap; ``None`` if no host is due."""
        ready, due = self._ready, self._due
        while ready:
            start_at, _, origin = ready[0]
            host = self._hosts[origin]
            if start_at > now and start_at > now + self._early_s(host, now):
                break
            heapq.heappop(ready)
            self._to_due(host)
        while due:
            key, _, origin = due[0]
            host = self._hosts[origin]
            if host.due_key != key:  # a better entry of the host is in (``_moved_up``)
                heapq.heappop(due)
            elif _head(host) != key:  # its best URL went (taken, or moved up): again
                heapq.heappop(due)
                self._to_due(host)
            else:
                return host
        return None


def _head(host: _Host) -> float:
    """A host's key in ``_due``: minus its best queued priority."""
    return host.queue[0][0] if host.queue else 0.0
