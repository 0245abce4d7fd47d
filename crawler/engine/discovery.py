"""Discovery: robots.txt and sitemaps of each origin, between the engine and the frontier.

Owns: getting an origin's robots.txt (reused from the store for 24 h, else fetched, RFC 9309:
2xx → its rules; 4xx → allow all; 5xx, 429 or unreachable → retried, then nothing is fetched
there, recorded as ``robots-unavailable``), and reading sitemaps (robots.txt ``Sitemap:``
lines, else ``/sitemap.xml``; sitemap indexes followed) into the frontier.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING

from crawler.errors import ParseTimeout
from crawler.frontier.hosts import SITEMAP, FetchJob
from crawler.policy.robots import MAX_ROBOTS_BYTES, RobotsRules
from crawler.policy.scope import resolve_url
from crawler.policy.traps import trap_reason
from parsers.sitemap import parse_sitemap
from storage.base import RobotsRecord

if TYPE_CHECKING:
    from crawler.engine.engine import Engine

log = logging.getLogger(__name__)

ROBOTS_TTL_S = 24 * 3600
MAX_SITEMAPS = 1000
"""Sitemap documents read per crawl at most (indexes can nest and fan out)."""


def robots_rules(status: int, body: bytes | None) -> RobotsRules | None:
    """RFC 9309: 2xx → the rules; other 4xx but 429 → allow all (``None``); else disallow all."""
    if 200 <= status < 300:
        return RobotsRules.parse((body or b"")[:MAX_ROBOTS_BYTES])
    if 400 <= status < 500 and status != 429:
        return None
    return RobotsRules.disallow_all()


class Discovery:
    """Handles the ``robots`` and ``sitemap`` jobs of one crawl."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sitemaps_read = 0

    async def fetch(self, job: FetchJob) -> None:
        """The robots job of ``job.origin``: from the store's cache, or from the server."""
        engine = self._engine
        if engine.ssrf_check(job.url) is not None:  # nothing on a refused host is requested
            engine.release_unfetched(job)
            self._known(job, RobotsRules.disallow_all(), "ssrf")
            return
        cached = await engine.store.get_robots(job.origin)
        if cached is not None and _age_s(cached.fetched_at) < ROBOTS_TTL_S:
            engine.release_unfetched(job)
            self._known(job, robots_rules(cached.status, cached.body), "robots")
            return
        fetched = await engine.fetch(job, any_type=True, check_redirect=self._robots_redirect)
        if fetched.retried:
            return
        result = fetched.result
        if result is None or result.status >= 500 or result.status == 429:
            why = fetched.error or f"status {result.status if result else '?'}"
            log.warning("robots.txt of %s unavailable (%s): not crawling it", job.origin, why)
            self._known(job, RobotsRules.disallow_all(), "robots-unavailable")
            return
        body = result.body[:MAX_ROBOTS_BYTES] if result.body is not None else None
        record = RobotsRecord(job.origin, result.status, body, engine.now_utc())
        await engine.store.put_robots(record)
        self._known(job, robots_rules(result.status, body), "robots")

    def _robots_redirect(self, target: str) -> str | None:
        """robots.txt may redirect to another host (RFC 9309 §2.3.1.2): a hop vetted as any
        other but for the crawl's scope (and paced by its host, as every hop): never to an
        address the SSRF guard refuses (a seed's other ports included), nor a trap."""
        return self._engine.ssrf_check(target) or trap_reason(target)

    def _known(self, job: FetchJob, rules: RobotsRules | None, reason: str) -> None:
        engine = self._engine
        delay = rules.crawl_delay(engine.settings.user_agent) if rules is not None else None
        engine.frontier.robots_done(job, rules, delay, time.monotonic(), reason=reason)
        # A shared frontier (PostgreSQL) reads no sitemaps: each process holding the host in
        # turn would read them again, outside the host's lease.
        if engine.settings.sitemaps and reason == "robots" and engine.store.exclusive:
            listed = rules.sitemaps if rules is not None else ()
            for url in listed or ("/sitemap.xml",):
                self._add_sitemap(url, job.url)
        engine.wake()

    def _add_sitemap(self, url: str, base: str) -> None:
        """Queue a sitemap URL, resolved against ``base`` (relative ``Sitemap:`` lines occur)."""
        resolved = resolve_url(base, url)
        if resolved is None:
            return
        url = resolved
        engine = self._engine
        if self._sitemaps_read >= MAX_SITEMAPS or engine.admit(url) is not None:
            return
        if engine.frontier.add(url, 1, time.monotonic(), kind=SITEMAP):
            self._sitemaps_read += 1

    async def fetch_sitemap(self, job: FetchJob) -> None:
        """A sitemap job: its page URLs join the frontier at depth 1; child sitemaps follow."""
        engine = self._engine
        fetched = await engine.fetch(job, any_type=True)
        result = fetched.result
        if result is None or result.body is None or not 200 <= result.status < 300:
            return
        settings = engine.settings
        try:
            sitemap = await engine.pool.call(
                parse_sitemap, result.body, settings.max_body_bytes, 50_000
            )
        except ParseTimeout as exc:
            log.warning("sitemap %s: %s", job.url, exc.message)
            return
        if sitemap.error:
            log.info("sitemap %s: %s", job.url, sitemap.error)
        await engine.follow_urls(sitemap.urls, job.depth)
        for child in sitemap.sitemaps:
            self._add_sitemap(child, job.url)


def _age_s(fetched_at: str) -> float:
    try:
        return time.time() - datetime.fromisoformat(fetched_at).timestamp()
    except ValueError:
        return float("inf")
