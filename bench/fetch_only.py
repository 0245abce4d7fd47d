"""The HTTP limit: fetch a known URL list with aiohttp + uvloop, read each body, parse nothing.

    python bench/fetch_only.py URLS_TXT [--concurrency 64] [--client aiohttp|crawler]

N worker tasks pull URLs from a shared list over one keep-alive connection pool. Prints one
JSON summary line: {"pages": <responses with status 200>, "errors": ..., "bytes": ...,
"seconds": ..., "cpu_s": <this loop's CPU, imports excluded>}. ``--client crawler`` runs the
same loop on the crawl's own client (``crawler.net.http``): the crawl's HTTP limit, where the
default (aiohttp's client) is the benchmark's reference peer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import aiohttp
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's crawler


async def fetch_all(urls: list[str], concurrency: int) -> dict[str, int]:
    stats = {"pages": 0, "errors": 0, "bytes": 0}
    todo = iter(urls)
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def worker() -> None:
            for url in todo:  # a shared iterator: each URL goes to one worker
                try:
                    async with session.get(url) as resp:
                        body = await resp.read()
                        ok = resp.status == 200
                except (TimeoutError, aiohttp.ClientError):
                    ok, body = False, b""
                stats["pages" if ok else "errors"] += 1
                stats["bytes"] += len(body)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return stats


async def fetch_all_crawler(urls: list[str], concurrency: int) -> dict[str, int]:
    from crawler.net.http import HttpClient, HTTPError

    stats = {"pages": 0, "errors": 0, "bytes": 0}
    todo = iter(urls)
    headers = {"User-Agent": "fetch-only", "Accept": "*/*"}

    from crawler.net.guard import allow_all  # loopback is the point here

    async with HttpClient(
        limit=concurrency, connect_timeout=30, headers=headers, allowed=allow_all
    ) as client:

        async def worker() -> None:
            for url in todo:
                try:
                    response = await client.get(url, cap=1 << 26)
                    try:
                        body = await response.read()
                        ok = response.status == 200
                    finally:
                        response.release()
                except (TimeoutError, OSError, HTTPError):
                    ok, body = False, b""
                stats["pages" if ok else "errors"] += 1
                stats["bytes"] += len(body)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description="Fetch-only loop over a URL list.")
    parser.add_argument("urls", help="a file with one URL a line")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--client", choices=("aiohttp", "crawler"), default="aiohttp")
    args = parser.parse_args()
    with open(args.urls) as fh:
        urls = [line.strip() for line in fh if line.strip()]
    loop = fetch_all if args.client == "aiohttp" else fetch_all_crawler
    start, cpu = time.perf_counter(), time.process_time()
    stats = uvloop.run(loop(urls, args.concurrency))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({**stats, "seconds": round(seconds, 3), "cpu_s": round(cpu, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
