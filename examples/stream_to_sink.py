"""Stream crawled pages into another sink, in batches, with backpressure.

What it shows:

- ``async for page in crawler.pages(seeds)``: every stored URL arrives as a
  ``CrawledPage`` while the crawl goes on (the crawl's own database gets them too);
- writing them somewhere else in batches: here a table in a separate SQLite file, one
  transaction per batch, written in a thread (``asyncio.to_thread``) so the event loop keeps
  crawling meanwhile. Any sink works the same way: a message queue, a search index, an
  HTTP API;
- backpressure: at most ``--buffer`` pages wait for the consumer. While a batch is being
  written (``--sink-delay`` makes the sink slow on purpose) the crawl fills that buffer and
  then waits, instead of piling pages up in memory. A slow sink slows the crawl down;
- a clean end: the last partial batch is written after the loop, and ``crawl.report``
  says how the run ended.

Run it::

    python examples/stream_to_sink.py https://example.com/ --sink sink.db --max-pages 100

The sink table is ``pages(url PRIMARY KEY, status, title, depth, links, words, batch)``.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import time
from typing import Any

import crawler

Row = tuple[str, int | None, str | None, int, int, int, int]


class SqliteSink:
    """A table in another SQLite file, written a batch per transaction."""

    def __init__(self, path: str, delay_s: float = 0.0) -> None:
        # written from a worker thread, one batch at a time (never two threads at once)
        self.connection = sqlite3.connect(path, check_same_thread=False)
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS pages (url TEXT PRIMARY KEY, status INTEGER, "
            "title TEXT, depth INTEGER, links INTEGER, words INTEGER, batch INTEGER)"
        )
        self.delay_s = delay_s
        self.batches = 0

    def write(self, rows: list[Row]) -> None:
        """Blocking: run it in a thread. ``delay_s`` stands for a slow remote sink."""
        if self.delay_s:
            time.sleep(self.delay_s)
        with self.connection:  # one transaction
            self.connection.executemany(
                "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?, ?)", rows
            )

    def close(self) -> None:
        self.connection.close()


def to_row(page: crawler.CrawledPage, batch: int) -> Row:
    words = len(page.text.split()) if page.text else 0
    return (page.url, page.status, page.title, page.depth, len(page.links), words, batch)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("seeds", nargs="+", help="absolute http(s) URLs to start from")
    parser.add_argument("--sink", default="sink.db", help="SQLite file to stream pages into")
    parser.add_argument("--db", default="crawl.db", help="SQLite file the crawl writes to")
    parser.add_argument("--batch", type=int, default=50, help="rows per sink transaction")
    parser.add_argument("--buffer", type=int, default=16,
                        help="pages that may wait for the sink before the crawl waits")  # fmt: skip
    parser.add_argument("--sink-delay", type=float, default=0.0,
                        help="seconds each batch write takes on top (a slow sink)")  # fmt: skip
    parser.add_argument("--max-pages", type=int, default=None, help="stop after this many")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds between requests")
    parser.add_argument("--workers", type=int, default=None, help="parse processes")
    return parser.parse_args(argv)


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    settings = crawler.Settings(db=args.db, max_pages=args.max_pages, delay=args.delay,
                                workers=args.workers, progress=False)  # fmt: skip
    sink = SqliteSink(args.sink, args.sink_delay)
    latest: dict[str, Any] = {"done": 0}
    total = 0

    def on_progress(progress: crawler.Progress) -> None:
        # the crawl's own count (twice a second). However slow the sink, it runs ahead of the
        # sink by at most a batch being collected + `buffer` + the pages being fetched/parsed
        latest["done"] = progress.done

    async def flush(rows: list[Row]) -> None:
        nonlocal total
        await asyncio.to_thread(sink.write, rows)  # the loop keeps crawling meanwhile
        sink.batches += 1
        total += len(rows)
        print(f"batch {sink.batches}: {len(rows)} rows, {total} in the sink; "
              f"crawl progress (last report): {latest['done']} stored", flush=True)  # fmt: skip

    try:
        async with crawler.Crawler(settings, buffer=args.buffer, on_progress=on_progress) as c:
            rows: list[Row] = []
            async for page in c.pages(args.seeds):
                rows.append(to_row(page, sink.batches + 1))
                if len(rows) >= args.batch:
                    await flush(rows)  # while this waits, the crawl fills `buffer`, then waits
                    rows = []
            if rows:
                await flush(rows)  # the last, partial batch
    finally:
        sink.close()
    report = c.report
    assert report is not None  # set when the loop has ended
    print(f"done: {total} rows in {sink.batches} batches; crawl {report.status} "
          f"({report.reason}), {report.pages} pages", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":  # required: the parse workers re-import this file
    sys.exit(asyncio.run(main(sys.argv[1:])))
