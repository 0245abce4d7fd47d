"""Crawl from a plain (synchronous) script with ``crawler.run``, then read the database.

What it shows:

- ``crawler.run(seeds, settings)``: no asyncio in sight; it runs its own event loop and
  returns a ``CrawlReport`` when the crawl has ended;
- ``crawler.Settings``: built from keyword arguments, or read from a TOML file with the
  same keys as the ``crawl`` command's flags (``Settings.from_toml``), then adjusted with
  ``replace`` (settings are frozen: ``replace`` returns a checked copy);
- errors: ``crawler.ConfigError`` for bad settings or seeds, ``crawler.CrawlerError`` for
  the rest;
- the database as the result: a plain SQLite file (``pages``, ``links``, ``skipped`` ...)
  that any tool can read.

Run it::

    python examples/sync_script.py https://example.com/ --db example.db --max-pages 20
    python examples/sync_script.py https://example.com/ --config crawl.toml

It prints a one-line summary, then the ``--top`` pages with the most outlinks.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys

import crawler


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("seeds", nargs="+", help="absolute http(s) URLs to start from")
    parser.add_argument("--config", help="TOML file of settings (keys as the crawl flags)")
    parser.add_argument("--db", help="SQLite file the crawl writes to")
    parser.add_argument("--max-pages", type=int, help="stop after this many pages")
    parser.add_argument("--delay", type=float, help="seconds between requests to a host")
    parser.add_argument("--workers", type=int, help="parse processes")
    parser.add_argument("--top", type=int, default=5, help="pages to list at the end")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        settings = crawler.Settings.from_toml(args.config) if args.config else crawler.Settings()
        # flags given on the command line win over the file
        given = {"db": args.db, "max_pages": args.max_pages, "delay": args.delay,
                 "workers": args.workers}  # fmt: skip
        settings = settings.replace(**{k: v for k, v in given.items() if v is not None})
        report = crawler.run(args.seeds, settings)
    except crawler.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except crawler.CrawlerError as exc:
        print(f"crawl failed: {exc}", file=sys.stderr)
        return 1

    print(f"{report.status} ({report.reason}): {report.pages_ok} ok, {report.pages_failed} "
          f"failed, {report.bytes} bytes in {report.elapsed_s:.1f} s -> {report.db}")  # fmt: skip
    with contextlib.closing(sqlite3.connect(report.db)) as connection:
        top = connection.execute(
            "SELECT json_array_length(outlinks) AS n, url, title FROM pages "
            "WHERE status = 200 ORDER BY n DESC, url LIMIT ?",
            (args.top,),
        ).fetchall()
    for count, url, title in top:
        print(f"{count:5d}  {url}  {title or ''}")
    return 0 if report.status == "finished" else 1


if __name__ == "__main__":  # required: the parse workers re-import this file
    sys.exit(main(sys.argv[1:]))
