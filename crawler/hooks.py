"""Hooks: the user's code that a crawl calls. Checked once, before the crawl starts.

- ``on_page(page)``: an async callback in the main process, awaited for every stored URL
  (a ``CrawledPage``); a slow one slows the crawl down (backpressure), never memory up.
- ``url_filter(url) -> bool``: decides whether a newly found URL (already in scope and not
  a trap) is queued; ``False`` records it as skipped with reason ``filter``.
- ``extract(tree, url) -> JSON value``: runs in the parse workers on the parsed document
  (a ``selectolax.lexbor.LexborHTMLParser``; do not modify it) and its result is stored as
  ``pages.extract``. It must be picklable: a module-level function. Its exceptions are
  logged with the URL; the page is stored without an extract.

An exception raised by ``on_page`` or ``url_filter`` is a bug in the caller's code: the crawl
stops, the run is recorded as ``failed`` (what was stored stays; the rest stays queued)
and the exception reaches the caller of ``run()`` / ``pages()`` as itself.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.errors import ConfigError

if TYPE_CHECKING:
    from crawler.api import CrawledPage

OnPage = Callable[["CrawledPage"], Awaitable[None]]
UrlFilter = Callable[[str], bool]
Extract = Callable[[Any, str], Any]


@dataclass(frozen=True, slots=True)
class Hooks:
    on_page: OnPage | None = None
    url_filter: UrlFilter | None = None
    extract: Extract | None = None

    def __post_init__(self) -> None:
        if self.on_page is not None and not is_async(self.on_page):
            raise ConfigError("on_page must be an async function (async def on_page(page): ...)")
        if self.url_filter is not None and (
            not callable(self.url_filter) or is_async(self.url_filter)
        ):
            raise ConfigError("url_filter must be a plain function: url -> bool (not async)")
        if self.extract is not None:
            if not callable(self.extract) or is_async(self.extract):
                raise ConfigError("extract must be a plain function: (tree, url) -> JSON value")
            try:
                pickle.dumps(self.extract)
            except Exception as exc:
                raise ConfigError(
                    f"extract {self.extract!r} cannot be sent to the parse workers ({exc}): "
                    "use a function defined at module level"
                ) from exc


def is_async(function: object) -> bool:
    """Whether calling ``function`` gives a coroutine: an ``async def``, or an object whose
    ``__call__`` is one (a coroutine a plain hook returned would never be awaited)."""
    call = getattr(type(function), "__call__", None)  # noqa: B004  # the method itself
    return asyncio.iscoroutinefunction(function) or (
        not isinstance(function, type) and asyncio.iscoroutinefunction(call)
    )


def check_progress(callback: object) -> None:
    """``ConfigError`` unless ``callback`` (``on_progress``) is a plain function or ``None``."""
    if callback is not None and (not callable(callback) or is_async(callback)):
        raise ConfigError("on_progress must be a plain function: (Progress) -> None (not async)")
