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

The names are defined in ``crawler.api``, ``crawler.report``, ``crawler.settings`` and
``crawler.errors`` and loaded on first use (PEP 562, ``_LAZY``): ``import crawler`` loads no
engine, HTTP client or parser, and the ``crawl`` command starts its fork server sooner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import parsers  # noqa: F401  (first: its dataclass memo, ``parsers.dataclass_cache``)
from crawler.errors import (
    ConfigError,
    CrawlerError,
    DatabaseLocked,
    FetchError,
    ParseError,
    StorageError,
)

if TYPE_CHECKING:
    from crawler.api import Crawler, crawl, rank, run
    from crawler.api import run_coroutine as run_coroutine
    from crawler.report import CrawledPage, CrawlReport, Progress
    from crawler.report import ProgressCallback as ProgressCallback
    from crawler.settings import Settings

__all__ = [
    "ConfigError",
    "CrawlReport",
    "CrawledPage",
    "Crawler",
    "CrawlerError",
    "DatabaseLocked",
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

_LAZY = {
    "Crawler": "crawler.api",
    "crawl": "crawler.api",
    "rank": "crawler.api",
    "run": "crawler.api",
    "run_coroutine": "crawler.api",
    "CrawledPage": "crawler.report",
    "CrawlReport": "crawler.report",
    "Progress": "crawler.report",
    "ProgressCallback": "crawler.report",
    "Settings": "crawler.settings",
}
"""Each lazily loaded public name, by the module that defines it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crawler' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
