"""The README's picture of ``crawl serve``: crawl two local sites, serve the database, and
let headless chromium take a screenshot of the overview.

    python bench/serve_screenshot.py [--out docs/serve-overview.png]

The sites (``tests.sites.LinkGraph``: 600 pages with PDFs, 404s and external links, and a
small one that answers 503 and 429 to some pages) are crawled with ``--query`` for about
20 s, paced so that the chart has a shape; then ``crawl serve`` and
``chromium --headless --screenshot``. Needs Debian's chromium.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import crawler  # noqa: E402
from crawler import Settings  # noqa: E402
from tests.sites import LinkGraph, SiteServer, html_handler  # noqa: E402


async def flaky(request: web.Request) -> web.StreamResponse:
    last = request.match_info["tail"].rsplit("/", 1)[-1]
    if not last.isdigit():
        return web.Response(status=404, text="no such page")
    i = int(last)
    if i % 7 == 3:
        return web.Response(status=503, text="busy")
    if i % 11 == 5:
        return web.Response(status=429, text="slow down")
    links = "".join(f'<a href="/f/{(i * 3 + k) % 90}">f</a>' for k in range(1, 4))
    return web.Response(text=f"<title>Flaky {i}</title><p>flaky page {i} {'x' * i}</p>{links}",
                        content_type="text/html")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "serve-overview.png"))
    args = parser.parse_args()
    chromium = shutil.which("chromium") or sys.exit("needs chromium (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "crawl.db")
        with SiteServer() as external, SiteServer(latency_s=0.03) as big, SiteServer() as small:
            LinkGraph(600, external=external.url).serve(big)
            small.routes = {"/robots.txt": html_handler("User-agent: *\nCrawl-delay: 0.2\n"),
                            "/": html_handler('<a href="/f/0">start</a>')}  # fmt: skip
            small.fallback = flaky
            settings = Settings(db=db, query="page link", concurrency=4, per_host=2, delay=0.02,
                                retries=0, progress=False, max_time=25.0)  # fmt: skip
            crawler.run([big.url + "/index.html", small.url + "/"], settings)
        with subprocess.Popen([sys.executable, "-m", "crawler", "serve", db, "--port", "0"],
                              stderr=subprocess.PIPE, text=True) as server:  # fmt: skip
            assert server.stderr is not None
            address = re.search(r"http://[^ ]+/", server.stderr.readline())
            assert address, "crawl serve did not start"
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", "--window-size=1280,1180",
                            f"--screenshot={args.out}", address.group()],
                           check=True, capture_output=True, timeout=60)  # fmt: skip
            server.send_signal(signal.SIGINT)
    print(args.out)


if __name__ == "__main__":
    main()
