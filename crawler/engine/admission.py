"""Admission: which newly found URLs the crawl queues, and which redirect hops it follows.

Owns: the decision for every URL the crawl meets (a page's link, a sitemap's entry, a
redirect's target): scope, traps (``crawler.policy.traps``, the template budget's query
shapes), the user's ``url_filter``, the SSRF guard's verdict on IP literals (memoised per
origin), robots.txt for redirect targets, and the record of every URL refused
(``skip``: the ``skipped`` rows and the report's counts). A hop that is followed keeps its
host's pace (``pace_hop``).

Invariants: a URL refused once is marked seen and refused for the run (but for the links of
a page whose template is closed: not marked, a page elsewhere may still lead there); every
refusal is recorded with its reason exactly once per decision.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from crawler.engine.records import utc_now
from crawler.engine.window import Window
from crawler.frontier.hosts import Frontier
from crawler.net.guard import HostAllowed, check_url_host
from crawler.policy.scope import Scope
from crawler.policy.traps import TemplateBudget, TrapLimits, strip_session_ids, trap_reason
from crawler.report import RunCounters
from parsers.links import normalize_url, strip_userinfo, url_origin
from parsers.priority import REOFFER_MIN, link_evidence
from storage.base import SkipRecord

log = logging.getLogger(__name__)

FOLLOW_STEP = 1000
"""Sitemap URLs are queued in steps of this many, with the event loop's work between."""
HOP_PRIORITY = 1e9
"""A redirect target queued because its host's pace would make it wait too long goes first
among that host's URLs."""


class Admission:
    """The admission decisions of one run."""

    def __init__(
        self,
        *,
        scope: Scope,
        trap_limits: TrapLimits,
        templates: TemplateBudget | None,
        url_filter: Callable[[str], bool] | None,
        host_allowed: HostAllowed,
        max_depth: int | None,
        frontier: Frontier,
        window: Window,
        counters: RunCounters,
        wake: Callable[[], None],
    ) -> None:
        self._scope = scope
        self._trap_limits = trap_limits
        self._templates = templates
        self._url_filter = url_filter
        self._host_allowed = host_allowed
        self._max_depth = max_depth
        self._frontier = frontier
        self._window = window
        self._counters = counters
        self._wake = wake
        self._ssrf_memo: dict[str, str | None] = {}
        self.skips: list[SkipRecord] = []

    @property
    def scope(self) -> Scope:
        return self._scope

    def take_skips(self) -> list[SkipRecord]:
        """The URLs refused since the last call, for the store's next write."""
        skips, self.skips = self.skips, []
        return skips

    def skip(self, url: str, depth: int | None, reason: str) -> None:
        """Record a URL the crawl decided not to fetch (``skipped`` table, summary)."""
        self._counters.skipped[reason] += 1
        self.skips.append(SkipRecord(url, reason, depth, utc_now()))

    def skip_refused(self) -> None:
        """Record the URLs the frontier dropped (robots.txt, the per-host budget, the gate)."""
        if self._frontier.skipped:
            for url, depth, reason in self._frontier.drain_skipped():
                self.skip(url, depth, reason)

    def admit(self, url: str) -> str | None:
        """``None`` if a newly found URL may be queued, else why not (scope, trap ...)."""
        reason = self._scope.check(url) or trap_reason(url, self._trap_limits)
        if reason is None and self._url_filter is not None and not self._url_filter(url):
            return "filter"
        return reason

    def ssrf_check(self, url: str) -> str | None:
        """``"ssrf"`` if the URL's host is an IP literal the guard refuses, else ``None``.

        Memoised per origin (``check_url_host`` depends only on it); the kind of address
        refused is logged once.
        """
        origin = url_origin(url)
        try:
            return self._ssrf_memo[origin]
        except KeyError:
            kind = check_url_host(url, self._host_allowed)
            if kind is not None:
                log.warning("refusing %s: %s address (SSRF guard; --allow-private)", origin, kind)
            verdict = self._ssrf_memo[origin] = None if kind is None else "ssrf"
            return verdict

    def follow(
        self,
        links: tuple[str, ...],
        depth: int,
        relevance: float | None = None,
        anchor_hits: dict[str, int] | None = None,
        closed: bool = False,
        *,
        query_words: int = 0,
    ) -> None:
        """Offer links to the frontier. With a query (``relevance``, the linking page's
        ``parsers.priority.page_relevance``; ``query_words``, the query's), each link
        brings ``link_evidence`` of the page and of the query words in its anchor text
        (``anchor_hits``): a new URL is queued at it, one still queued in memory has it
        added to its priority (best-first crawling, by relevance-weighted backlinks) when the
        evidence reaches ``REOFFER_MIN``; from a page less relevant without a query word in
        an anchor, every new link is queued at its relevance and none moved up. ``closed``: the linking page's template was closed by the template
        budget: its links are not followed (skipped as ``url-template``, but not marked
        seen)."""
        if self._max_depth is not None and depth > self._max_depth:
            return
        if closed:
            relevance = None
        elif relevance is not None and (relevance >= REOFFER_MIN or anchor_hits):
            self._follow_ranked(links, depth, relevance, anchor_hits or {}, query_words)
            return
        base = relevance or 0.0  # the evidence of each link: no link is moved up by it
        frontier, now = self._frontier, time.monotonic()
        added = False
        for url in frontier.unseen(links):
            if "?" in url or ";" in url or "@" in url:
                url = strip_session_ids(strip_userinfo(url))
                if frontier.seen(url):
                    continue
            reason = self.admit(url)
            if reason is None and closed:
                self.skip(url, depth, "url-template")
                continue
            if reason is None and "?" in url and self._templates is not None:
                reason = self._templates.admit(url)
            if reason is None:
                added |= self._window.enqueue(url, depth, now, base)
            else:
                frontier.mark_seen(url)  # refused now means refused for this run
                self.skip(url, depth, reason)
        if added:
            self._wake()

    def _follow_ranked(
        self,
        links: tuple[str, ...],
        depth: int,
        relevance: float,
        anchor_hits: dict[str, int],
        query_words: int,
    ) -> None:
        """``follow`` with a query: new links queued at their evidence, known ones still
        queued in memory raised by it."""
        frontier, now = self._frontier, time.monotonic()
        added = False
        raises: list[tuple[str, float]] = []
        plain = link_evidence(relevance, 0, query_words)  # a link without a query word
        urls = [
            strip_session_ids(strip_userinfo(url))
            if "?" in url or ";" in url or "@" in url
            else url
            for url in links
        ]
        # Most of a page's links are known: one pass over the seen set for all of them, and
        # the known ones' evidence without a call each. A URL new here is asked again when
        # its turn comes: an earlier link of this page (a repeat once stripped) may have
        # queued it since.
        for link, url, new in zip(links, urls, frontier.missing(urls), strict=True):
            hits = anchor_hits.get(link, 0) if anchor_hits else 0
            evidence = plain if not hits else link_evidence(relevance, hits, query_words)
            if not new or frontier.seen(url):
                if evidence >= REOFFER_MIN:  # as the workers offer a known link again
                    raises.append((url, evidence))
                continue
            reason = self.admit(url)
            if reason is None and "?" in url and self._templates is not None:
                reason = self._templates.admit(url)
            if reason is None:
                added |= self._window.enqueue(url, depth, now, evidence)
            else:
                frontier.mark_seen(url)
                self.skip(url, depth, reason)
        if raises:
            added |= frontier.raise_priorities(raises, now)
        if added:
            self._wake()

    async def follow_urls(self, urls: Iterable[str], depth: int) -> None:
        """Queue absolute URLs from elsewhere than a page (a sitemap), normalised first, in
        steps of ``FOLLOW_STEP`` with the event loop's other work between them (a sitemap
        lists up to 50,000)."""
        normalized: list[str] = []
        for url in urls:
            try:
                normalized.append(normalize_url(url))
            except ValueError:
                continue
            if len(normalized) >= FOLLOW_STEP:
                self.follow(tuple(normalized), depth)
                normalized.clear()
                await asyncio.sleep(0)
        self.follow(tuple(normalized), depth)

    def check_redirect(self, target: str, depth: int) -> str | None:
        """``crawler.net.fetch.RedirectCheck`` for a page's hop: scope, traps, SSRF,
        robots.txt, and seen-before; a target on an origin whose robots.txt is not known yet
        is queued there instead (``queued``)."""
        frontier = self._frontier
        robots = frontier.allowed_by_robots(target)
        reason = self.admit(target) or self.ssrf_check(target)
        if reason is None and robots is False:
            reason = "robots"
        if reason is not None:
            if frontier.mark_seen(target):
                self.skip(target, depth, reason)
            return reason
        if robots is None:
            if self._window.enqueue(target, depth, time.monotonic()):
                self._wake()
                return "queued"
            return "seen"
        return None if frontier.mark_seen(target) else "seen"

    def check_robots_redirect(self, target: str) -> str | None:
        """The check of a robots.txt's hop: it may leave the scope (RFC 9309 §2.3.1.2), but
        never to an address the SSRF guard refuses (a seed's other ports too), nor a trap."""
        return self.ssrf_check(target) or trap_reason(target, self._trap_limits)

    def admit_sitemap(self, url: str, named_in: str, from_robots: bool) -> str | None:
        """``None`` if the sitemap ``url``, named in the document ``named_in``, may be read.
        One named in a robots.txt may be on any host (sitemaps.org: a robots.txt may point
        to a sitemap elsewhere, and that sitemap may then list this site's pages); a sitemap
        index's children are on a host in scope or the index's own origin. Never an
        address the SSRF guard refuses, nor a trap. ``--include``/``--exclude`` and the
        ``url_filter`` judge the pages it lists, not the sitemap."""
        if not (
            from_robots or self._scope.url_allowed(url) or url_origin(url) == url_origin(named_in)
        ):
            return "scope"
        return self.check_robots_redirect(url)

    def pace_hop(self, target: str, limit_s: float, depth: int, queue: bool = True) -> float | None:
        """``crawler.net.fetch.HopPacer``: a hop keeps its host's pace; one that could not be
        sent before its fetch's deadline is queued instead (then ``None``; not with
        ``queue``, for a robots.txt's hop, which is no page to crawl)."""
        now = time.monotonic()
        wait_s = self._frontier.hop(target, now, limit_s)
        if (
            wait_s is None
            and queue
            and self._window.enqueue(target, depth, now, HOP_PRIORITY, known=True)
        ):
            self._wake()
        return wait_s
