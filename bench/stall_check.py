"""Stall scenarios, each crawled by the ``crawl`` command with a time budget: does it end?

    python bench/stall_check.py [--max-time 3s] [--only NAME,NAME] [--delay 0]

Each scenario is a local site (aiohttp on 127.0.0.1) built to hold a crawler: a server that
never answers, one that drips a byte a second, an endless chunked body, 300 stacked gzip
layers, a page of 80,000 nested elements, one element with 80,000 attributes, a 10 MB page
of nested elements, ``charset=punycode``, a robots.txt of 15,000 wildcard rules beside a
400-URL sitemap, a sitemap of 10 MB of nested elements, an endless calendar, a soft 404, an
endless redirect chain. For each: the wall time of ``crawl SEEDS --max-time T`` (a fresh
database, default flags but ``--delay``), its exit code, the database's
``PRAGMA integrity_check`` and the pages stored. A line per scenario, then a verdict:
every run must end within ``3 x T`` with exit 0 and an intact database.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar as calendar_module
import gzip
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def html(body: str | bytes, **headers: str) -> Handler:
    data = body.encode() if isinstance(body, str) else body

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=data, headers={"Content-Type": "text/html", **headers})

    return handle


def links(*hrefs: str, text: tuple[str, ...] = ()) -> str:
    return "".join(f'<a href="{h}">{t}</a> ' for h, t in zip(hrefs, text or hrefs, strict=True))


async def never(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(3600)
    raise web.HTTPOk()


async def drip(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/html"})
    await response.prepare(request)
    for _ in range(3600):
        await response.write(b"x")
        await asyncio.sleep(1)
    return response


async def endless(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/html"})
    await response.prepare(request)
    chunk = b"<p>" + b"z" * 65536 + b"</p>"
    while True:
        await response.write(chunk)


def stacked() -> Handler:
    body = b"<p>deep</p>" + b" " * 4_000_000
    for _ in range(300):
        body = gzip.compress(body, 1)
    return html(body, **{"Content-Encoding": ", ".join(["gzip"] * 300)})


async def calendar(request: web.Request) -> web.StreamResponse:
    year, month = (int(p) for p in request.path.split("/")[2:4])
    nxt = (year + (month == 12), month % 12 + 1)
    hrefs = (f"/cal/{nxt[0]}/{nxt[1]:02d}", f"/cal/{year + 1}/{month:02d}")
    body = f"<h1>{calendar_module.month_name[month]} {year}</h1>" + links(
        *hrefs, text=("next", "next year")
    )
    return web.Response(text=body, content_type="text/html")


async def soft404(request: web.Request) -> web.StreamResponse:
    n = random.randrange(10**9)
    body = "<h1>Not found</h1><p>Try these:</p>" + links(
        f"/x/{n}a", f"/x/{n}b", text=("one", "two")
    )
    return web.Response(text=body, content_type="text/html")


async def redirect_on(request: web.Request) -> web.StreamResponse:
    n = int(request.path.rsplit("/", 1)[1])
    raise web.HTTPFound(f"/r/{n + 1}")


def wildcard_robots() -> str:
    rng = random.Random(5)
    rules = [
        f"Disallow: /*{''.join(rng.choice('abcdefghij') for _ in range(7))}*.php$"
        for _ in range(15_000)
    ]
    return (
        "User-agent: *\nAllow: /ok/\nAllow: /sitemap.xml$\n" + "\n".join(rules) + "\nDisallow: /\n"
    )


def scenarios() -> dict[str, dict[str, Handler]]:
    nested = b"<html><body>" + b"<div>" * 80_000 + b"<a href=/x>x</a>"
    attrs = b"<html><body><p " + b" ".join(b"a%d=1" % i for i in range(80_000)) + b">x</p>"
    big = b"<html><body>" + b"<div><span>" * 500_000
    punycode = ("<p>" + "a" * 800_000 + "</p>").encode()
    deep_sitemap = b"<urlset>" + b"<a>" * 3_000_000
    robots = wildcard_robots()
    return {
        "never-answers": {"/": html(links("/never", "/a")), "/never": never},
        "drip": {"/": html(links("/drip", "/a")), "/drip": drip},
        "endless-body": {"/": html(links("/endless")), "/endless": endless},
        "stacked-gzip": {"/": html(links("/gz")), "/gz": stacked()},
        "nested-80k": {"/": html(links("/n")), "/n": html(nested)},
        "attributes-80k": {"/": html(links("/n")), "/n": html(attrs)},
        "nested-10MB": {"/": html(links("/n")), "/n": html(big)},
        "punycode": {"/": html(links("/p")), "/p": html(punycode, **{"Content-Type": "text/html; charset=punycode"})},
        "robots-wildcards": {"/robots.txt": html(robots, **{"Content-Type": "text/plain"}),
                             "/sitemap.xml": None},  # filled in serve()
        "deep-sitemap": {"/": html("<p>root</p>"), "/sitemap.xml": html(deep_sitemap, **{"Content-Type": "application/xml"})},
        "calendar": {"/": html(links("/cal/2026/01")), "/cal": calendar},
        "soft-404": {"/": html(links("/x/start")), "/x": soft404},
        "redirect-chain": {"/": html(links("/r/0")), "/r": redirect_on},
    }  # fmt: skip


class Site:
    def __init__(self, name: str, routes: dict[str, Handler | None]) -> None:
        self.name, self.routes = name, routes
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        handler = self.routes.get(path)
        if handler is None:
            for prefix, candidate in self.routes.items():
                if candidate is not None and path.startswith(prefix + "/") and prefix != "/":
                    handler = candidate
        if handler is None:
            if path == "/sitemap.xml" and self.name == "robots-wildcards":
                urls = "".join(
                    f"<url><loc>http://127.0.0.1:{self.port}/ok/{i}</loc></url>" for i in range(400)
                )
                return web.Response(text=f"<urlset>{urls}</urlset>", content_type="application/xml")
            if path == "/robots.txt":
                return web.Response(status=404)
            return web.Response(text="<p>leaf</p>", content_type="text/html")
        return await handler(request)

    def serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.ready.set()
        self.loop.run_forever()


def run(
    name: str, routes: dict[str, Handler | None], max_time: str, delay: str
) -> tuple[float, int, str, int]:
    site = Site(name, routes)
    threading.Thread(target=site.serve, daemon=True).start()
    site.ready.wait(10)
    with tempfile.TemporaryDirectory() as tmp:
        seeds, db = Path(tmp) / "seeds.txt", Path(tmp) / "crawl.db"
        seeds.write_text(f"http://127.0.0.1:{site.port}/\n")
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), "--max-time", max_time,
             "--delay", delay, "--no-progress", "-q"],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        took = time.monotonic() - start
        with sqlite3.connect(db) as connection:
            check = connection.execute("PRAGMA integrity_check").fetchone()[0]
            pages = connection.execute("SELECT count(*) FROM pages").fetchone()[0]
    site.loop.call_soon_threadsafe(site.loop.stop)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return took, done.returncode, check, pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-time", default="3s")
    parser.add_argument("--delay", default="0")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    budget = float(args.max_time.rstrip("s"))
    wanted = set(filter(None, args.only.split(",")))
    ok = True
    print(f"{'scenario':18} {'wall s':>7} {'exit':>4}  integrity  pages")
    for name, routes in scenarios().items():
        if wanted and name not in wanted:
            continue
        took, code, check, pages = run(name, routes, args.max_time, args.delay)
        good = took <= 3 * budget and code == 0 and check == "ok"
        ok &= good
        print(f"{name:18} {took:7.2f} {code:4}  {check:9}  {pages:5}  {'' if good else 'FAIL'}")
    print("all ended in time, exit 0, intact" if ok else "SOME FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
