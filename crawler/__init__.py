"""A fast, polite, crash-safe web crawler.

Library use::

    import crawler

    report = crawler.run(["https://example.com/"], crawler.Settings(db="example.db"))
    # or, inside asyncio code:
    report = await crawler.crawl(["https://example.com/"], crawler.Settings(max_pages=100))
    # or streaming, with hooks:
    async with crawler.Crawler(crawler.Settings(db="example.db")) as c:
        async for page in c.pages(["https://example.com/"]):
            print(page.status, page.url, page.title)

Each call is an independent run with its own HTTP session, parse pool and database
connection, so a process can crawl any number of times. Imports here are lazy, so that
``import crawler`` (and ``crawl --help``) stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawler.errors import (
    ConfigError,
    CrawlerError,
    FetchError,
    ParseError,
    StorageError,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from crawler.api import CrawledPage, Crawler
    from crawler.report import CrawlReport, Progress, ProgressCallback
    from crawler.settings import Settings

__all__ = [
    "ConfigError",
    "CrawlReport",
    "CrawledPage",
    "Crawler",
    "CrawlerError",
    "FetchError",
    "ParseError",
    "Progress",
    "Settings",
    "StorageError",
    "crawl",
    "rank",
    "run",
]

__version__ = "0.1.0"


async def crawl(
    seeds: Iterable[str],
    settings: Settings | None = None,
    *,
    db: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> CrawlReport:
    """Crawl from ``seeds`` (absolute http(s) URLs) and store the pages; returns the report.

    ``db`` overrides ``settings.db``. ``on_progress`` is called about twice a second with a
    ``Progress`` snapshot. Raises ``ConfigError`` for a bad seed, ``StorageError`` when the
    database cannot be written.
    """
    from crawler.engine.engine import Engine
    from crawler.seeds import parse_seed
    from crawler.settings import Settings

    settings = settings or Settings()
    if db is not None:
        settings = settings.replace(db=db)
    normalized = list(dict.fromkeys(parse_seed(s, f"seed {s!r}") for s in seeds))
    if not normalized:
        raise ConfigError("no seed URLs given")
    return await Engine(settings, normalized, on_progress=on_progress).run()


def run(
    seeds: Iterable[str],
    settings: Settings | None = None,
    *,
    db: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> CrawlReport:
    """``crawl`` for synchronous code: runs its own event loop (uvloop when installed)."""
    return run_coroutine(crawl(seeds, settings, db=db, on_progress=on_progress))


def rank(db: str, query: str, top: int = 10, device: str = "auto") -> list[Any]:
    """Rank the pages stored in ``db`` by BM25 relevance to ``query``: the ``top`` best
    (``crawler.relevance.ranking.RankedPage``: url, title, score), best first. No re-parsing."""
    from crawler.relevance.ranking import rank as rank_pages

    return rank_pages(db, query, top, device)


def run_coroutine(coroutine: Any) -> Any:
    """Run a coroutine to completion on a fresh uvloop (or asyncio) event loop."""
    import asyncio

    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def __getattr__(name: str) -> Any:
    if name == "Settings":  # not imported up front: ``crawl`` starts its fork server sooner
        from crawler.settings import Settings

        return Settings
    if name in ("CrawlReport", "Progress"):
        from crawler import report

        return getattr(report, name)
    if name in ("Crawler", "CrawledPage"):
        from crawler import api

        return getattr(api, name)
    raise AttributeError(f"module 'crawler' has no attribute {name!r}")
