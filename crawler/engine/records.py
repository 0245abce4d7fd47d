"""Building the store's records from what the engine learnt about a URL.

Owns: the mapping of fetch results, parsed pages and failures to ``PageRecord`` rows, and
the wall-clock stamp every stored row carries (``utc_now``: UTC, the only wall clock of the
engine; scheduling runs on ``time.monotonic()``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from crawler.frontier.hosts import FetchJob
from crawler.net.fetch import FetchResult
from parsers.page import Page, content_hash
from storage.base import PageRecord

_clock_cache: list[object] = [0, ""]


def utc_now() -> str:
    """Wall-clock time for storage and reports: ISO-8601, UTC, seconds (cached per second)."""
    second = int(time.time())
    if _clock_cache[0] != second:
        stamp = datetime.fromtimestamp(second, UTC).isoformat(timespec="seconds")
        _clock_cache[0], _clock_cache[1] = second, stamp
    return _clock_cache[1]  # type: ignore[return-value]


def failure_record(
    job: FetchJob, reason: str, fetched_at: str, result: FetchResult | None = None
) -> PageRecord:
    """A URL that produced no usable response, or one we refused to parse."""
    return PageRecord(
        url=job.url,
        final_url=result.final_url if result else job.url,
        status=result.status if result else None,
        error=reason,
        content_type=(result.content_type or None) if result else None,
        depth=job.depth,
        body_bytes=len(result.body) if result and result.body is not None else None,
        fetched_at=fetched_at,
        attempts=job.attempt + 1,
    )


def plain_record(job: FetchJob, result: FetchResult, fetched_at: str) -> PageRecord:
    """A response that is not parsed: non-HTML, an HTTP error, a redirect not followed."""
    body = result.body
    return PageRecord(
        url=job.url,
        final_url=result.redirect_to or result.final_url,
        status=result.status,
        error=None,
        content_type=result.content_type or None,
        depth=job.depth,
        body_bytes=len(body) if body is not None else None,
        content_hash=content_hash(body) if body is not None else None,
        fetched_at=fetched_at,
        attempts=job.attempt + 1,
    )


def page_record(
    job: FetchJob,
    page: Page,
    fetched_at: str,
    duplicate_of: str | None = None,
    *,
    score: float | None = None,
    near_duplicate_of: str | None = None,
) -> PageRecord:
    """A parsed HTML page. A duplicate keeps its row and links but not its text."""
    return PageRecord(
        url=job.url,
        final_url=page.final_url,
        status=page.status,
        error=None,
        content_type=page.content_type or None,
        title=page.title,
        text=None if page.noindex or duplicate_of else page.text,
        lang=page.lang,
        canonical=page.canonical,
        meta_robots=page.meta_robots or None,
        depth=job.depth,
        body_bytes=page.body_bytes,
        content_hash=page.content_hash,
        fetched_at=fetched_at,
        links_json=page.links_json,
        attempts=job.attempt + 1,
        duplicate_of=duplicate_of,
        score=score,
        tokens=None if duplicate_of else page.tokens,
        simhash=page.simhash if page.text else None,
        near_duplicate_of=near_duplicate_of,
        extract=page.extract,
    )


def unchanged_record(job: FetchJob, result: FetchResult, fetched_at: str) -> PageRecord:
    """A recrawl that found the stored version current: a 304, or the same body again."""
    return PageRecord(
        url=job.url,
        final_url=result.final_url,
        status=result.status,
        error=None,
        content_type=result.content_type or None,
        depth=job.depth,
        body_bytes=len(result.body) if result.body is not None else 0,
        fetched_at=fetched_at,
        attempts=job.attempt + 1,
        unchanged=True,
    )
