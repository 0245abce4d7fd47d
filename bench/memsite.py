"""A dynamic aiohttp site for the memory benchmark: every page links to ~100 never-seen URLs.

    python bench/memsite.py --port P [--links 100] [--page-bytes 0]

`GET /<anything>.html` returns a small HTML page whose links are `/<hex>.html`, each hex the
first 16 digits of sha1(path + "/" + k): deterministic from the path, distinct from every
other URL (up to negligible collisions) and of fixed length, whatever order the crawler walks
in. A crawler that fetches N pages has discovered about N x links URLs. `--page-bytes N` pads
each page with about N bytes of paragraph text (pages of megabytes). `/robots.txt` allows
everything. Serves on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import uvloop
from aiohttp import web

ROBOTS = "User-agent: *\nAllow: /\n"


def child_paths(path: str, links: int) -> list[str]:
    return [f"/{hashlib.sha1(f'{path}/{k}'.encode()).hexdigest()[:16]}.html" for k in range(links)]


FILLER = "<p>" + "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 16 + "</p>\n"


def page_html(path: str, links: int, padding: str = "") -> str:
    anchors = "\n".join(
        f'<li><a href="{p}">link {k}</a></li>' for k, p in enumerate(child_paths(path, links))
    )
    return (
        f"<!DOCTYPE html>\n<html><head><title>page {path}</title></head><body>\n"
        f"<h1>page {path}</h1><p>A generated page with {links} links to pages never seen.</p>\n"
        f"<ul>\n{anchors}\n</ul>\n{padding}</body></html>\n"
    )


def make_app(links: int, page_bytes: int = 0) -> web.Application:
    padding = FILLER * (page_bytes // len(FILLER))

    async def robots(_: web.Request) -> web.Response:
        return web.Response(text=ROBOTS, content_type="text/plain")

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=page_html(request.path, links, padding), content_type="text/html")

    app = web.Application()
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/{name:.*}", page)
    return app


def main() -> int:
    parser = argparse.ArgumentParser(description="Dynamic never-ending site for memory tests.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--links", type=int, default=100)
    parser.add_argument("--page-bytes", type=int, default=0, help="paragraph text added a page")
    args = parser.parse_args()
    web.run_app(
        make_app(args.links, args.page_bytes),
        host="127.0.0.1",
        port=args.port,
        print=None,
        access_log=None,
        loop=uvloop.new_event_loop(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
