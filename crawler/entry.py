"""The ``crawl`` console script: starts the parse workers' fork server first, then the CLI.

A crawl's first page waits for the fork server's preload (numba, lexbor: ~0.4 s of one
core). Started here, before click and the crawler are imported, it is ready ~0.1 s earlier
than when the command itself starts it (``crawler.cli`` still does, for other callers).
Commands that never parse (``export``, ``rank``, ``runs``, ``stats``, ``--help``,
``--version``) start nothing; a crawl that stops on a usage error leaves a fork server that
exits once its preload is done.
"""

from __future__ import annotations

import sys

_OTHER_COMMANDS = frozenset({"export", "rank", "runs", "stats"})
_NO_RUN = frozenset({"-h", "--help", "--version"})


def crawls(args: list[str]) -> bool:
    """Whether ``crawl ARGS`` is a crawl (the default command), judged from the words alone:
    a wrong guess only starts the fork server for nothing, or later."""
    return bool(args) and args[0] not in _OTHER_COMMANDS and _NO_RUN.isdisjoint(args)


def main() -> None:
    if crawls(sys.argv[1:]):
        from crawler.forkserver import prestart

        prestart()
    from crawler.cli import main as cli

    cli()
