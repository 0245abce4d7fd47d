"""The ``crawl`` command: a thin skin over the library (``crawler.crawl``) and the store.

  app        the command group, exit codes, ``fail``
  crawl      ``crawl SEEDS``: flags from ``Settings`` (options), logging, progress, runner
  export, rank, runs, stats      one module per command that reads a database
  options    click options made from ``Settings.flags()``
  reference  the flag table of docs/cli.md, made from the same (``python -m ...``)
  format     plain-text report and stats lines
  runner     event loop, signals and clean stop of a CLI crawl
  entry      the console script: fork server first, then the command
  tuning     process settings (collector, BLAS threads) for a command's process

Exit codes: 0 the crawl finished (HTTP errors are data), 1 the crawl failed (storage
error, bug), 2 usage or configuration error, 75 the database is locked by another crawl,
130/143 interrupted by SIGINT/SIGTERM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler.cli.app import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    # ``main`` (click and the command group) on first use: the console script
    # (``crawler.cli.entry``) starts the fork server before it loads them.
    if name != "main":
        raise AttributeError(f"module 'crawler.cli' has no attribute {name!r}")
    return importlib.import_module("crawler.cli.app").main
