"""Pages: a page job from its request to the record the store writes.

Owns: a page's path after the fetch: unchanged (a 304, or the stored bytes again), not
parsed (an HTTP error, not HTML), or parsed (in a worker; in this process while no worker is
up, for pages cheap to parse here), then exact duplicates and canonicals, near-duplicates,
the template budget's verdict, the query's score, its links offered to the admission, and
what the store keeps for its next visit (validators, recrawl interval, the raw exchange).

With a query, each link adds ``parsers.priority.link_evidence`` of the page's relevance and
the link's anchor text to its target's priority (``Admission.follow``).

Invariants: a page announced to the template budget (``parsing``) is judged or abandoned
exactly once; a page's links are offered once (without a query, those of a page parsed here
are offered before its terms are known, so their fetches overlap the workers' start; with
one, after: their priorities need the page's relevance).
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Awaitable, Callable
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from crawler.engine.admission import Admission
from crawler.engine.records import (
    failure_record,
    page_record,
    plain_record,
    unchanged_record,
    utc_now,
)
from crawler.engine.requests import Requests
from crawler.errors import CrawlerError, ParseError
from crawler.frontier.hosts import FetchJob, Frontier
from crawler.net.fetch import FetchResult
from crawler.policy.recrawl import CHANGED, FAILED, FIRST, UNCHANGED, next_interval
from crawler.policy.traps import TemplateBudget, url_template
from crawler.pool.here import costly
from crawler.pool.parse_pool import ParsePool
from crawler.relevance.neardup import NearDuplicates
from crawler.report import RunCounters, band
from crawler.settings import Settings
from parsers.html import RankedMemo, parse_document, ranked_new_links, resolve_each
from parsers.page import Page, ParseJob, same_content
from parsers.priority import page_relevance
from parsers.terms import plain_terms
from parsers.worker import text_terms
from storage.base import PageRecord

if TYPE_CHECKING:
    from crawler.relevance.focus import Focus

log = logging.getLogger(__name__)

NEAR_DUPLICATE_MIN_CHARS = 200
"""Shorter texts make SimHash too coarse to call two pages near-duplicates."""
HERE_MAX_BYTES = 256 << 10
"""Bodies up to this are parsed in this process while no worker is up (a few ms of the
event loop a page; a service running the crawl on its own loop would feel more); bigger
ones, and pages whose shape makes the parser slow (``costly``), wait for a worker."""
PLAIN_TERMS_MAX_CHARS = 16 << 10
"""A page parsed here with at most this much text has its terms computed here too, in
plain Python (``plain_terms``, linear in the text), while no worker is up: a short crawl then
never waits for the workers' start; longer texts wait for a worker's kernels."""


class Pages:
    """The page jobs of one run."""

    def __init__(
        self,
        *,
        settings: Settings,
        requests: Requests,
        pool: ParsePool,
        admission: Admission,
        frontier: Frontier,
        templates: TemplateBudget | None,
        focus: Focus | None,
        counters: RunCounters,
        parse_here: bool,
        room: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._settings = settings
        self._room = room
        """Waited on before a page's links are offered (``Writer.room``): the URLs found
        wait for the store in bounded numbers."""
        self._requests = requests
        self._pool = pool
        self._admission = admission
        self._frontier = frontier
        self._templates = templates
        self._focus = focus
        self._counters = counters
        self._parse_here = parse_here
        """Parse pages here while no parse worker is up (``_parse_in_process``)."""
        self._hashes: dict[str, str] = {}
        self._near = NearDuplicates()
        self.parsed_here = 0
        self._ranked_here = RankedMemo()
        """With a query, what the pages parsed here offered (``ranked_new_links``), as a
        worker's memo."""

    async def fetch(self, job: FetchJob) -> PageRecord | None:
        """The record of page ``job``, or ``None`` when a retry was scheduled instead."""
        fetched_at = utc_now()
        fetched = await self._requests.fetch(job)
        result = fetched.result
        if fetched.retried:
            return None
        if result is None:
            assert fetched.error is not None
            return failure_record(job, fetched.error, fetched_at)
        if self._settings.verbose:
            log.info("%d %s", result.status, job.url)
        record = await self._record(job, result, fetched_at)
        return schedule(job, result, record, self._settings)

    async def _record(self, job: FetchJob, result: FetchResult, fetched_at: str) -> PageRecord:
        """The record of a response: parsed when it is HTML, unchanged when a recrawl found
        the stored version current."""
        known = job.known
        if known is not None and (
            (result.status == 304 and (known.etag or known.last_modified))
            or (
                known.content_hash is not None
                and 200 <= result.status < 300
                and result.body is not None
                and same_content(result.body, known.content_hash)
            )
        ):
            return unchanged_record(job, result, fetched_at)
        if not 200 <= result.status < 300 or result.body is None or not result.is_html:
            return plain_record(job, result, fetched_at)
        focus = self._focus
        parse_job = ParseJob(
            job.url, result.final_url, result.status, result.content_type, result.charset,
            result.body, result.x_robots_tag, self._settings.max_outlinks, job.depth,
            *((focus.terms, focus.ids) if focus is not None else ()),
        )  # fmt: skip
        budget = self._templates
        template = budget.parsing(job.url) if budget is not None else ""
        try:
            if (
                self._parse_here
                and not self._pool.ready
                and len(result.body) <= HERE_MAX_BYTES
                and not costly(result.body)
            ):
                page = await self._parse_in_process(parse_job, template)
                template = ""  # judged there
            else:
                page = await self._pool.parse(parse_job)
        except BaseException as exc:
            if budget is not None and template:
                budget.abandon(template)
            if not isinstance(exc, ParseError):
                raise
            log.warning("cannot parse %s: %s", job.url, exc.message)
            return failure_record(job, exc.reason, fetched_at, result)
        if page.extract_error is not None:
            log.warning("extract failed on %s: %s", job.url, page.extract_error)
        duplicate_of = self._duplicate_of(job, page)
        closed = bool(template) and self._judge(
            template, job.url, page.text, page.simhash, duplicate_of
        )
        near = None
        if duplicate_of is None and len(page.text) >= NEAR_DUPLICATE_MIN_CHARS:
            near = self._near.first_near(page.simhash, job.url)
        score = relevance = None
        if focus is not None:
            relevance = page_relevance(page.query_tf, page.token_length)
            if duplicate_of is None:
                score = await focus.score_terms(page.query_tf, page.token_length)
                self._counters.scored.append(band(relevance))
        # A duplicate's links are followed too: relative links of the same bytes at another
        # URL lead elsewhere, and the workers' memo of offered links relies on it.
        if self._room is not None and page.followable:
            await self._room()
        self._admission.follow(
            page.followable, job.depth + 1, relevance, page.anchor_hits, closed,
            query_words=len(focus.terms) if focus is not None else 0,
        )  # fmt: skip
        return page_record(job, page, fetched_at, duplicate_of, score=score,
                           near_duplicate_of=near)  # fmt: skip

    async def _parse_in_process(self, job: ParseJob, template: str) -> Page:
        """No parse worker is up yet (they start in the crawl's first fraction of a second,
        while this process is mostly idle): parse the page here, and the terms of a short
        text too (``plain_terms``; a longer one's wait for a worker's kernels). Its links are
        offered at once, so that their fetches and parses overlap the workers' start; with a
        query, at priorities from the page's query words counted here in plain Python
        (``Focus.count_here``; the worker's counts are the same) and with a memo as a
        worker's (``ranked_new_links``). Same ``Page`` as a worker's parse (the tests hold them equal). The page is judged by
        the template budget here, before its links go (without its SimHash: a long text
        then goes unjudged)."""
        try:
            offered = self._ranked_here.depth if job.query_terms else None
            page = parse_document(job, offered, resolve_each)
        except Exception as exc:  # like a worker's ``ParseFailure``
            raise ParseError(job.url, f"{type(exc).__name__}: {exc}") from None
        self.parsed_here += 1
        closed = False
        if self._templates is not None:
            first = self._hashes.setdefault(page.content_hash, job.url)
            duplicate_of = first if first != job.url else None
            closed = self._judge(template, job.url, page.text, None, duplicate_of)
        focus = self._focus
        if self._room is not None and page.followable:
            await self._room()
        if focus is not None and job.query_terms and not closed:
            page.query_tf, page.token_length = focus.count_here(page.text)
            links = ranked_new_links(page, job.depth + 1, self._ranked_here)
            self._admission.follow(links, job.depth + 1, page_relevance(page.query_tf,
                                   page.token_length), page.anchor_hits,
                                   query_words=len(job.query_terms))  # fmt: skip
        else:  # a closed template's links are skipped, with or without a query
            self._admission.follow(page.followable, job.depth + 1, None, None, closed)
        page.follow = ()  # offered: the later ``follow`` has nothing to do
        try:
            if len(page.text) <= PLAIN_TERMS_MAX_CHARS and not self._pool.ready:
                terms = plain_terms(page.text, job.query_ids)
            else:
                terms = await self._pool.call(text_terms, page.text, job.query_ids)
        except (CrawlerError, BrokenProcessPool):  # the pool's, as for a worker's parse
            raise
        except Exception as exc:  # raised by ``text_terms``: a page's failure there too
            raise ParseError(job.url, f"{type(exc).__name__}: {exc}") from None
        page.tokens, page.token_length, page.simhash, page.query_tf = terms
        return page

    def _duplicate_of(self, job: FetchJob, page: Page) -> str | None:
        """The URL this page duplicates: same content stored before, or a canonical known."""
        first = self._hashes.setdefault(page.content_hash, job.url)
        if first != job.url:
            return first
        canonical = page.canonical
        if (
            canonical
            and canonical not in (job.url, page.final_url)
            and self._admission.scope.check(canonical) is None
            and not self._frontier.mark_seen(canonical)
        ):
            return canonical  # the canonical URL is stored or queued already
        return None

    def _judge(
        self, template: str, url: str, text: str, simhash: int | None, duplicate_of: str | None
    ) -> bool:
        """Record a parsed page with the template budget (``crawler.policy.traps``); whether
        its template is closed now, so that the page's links are not followed."""
        budget = self._templates
        assert budget is not None
        budget.page(template, url, text, simhash, duplicate_of)
        if not budget.closed(template):
            return False
        self._frontier.gate = self._template_gate  # queued URLs of closed templates too
        return True

    def _template_gate(self, url: str) -> str | None:
        """``Frontier.gate`` once a template is closed: its queued URLs are not fetched."""
        budget = self._templates
        assert budget is not None
        return "url-template" if budget.closed(url_template(url)) else None


def schedule(
    job: FetchJob, result: FetchResult, record: PageRecord, settings: Settings
) -> PageRecord:
    """Add what the store keeps for the next visit: validators, interval, due time, and with
    ``--store-body`` the raw exchange."""
    known = job.known
    if record.unchanged:
        outcome = UNCHANGED
    elif record.state == "failed":
        outcome = FAILED
    elif known is None or known.content_hash is None:
        outcome = FIRST
    else:
        outcome = UNCHANGED if known.content_hash == record.content_hash else CHANGED
    interval = next_interval(known.interval_s if known else None, outcome,
                             settings.recrawl_after, settings.max_interval)  # fmt: skip
    body = None
    if settings.store_body and result.raw is not None and not record.unchanged:
        body = zlib.compress(result.raw, 6)
    record.etag, record.last_modified = result.etag, result.last_modified
    record.next_fetch_at, record.interval_s = time.time() + interval, interval
    if body is not None:
        record.body, record.headers = body, result.headers_json
    return record
