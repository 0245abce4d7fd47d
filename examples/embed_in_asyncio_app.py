"""Run a crawl in the background of an asyncio web application and serve its progress.

What it shows:

- ``crawler.Crawler`` runs inside the application's own event loop: ``Crawler.run`` is a
  coroutine, started here as a background task next to an aiohttp web server (no thread,
  no subprocess; the parsing happens in the crawler's own worker processes);
- ``on_progress`` (a plain function, called about twice a second) and ``on_page`` (an
  async function, awaited for every stored URL) keep a live status up to date;
- the web app serves that status as JSON (``GET /status``) and can stop the crawl
  (``POST /stop``): the requests in flight finish and are stored, and a later run on the
  same database resumes where this one stopped;
- the program ends on its own when the crawl ends (after ``--linger`` seconds, so that a
  last look at ``/status`` is possible).

The web app is aiohttp's (``pip install aiohttp``; the crawler itself does not need it).

Run it (be polite: keep the default delay on sites you do not own)::

    python examples/embed_in_asyncio_app.py https://example.com/ --db example.db --max-pages 50
    curl http://127.0.0.1:8080/status          # from another terminal, while it runs
    curl -X POST http://127.0.0.1:8080/stop    # stop early

It prints ``status: <url>`` once the web server listens, one ``progress: {...}`` JSON line
per progress report, and a final ``report: {...}`` JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
from collections import Counter
from typing import Any

from aiohttp import web

import crawler


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("seeds", nargs="+", help="absolute http(s) URLs to start from")
    parser.add_argument("--db", default="crawl.db", help="SQLite file the crawl writes to")
    parser.add_argument("--max-pages", type=int, default=None, help="stop after this many")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds between requests")
    parser.add_argument("--workers", type=int, default=None, help="parse processes")
    parser.add_argument("--host", default="127.0.0.1", help="address of the status server")
    parser.add_argument("--port", type=int, default=8080, help="its port (0: any free one)")
    parser.add_argument("--linger", type=float, default=0.0,
                        help="seconds to keep serving /status after the crawl ended")  # fmt: skip
    return parser.parse_args(argv)


class CrawlStatus:
    """What the web app knows about the crawl, updated by the crawl's callbacks."""

    def __init__(self) -> None:
        self.state = "starting"  # starting, running, stopping, finished, interrupted
        self.progress: crawler.Progress | None = None
        self.by_status: Counter[str] = Counter()  # "200", "404", or the error ("timeout" ...)
        self.last_url: str | None = None
        self.report: crawler.CrawlReport | None = None

    def on_progress(self, progress: crawler.Progress) -> None:
        """Called by the crawl about twice a second, in the event loop: keep it quick."""
        self.progress = progress
        print("progress:", json.dumps(self.progress_json()), flush=True)

    async def on_page(self, page: crawler.CrawledPage) -> None:
        """Awaited for every stored URL; a slow one would slow the crawl down."""
        self.by_status[str(page.status) if page.status is not None else str(page.error)] += 1
        self.last_url = page.url

    def progress_json(self) -> dict[str, Any]:
        p = self.progress
        if p is None:
            return {}
        return {"done": p.done, "queued": p.queued, "in_flight": p.in_flight,
                "errors": p.errors, "pages_per_s": round(p.pages_per_s, 1)}  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "progress": self.progress_json(),
            "stored": sum(self.by_status.values()),
            "by_status": dict(self.by_status),
            "last_url": self.last_url,
            "report": dataclasses.asdict(self.report) if self.report is not None else None,
        }


def make_app(status: CrawlStatus, stop: asyncio.Event) -> web.Application:
    async def get_status(request: web.Request) -> web.Response:
        return web.json_response(status.as_json())

    async def post_stop(request: web.Request) -> web.Response:
        stop.set()
        return web.json_response({"stopping": True})

    app = web.Application()
    app.router.add_get("/status", get_status)
    app.router.add_post("/stop", post_stop)
    return app


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    settings = crawler.Settings(db=args.db, max_pages=args.max_pages, delay=args.delay,
                                workers=args.workers, progress=False)  # fmt: skip
    status = CrawlStatus()
    stop = asyncio.Event()  # set by POST /stop or Ctrl-C

    # 1. the application's own server, started before the crawl
    runner = web.AppRunner(make_app(status, stop), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    host, port = runner.addresses[0][:2]
    print(f"status: http://{host}:{port}/status", flush=True)

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):  # not on Windows
        loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        async with crawler.Crawler(
            settings, on_page=status.on_page, on_progress=status.on_progress
        ) as crawl:
            # 2. the crawl, as a background task of the same loop
            crawl_task = asyncio.create_task(crawl.run(args.seeds))
            status.state = "running"
            # 3. meanwhile the app does its own work: here, wait for the crawl or a stop
            stop_wait = asyncio.create_task(stop.wait())
            await asyncio.wait({crawl_task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not crawl_task.done():
                status.state = "stopping"
                crawl.stop("stopped from the web app")
            stop_wait.cancel()
            report = await crawl_task
        status.report = report
        status.state = report.status
        print("report:", json.dumps(dataclasses.asdict(report)), flush=True)
        if args.linger > 0:
            await asyncio.sleep(args.linger)  # /status still answers, with the report
    finally:
        await runner.cleanup()
    return 0 if report.status in ("finished", "interrupted") else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
