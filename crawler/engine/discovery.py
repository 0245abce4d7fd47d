"""Discovery: robots.txt and sitemaps of each origin, between the engine and the frontier.

Owns: getting an origin's robots.txt (reused from the store for 24 h, else fetched, RFC 9309:
2xx → its rules, of its first 500 KiB (a longer one is read to there); 4xx, or redirects
that loop or go on past ``ROBOTS_REDIRECTS`` (or ``--max-redirects``, if more) → allow all; 5xx, 429 or unreachable → retried,
then nothing is fetched there, recorded as ``robots-unavailable``), and reading sitemaps
(robots.txt ``Sitemap:`` lines, else ``/sitemap.xml``; sitemap indexes followed; one over
``--max-body-bytes`` read to there) into the frontier.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial

from crawler.engine.admission import Admission
from crawler.engine.records import utc_now
from crawler.engine.requests import Requests
from crawler.errors import ParseTimeout
from crawler.frontier.hosts import SITEMAP, FetchJob, Frontier
from crawler.policy.robots import MAX_ROBOTS_BYTES, RobotsRules, without_cut_line
from crawler.pool.parse_pool import ParsePool
from crawler.settings import Settings
from parsers.links import resolve_url, url_origin
from parsers.sitemap import parse_sitemap
from storage.base import RobotsRecord, Store

log = logging.getLogger(__name__)

ROBOTS_TTL_S = 24 * 3600
ROBOTS_REDIRECT_TRIES = 3
"""Times a robots.txt whose redirect cannot be followed now (the target's host paced, the
target refused, no Location) is asked for again before it counts as missing (a 404)."""
ROBOTS_REDIRECTS = 5
"""Hops a robots.txt's redirects are followed at least, whatever ``--max-redirects`` (RFC
9309 2.3.1.2: "at least five"); past them it is missing (a 404)."""
MAX_SITEMAPS = 1000
"""Sitemap documents read per origin and crawl at most (indexes can nest and fan out): one
site's index of thousands cannot take another's turn."""
MAX_SITEMAP_HOSTS = 5
"""Origins out of scope one site's robots.txt may send the crawl to for sitemaps: a site
names its own sitemap host or two (a CDN), not a list of others to be visited."""


def robots_rules(status: int, body: bytes | None) -> RobotsRules | None:
    """RFC 9309: 2xx → the rules; other 4xx but 429 → allow all (``None``); else disallow all."""
    if 200 <= status < 300:
        return RobotsRules.parse(body or b"")  # cut by the parser: it drops a line cut there
    if 400 <= status < 500 and status != 429:
        return None
    return RobotsRules.disallow_all()


class Discovery:
    """Handles the ``robots`` and ``sitemap`` jobs of one crawl."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        frontier: Frontier,
        admission: Admission,
        requests: Requests,
        pool: ParsePool,
        wake: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._store = store
        self._frontier = frontier
        self._admission = admission
        self._requests = requests
        self._pool = pool
        self._wake = wake
        self._sitemaps_read: dict[str, int] = {}
        """Sitemap documents queued, by the origin whose robots.txt led to them."""
        self._sitemap_site: dict[str, str] = {}
        """That origin, by sitemap URL queued."""
        self._sitemap_hosts: dict[str, set[str]] = {}
        """The origins out of scope each site's robots.txt named sitemaps on."""

    async def fetch(self, job: FetchJob) -> None:
        """The robots job of ``job.origin``: from the store's cache, or from the server."""
        if self._admission.ssrf_check(job.url) is not None:  # nothing there is requested
            self._requests.release_unfetched(job)
            self._known(job, RobotsRules.disallow_all(), "ssrf")
            return
        cached = await self._store.get_robots(job.origin)
        if cached is not None and _age_s(cached.fetched_at) < ROBOTS_TTL_S:
            self._requests.release_unfetched(job)
            self._known(job, robots_rules(cached.status, cached.body), "robots")
            return
        fetched = await self._requests.fetch(
            job, any_type=True, check_redirect=self._admission.check_robots_redirect,
            prefix=MAX_ROBOTS_BYTES + 1,  # a longer one is read to there (RFC 9309 2.5)
            max_redirects=max(self._settings.max_redirects, ROBOTS_REDIRECTS),
        )  # fmt: skip
        if fetched.retried:
            return
        result = fetched.result
        if result is not None and 300 <= result.status < 400 and result.stopped in (None, "queued"):
            self._unfollowed(job, result.status)  # not refused: its target was not had yet
            return
        if fetched.redirects:  # RFC 9309 2.3.1.2: past five hops, "unavailable": allow all
            log.warning("robots.txt of %s: redirects loop or go on: crawling as if none",
                        job.origin)  # fmt: skip
            self._known(job, None, "robots")
            return
        if result is None or result.status >= 500 or result.status == 429:
            why = fetched.error or f"status {result.status if result else '?'}"
            log.warning("robots.txt of %s unavailable (%s): not crawling it", job.origin, why)
            self._known(job, RobotsRules.disallow_all(), "robots-unavailable")
            return
        body = result.body
        if body is not None and result.truncated and len(body) <= MAX_ROBOTS_BYTES:
            body = without_cut_line(body)  # cut short of the parser's cap: cut as it came
        await self._store.put_robots(RobotsRecord(job.origin, result.status, body, utc_now()))
        self._known(job, robots_rules(result.status, body), "robots")

    def _unfollowed(self, job: FetchJob, status: int) -> None:
        """A redirect with no target, or whose target's host was paced for now: not rules,
        and not to be cached (a 3xx read as rules would disallow the origin for a day).
        Asked again a few times (a paced target's turn comes), then the origin is crawled as
        if it had none (RFC 9309 2.3.1.2: unavailable). A target refused (an address the
        guard refuses, a trap) is unreachable instead: disallow all."""
        now = time.monotonic()
        if job.attempt + 1 < ROBOTS_REDIRECT_TRIES:
            self._frontier.robots_retry(job, now + 2.0**job.attempt, now)
            self._wake()
            return
        log.warning("robots.txt of %s: a %d not followed: crawling as if none", job.origin, status)
        self._known(job, None, "robots")

    def _known(self, job: FetchJob, rules: RobotsRules | None, reason: str) -> None:
        settings = self._settings
        delay = rules.crawl_delay(settings.agent) if rules is not None else None
        self._frontier.robots_done(job, rules, delay, time.monotonic(), reason=reason)
        # A shared frontier (PostgreSQL) reads no sitemaps: each process holding the host in
        # turn would read them again, outside the host's lease. An origin out of scope (one
        # whose robots.txt was read for a sitemap or a hop there) is not asked for its own.
        if (
            settings.sitemaps
            and reason == "robots"
            and self._store.exclusive
            and self._admission.scope.url_allowed(job.url)
        ):
            listed = rules.sitemaps if rules is not None else ()
            for url in listed or ("/sitemap.xml",):
                self._add_sitemap(url, job.url, job.origin, from_robots=True)
        self._wake()

    def _add_sitemap(self, url: str, named_in: str, site: str, *, from_robots: bool) -> None:
        """Queue a sitemap URL, resolved against ``named_in`` (relative ``Sitemap:`` lines
        occur), charged to ``site``, the origin whose robots.txt led to it: one site's
        sitemaps, wherever they are, cannot use up another's turn. ``from_robots``: a
        ``Sitemap:`` line (or the default ``/sitemap.xml``), not an index's child."""
        resolved = resolve_url(named_in, url)
        if resolved is None:
            return
        read = self._sitemaps_read.get(site, 0)
        if read >= MAX_SITEMAPS:
            if read == MAX_SITEMAPS:  # said once
                log.warning("%s: more than %d sitemaps; the rest are not read", site, read)
                self._sitemaps_read[site] = read + 1
            return
        if self._admission.admit_sitemap(resolved, named_in, from_robots) is not None:
            return
        if from_robots and not self._admission.scope.url_allowed(resolved):
            elsewhere = self._sitemap_hosts.setdefault(site, set())
            origin = url_origin(resolved)
            if origin not in elsewhere and len(elsewhere) >= MAX_SITEMAP_HOSTS:
                log.info("%s: sitemaps on more than %d other hosts; %s is not read",
                         site, MAX_SITEMAP_HOSTS, resolved)  # fmt: skip
                return
            elsewhere.add(origin)
        if self._frontier.add(resolved, 1, time.monotonic(), kind=SITEMAP):
            self._sitemaps_read[site] = read + 1
            self._sitemap_site[resolved] = site

    async def fetch_sitemap(self, job: FetchJob) -> None:
        """A sitemap job: its page URLs join the frontier at depth 1; child sitemaps follow."""
        # A longer one is read to the cap: the URLs before the cut are of use. Its hops are
        # vetted as a robots.txt's: a sitemap may be on another host (``admit_sitemap``).
        fetched = await self._requests.fetch(
            job, any_type=True, prefix=self._settings.max_body_bytes,
            check_redirect=self._admission.check_robots_redirect,
        )  # fmt: skip
        result = fetched.result
        if result is None or result.body is None or not 200 <= result.status < 300:
            return
        try:
            sitemap = await self._pool.call(
                partial(parse_sitemap, cut=result.truncated),
                result.body, self._settings.max_body_bytes, 50_000,
            )  # fmt: skip
        except ParseTimeout as exc:
            log.warning("sitemap %s: %s", job.url, exc.message)
            return
        if sitemap.error:
            log.info("sitemap %s: %s", job.url, sitemap.error)
        await self._admission.follow_urls(sitemap.urls, job.depth)
        site = self._sitemap_site.get(job.url, job.origin)
        for child in sitemap.sitemaps:
            self._add_sitemap(child, job.url, site, from_robots=False)


def _age_s(fetched_at: str) -> float:
    try:
        return time.time() - datetime.fromisoformat(fetched_at).timestamp()
    except ValueError:
        return float("inf")
