"""A plain single-file BFS crawler: aiohttp + uvloop + selectolax, one process.

The baseline "what a capable person writes in an afternoon": N worker tasks share one FIFO
queue, the standard library's `urllib.parse.urljoin` resolves links (honouring `<base href>`),
fragments are dropped, scope is the seed's host:port, robots.txt is read once with
`urllib.robotparser`, and each HTML page's title and visible text (no script/style) go to a
JSON-lines file.

    python bench/single_file_crawler.py SEED_URL --out pages.jsonl [--concurrency 64]
        [--max-pages N]

Prints one JSON summary line at the end: {"pages": ..., "errors": ..., "seconds": ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import aiohttp
import uvloop
from selectolax.lexbor import LexborHTMLParser


class Crawler:
    """BFS state: the queue, the seen set and the output file."""

    def __init__(self, seed: str, out, concurrency: int, max_pages: int | None) -> None:
        self.origin = urlsplit(seed).netloc
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.seen = {seed}
        self.queue.put_nowait(seed)
        self.out = out
        self.concurrency = concurrency
        self.max_pages = max_pages
        self.robots = RobotFileParser()
        self.pages = self.errors = self.started = 0

    async def load_robots(self, session: aiohttp.ClientSession, seed: str) -> None:
        try:
            async with session.get(urljoin(seed, "/robots.txt")) as resp:
                body = await resp.text() if resp.status == 200 else ""
        except aiohttp.ClientError:
            body = ""
        self.robots.parse(body.splitlines())

    def parse(self, url: str, html: bytes) -> list[str]:
        """Write the page's record and return the new in-scope links it holds."""
        tree = LexborHTMLParser(html)
        base = tree.css_first("base[href]")
        base_url = urljoin(url, base.attributes.get("href") or "") if base else url
        found = []
        for node in tree.css("a[href]"):
            link = urldefrag(urljoin(base_url, node.attributes.get("href") or "")).url
            parts = urlsplit(link)
            if parts.scheme in ("http", "https") and parts.netloc == self.origin:
                found.append(link)
        title = tree.css_first("title")
        tree.strip_tags(["script", "style"])
        text = tree.body.text(separator=" ") if tree.body else ""
        record = {"url": url, "title": title.text() if title else "", "text": text}
        self.out.write(json.dumps(record) + "\n")
        return found

    def enqueue(self, links: list[str]) -> None:
        for link in links:
            if link not in self.seen and self.robots.can_fetch("*", link):
                self.seen.add(link)
                self.queue.put_nowait(link)

    async def fetch(self, session: aiohttp.ClientSession, url: str) -> None:
        try:
            async with session.get(url) as resp:
                body = await resp.read()
                is_html = resp.content_type == "text/html"
                ok = resp.status == 200
        except (TimeoutError, aiohttp.ClientError):
            self.errors += 1
            return
        if ok and is_html:
            self.pages += 1
            self.enqueue(self.parse(str(resp.url), body))
        elif not ok:
            self.errors += 1

    async def worker(self, session: aiohttp.ClientSession) -> None:
        while True:
            url = await self.queue.get()
            try:
                if self.max_pages is None or self.started < self.max_pages:
                    self.started += 1
                    await self.fetch(session, url)
            finally:
                self.queue.task_done()

    async def run(self, seed: str) -> None:
        connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=self.concurrency)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await self.load_robots(session, seed)
            workers = [asyncio.create_task(self.worker(session)) for _ in range(self.concurrency)]
            await self.queue.join()
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)


def main() -> int:
    parser = argparse.ArgumentParser(description="Single-file aiohttp + selectolax crawler.")
    parser.add_argument("seed")
    parser.add_argument("--out", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-pages", type=int, default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    with open(args.out, "w") as out:
        crawler = Crawler(args.seed, out, args.concurrency, args.max_pages)
        uvloop.run(crawler.run(args.seed))
    summary = {"pages": crawler.pages, "errors": crawler.errors, "seen": len(crawler.seen)}
    summary["seconds"] = round(time.perf_counter() - start, 3)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
