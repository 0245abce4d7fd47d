"""The HTTP limit: fetch a known URL list with aiohttp + uvloop, read each body, parse nothing.

    python bench/fetch_only.py URLS_TXT [--concurrency 64]

N worker tasks pull URLs from a shared list over one keep-alive connection pool. Prints one
JSON summary line: {"pages": <responses with status 200>, "errors": ..., "bytes": ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import aiohttp
import uvloop


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


def main() -> int:
    parser = argparse.ArgumentParser(description="Fetch-only loop over a URL list.")
    parser.add_argument("urls", help="a file with one URL a line")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with open(args.urls) as fh:
        urls = [line.strip() for line in fh if line.strip()]
    start = time.perf_counter()
    stats = uvloop.run(fetch_all(urls, args.concurrency))
    print(json.dumps({**stats, "seconds": round(time.perf_counter() - start, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
