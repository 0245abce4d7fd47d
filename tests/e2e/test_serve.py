"""``crawl serve``: the dashboard's views and JSON over real crawl databases (SQLite, and
PostgreSQL), through aiohttp's test client; the command itself as a user runs it.

The crawled site holds a hostile page (a title of markup, rare words in its text), pages
that fail (404, 500), links refused by robots.txt, and a Crawl-delay; a live test reads a
database while a crawl writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import crawler
from crawler import Settings
from crawler.serve.app import CSP, build_app, serving_names
from tests.proc import child_env
from tests.sites import SiteServer, html_handler

HOSTILE_TITLE = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
                 " Quagga notes")  # fmt: skip
RARE = "zebracorn quaggafish"
BASE: dict[str, Any] = {"workers": 1, "progress": False, "sitemaps": False, "delay": 0.0,
                        "concurrency": 8, "per_host": 4}  # fmt: skip


WORDS = ["crawling", "parsing", "ranking", "frontier", "robots", "sitemap", "politeness",
         "fetch", "store", "index", "search", "host", "delay", "queue", "page", "link",
         "article", "budget", "template"]  # fmt: skip


def _page(i: int) -> str:
    rng = random.Random(i)
    words = " ".join(rng.choice(WORDS) for _ in range(60))
    links = "".join(f'<a href="/p/{(i * 7 + k) % 40}.html">next</a> ' for k in range(1, 4))
    return (f"<html><head><title>Article {i}</title></head><body><p>article {words}</p>{links}"
            '<a href="/private/x">private</a></body></html>')  # fmt: skip


def make_site(site: SiteServer) -> None:
    """40 articles, a hostile page, a 404 and a 500, robots.txt with a Crawl-delay."""
    site.routes = {
        "/robots.txt": html_handler("User-agent: *\nCrawl-delay: 0.01\nDisallow: /private\n"),
        "/": html_handler(
            '<a href="/p/0.html">start</a> <a href="/evil.html">evil</a> '
            '<a href="/gone.html">gone</a> <a href="/broken.html">broken</a>'
        ),
        "/evil.html": html_handler(
            f"<html><head><title>{HOSTILE_TITLE}</title></head><body><p>A page with "
            f"{RARE} in it, {RARE} twice. <script>window.__pwned=3</script></p>"
            '<a href="/p/1.html">one</a></body></html>'
        ),
        "/gone.html": html_handler("not here", status=404),
        "/broken.html": html_handler("oops", status=500),
        **{f"/p/{i}.html": html_handler(_page(i)) for i in range(40)},
    }


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A SQLite database of one finished crawl of the site (with --query), and its seed."""
    db = str(tmp_path_factory.mktemp("serve") / "crawl.db")
    with SiteServer() as site:
        make_site(site)
        crawler.run([site.url + "/"], Settings(db=db, query="crawling ranking", retries=0,
                                               **BASE))  # fmt: skip
        yield db, site.url


def with_client(db: str, check: Callable[[TestClient[Any, Any]], Awaitable[None]]) -> None:
    async def scenario() -> None:
        app = await build_app(db, "cpu")
        async with TestClient(TestServer(app)) as client:
            await check(client)

    asyncio.run(scenario())


async def get_json(client: TestClient[Any, Any], path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status == status, (path, await response.text())
    assert response.content_type == "application/json"
    return await response.json()


async def get_html(client: TestClient[Any, Any], path: str, status: int = 200) -> str:
    response = await client.get(path)
    assert response.status == status, (path, await response.text())
    assert response.content_type == "text/html"
    assert response.headers["Content-Security-Policy"] == CSP
    assert "script-src" not in CSP and "'unsafe-inline'" not in CSP  # default-src 'none'
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    return await response.text()


def digest(db: str) -> str:
    return hashlib.sha256(Path(db).read_bytes()).hexdigest()


# -- the views, on SQLite ------------------------------------------------------------------------


def test_the_overview_names_the_run_charts_it_and_counts_what_happened(
    crawled: tuple[str, str],
) -> None:
    db, _ = crawled

    async def check(client: TestClient[Any, Any]) -> None:
        data = await get_json(client, "/api/overview")
        (run,) = data["runs"]
        assert run["status"] == "finished" and run["reason"] == "done"
        assert run["pages_ok"] >= 42 and run["pages_failed"] == 2
        assert data["chart_run"] == run["id"] and len(data["samples"]) >= 2
        last = data["samples"][-1]
        assert last["done"] == run["pages_ok"] + run["pages_failed"] and last["failed"] == 2
        counts = data["counts"]
        assert counts["by_status"]["404"] == 1 and counts["by_status"]["500"] == 1
        assert counts["errors"] == {"HTTP 404": 1, "HTTP 500": 1}
        assert counts["skipped"]["robots"] >= 1
        assert counts["queue"]["queued"] == 0 and counts["queue"]["due_later"] >= 44
        html = await get_html(client, "/")
        assert f"#{run['id']}" in html and "finished" in html
        assert re.search(r'<svg class="chart"[^>]*>.*<polyline class="line pages" points="'
                         r"[0-9., ]+\"", html)  # fmt: skip
        assert "http-equiv" not in html  # a finished crawl does not refresh itself
        samples = await get_json(client, f"/api/runs/{run['id']}/samples")
        assert samples["samples"] == data["samples"]
        assert (await get_json(client, "/api/overview?run=x", 400))["error"].startswith("run:")

    before = digest(db)
    with_client(db, check)
    assert digest(db) == before  # read-only


def test_search_ranks_the_page_with_rare_words_first_and_escapes_what_it_shows(
    crawled: tuple[str, str],
) -> None:
    db, url = crawled

    async def check(client: TestClient[Any, Any]) -> None:
        data = await get_json(client, "/api/search?q=zebracorn+quaggafish")
        first = data["results"][0]
        assert first["url"] == url + "/evil.html" and first["title"] == HOSTILE_TITLE
        assert first["rank"] == 1 and first["score"] > 0
        assert "<mark>zebracorn</mark>" in first["snippet_html"]
        html = await get_html(client, "/search?q=zebracorn")
        assert "<script>window" not in html and "<img src=x" not in html
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror=" in html
        assert 'value="zebracorn"' in html
        paged = await get_json(client, "/api/search?q=article&limit=5")
        assert [r["rank"] for r in paged["results"]] == [1, 2, 3, 4, 5]
        second = await get_json(client, "/api/search?q=article&limit=5&offset=5")
        assert [r["rank"] for r in second["results"]] == [6, 7, 8, 9, 10]
        assert not {r["url"] for r in paged["results"]} & {r["url"] for r in second["results"]}
        assert 'rel="next"' in await get_html(client, "/search?q=article&limit=5")
        assert (await get_json(client, "/api/search?q="))["results"] == []
        assert "not between" in (await get_json(client, "/api/search?q=a&limit=0", 400))["error"]
        too_long = "a" * 501
        await get_json(client, f"/api/search?q={too_long}", 400)
        hostile = "<script>alert(1)</script>"
        html = await get_html(client, f"/search?q={hostile}")
        assert hostile not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html

    with_client(db, check)


def test_a_page_shows_its_facts_links_and_schedule(crawled: tuple[str, str]) -> None:
    db, url = crawled

    async def check(client: TestClient[Any, Any]) -> None:
        data = await get_json(client, f"/api/page?url={url}/p/1.html")
        assert data["status"] == 200 and data["title"] == "Article 1"
        assert data["state"] == "done" and data["next_fetch"] and data["interval_s"] > 0
        assert data["inlinks"] >= 2  # from /evil.html and from article 7 * k + ... pages
        assert f"{url}/private/x" in data["outlinks"] and data["outlinks_total"] == 4
        assert re.fullmatch(r"[0-9a-f]{16}", data["simhash"])
        html = await get_html(client, f"/page?url={url}/evil.html")
        assert "&lt;script&gt;" in html and "<script>" not in html
        assert "<h1>&lt;script&gt;window.__pwned=1" in html
        missing = await get_json(client, f"/api/page?url={url}/never.html", 404)
        assert "not a stored page" in missing["error"]
        await get_json(client, "/api/page", 400)
        assert (await client.post("/api/page")).status == 405

    with_client(db, check)


def test_what_a_request_holds_is_answered_as_an_error_with_the_headers(
    crawled: tuple[str, str],
) -> None:
    """A URL with CR or LF (no status line may hold them), a run id past SQLite's integers:
    a 404 and a 400 that say so, with the safety headers, not aiohttp's bare 500."""
    db, url = crawled

    async def check(client: TestClient[Any, Any]) -> None:
        for path in ("/api/page?url=%0A", f"/api/page?url={url}/%0d"):
            missing = await get_json(client, path, 404)
            assert "not a stored page" in missing["error"]
        html = await get_html(client, "/page?url=http://x/%0D%0Aset-cookie:a=b", 404)
        assert "not a stored page" in html
        huge = await get_json(client, "/api/runs/99999999999999999999999/samples", 400)
        assert "run:" in huge["error"]
        await get_json(client, "/api/runs/-1/samples", 400)

    with_client(db, check)


def test_a_request_for_another_host_name_is_refused_on_loopback(crawled: tuple[str, str]) -> None:
    """DNS rebinding: a page on evil.example that points its name at 127.0.0.1 would read the
    crawl through the visitor's browser; served on loopback, only loopback names answer."""
    db, _ = crawled

    async def check(client: TestClient[Any, Any]) -> None:
        port = client.port
        for host in (f"127.0.0.1:{port}", "localhost", f"LOCALHOST:{port}", "[::1]:8800"):
            assert (await client.get("/api/overview", headers={"Host": host})).status == 200
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example"):
            refused = await client.get("/api/overview", headers={"Host": host})
            assert refused.status == 421, host
            assert refused.headers["Content-Security-Policy"] == CSP
            assert "loopback" in (await refused.json())["error"]

    with_client(db, check)
    assert serving_names("0.0.0.0") == frozenset()  # exposed on purpose: any name
    assert serving_names("::1") >= {"[::1]", "localhost", "127.0.0.1"}


def test_a_page_stored_with_its_body_shows_the_exchange_s_headers(tmp_path: Path) -> None:
    """``--store-body`` keeps the status line, the response's headers and the request's: the
    page view lists each header as a row, not the stored JSON's keys."""
    db = str(tmp_path / "body.db")
    with SiteServer() as site:
        site.routes["/"] = html_handler("<title>b</title><p>body kept</p>")
        crawler.run([site.url + "/"], Settings(db=db, store_body=True, **BASE))

        async def check(client: TestClient[Any, Any]) -> None:
            html = await get_html(client, f"/page?url={site.url}/")
            assert "Response headers (HTTP/1.1 200 OK)" in html
            assert "<td>Content-Type</td>" in html and "Request headers (as sent)" in html
            assert "<td>http_version</td>" not in html and "[[" not in html

        with_client(db, check)


def test_a_run_left_running_by_a_dead_process_is_not_shown_live(
    crawled: tuple[str, str], tmp_path: Path
) -> None:
    """kill -9 leaves the run marked running; without a recent sample it is no live run,
    and the overview does not reload itself every few seconds for ever."""
    db = str(tmp_path / "dead.db")
    shutil.copy(crawled[0], db)
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("UPDATE runs SET status = 'running', ended_at = NULL")
        connection.execute("UPDATE run_samples SET at = at - 3600")

    async def check(client: TestClient[Any, Any]) -> None:
        data = await get_json(client, "/api/overview")
        assert data["runs"][0]["status"] == "running" and data["live"] is None
        assert "http-equiv" not in await get_html(client, "/")

    with_client(db, check)


def test_hosts_sort_by_any_count_and_show_robots(crawled: tuple[str, str]) -> None:
    db, url = crawled

    async def check(client: TestClient[Any, Any]) -> None:
        data = await get_json(client, "/api/hosts")
        (host,) = data["hosts"]
        assert host["origin"] == url and host["failed"] == 2 and host["errors"] == 2
        assert host["robots_status"] == 200 and host["crawl_delay_s"] == 0.01
        assert host["skipped"] >= 1 and host["queued"] == 0
        for sort in ("origin", "done", "failed", "queued", "skipped", "errors", "s429", "s503"):
            assert (await get_json(client, f"/api/hosts?sort={sort}"))["hosts"][0] == host
        bad = await get_json(client, "/api/hosts?sort=origin;DROP TABLE pages", 400)
        assert bad["error"].startswith("sort:")
        html = await get_html(client, "/hosts?sort=failed")
        assert "<b>failed</b>" in html and "0.01 s" in html
        assert "/api/hosts" in await get_html(client, "/api")
        assert (await client.get("/static/style.css")).status == 200
        assert (await client.get("/static/../crawl.db")).status == 404

    with_client(db, check)


def test_a_running_crawl_is_shown_live(tmp_path: Path) -> None:
    """The dashboard reads beside the writer: the run is ``running``, with samples, and its
    overview refreshes itself; once it ends, it is ``finished``."""
    db = str(tmp_path / "live.db")

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        i = int(request.match_info["tail"].split("/")[-1])
        rng = random.Random(i)
        words = " ".join(rng.choice(WORDS) for _ in range(40))
        return web.Response(text=f'<a href="/n/{i + 1}">next</a> {words}',
                            content_type="text/html")  # fmt: skip

    with SiteServer() as site:
        site.routes = {"/robots.txt": html_handler("", status=404),
                       "/": html_handler('<a href="/n/0">go</a>')}  # fmt: skip
        site.fallback = slow
        done = threading.Event()

        def run() -> None:
            crawler.run([site.url + "/"], Settings(db=db, max_time=6.0, **BASE))
            done.set()

        thread = threading.Thread(target=run)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not Path(db).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(2.5)  # the second sample

            async def live(client: TestClient[Any, Any]) -> None:
                data = await get_json(client, "/api/overview")
                assert data["runs"][0]["status"] == "running" and not done.is_set()
                assert data["live"] is not None and data["live"]["done"] >= 1
                assert 'http-equiv="refresh"' in await get_html(client, "/")

            with_client(db, live)
        finally:
            thread.join()

    async def after(client: TestClient[Any, Any]) -> None:
        data = await get_json(client, "/api/overview")
        assert data["runs"][0]["status"] == "finished" and data["runs"][0]["reason"] == "max-time"
        assert len(data["samples"]) >= 3

    with_client(db, after)


# -- PostgreSQL ----------------------------------------------------------------------------------


def test_the_views_read_a_postgresql_crawl(pg_dsn: str) -> None:
    with SiteServer() as site:
        make_site(site)
        crawler.run([site.url + "/"], Settings(db=pg_dsn, query="crawling", retries=0, **BASE))
        url = site.url

    async def check(client: TestClient[Any, Any]) -> None:
        data = await get_json(client, "/api/overview")
        assert data["runs"][0]["status"] == "finished" and len(data["samples"]) >= 2
        assert data["counts"]["errors"] == {"HTTP 404": 1, "HTTP 500": 1}
        assert "<polyline" in await get_html(client, "/")
        found = await get_json(client, "/api/search?q=zebracorn")
        assert found["results"][0]["url"] == url + "/evil.html"
        assert "&lt;script&gt;" in await get_html(client, "/search?q=zebracorn")
        page = await get_json(client, f"/api/page?url={url}/p/1.html")
        assert page["status"] == 200 and page["inlinks"] >= 2
        (host,) = (await get_json(client, "/api/hosts?sort=errors"))["hosts"]
        assert host["errors"] == 2 and host["crawl_delay_s"] == 0.01

    with_client(pg_dsn, check)


# -- the command ---------------------------------------------------------------------------------


@contextlib.contextmanager
def serving(db: str) -> Iterator[str]:
    """``crawl serve DB --port 0`` as a user starts it; its address (``http://127.0.0.1:N``)
    while it runs; stopped by SIGINT, which must end it with status 0."""
    with subprocess.Popen(
        [sys.executable, "-m", "crawler", "serve", db, "--port", "0"],
        stderr=subprocess.PIPE, text=True, env=child_env(),
    ) as child:  # fmt: skip
        try:
            assert child.stderr is not None
            line = child.stderr.readline()
            address = re.search(r"http://127\.0\.0\.1:\d+", line)
            assert address, line
            yield address.group()
        finally:
            child.send_signal(signal.SIGINT)
            assert child.wait(timeout=20) == 0


def test_crawl_serve_serves_until_interrupted(crawled: tuple[str, str]) -> None:
    with (
        serving(crawled[0]) as address,
        urllib.request.urlopen(address + "/api/overview", timeout=10) as response,
    ):
        assert json.load(response)["runs"][0]["status"] == "finished"


def test_crawl_serve_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, "-m", "crawler", "serve", str(tmp_path / "no.db")],
                             capture_output=True, text=True, env=child_env(), timeout=60)  # fmt: skip
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"crawl: error: {tmp_path / 'no.db'}: no such database"
    (tmp_path / "x.db").write_text("not sqlite")
    other = subprocess.run([sys.executable, "-m", "crawler", "serve", str(tmp_path / "x.db")],
                           capture_output=True, text=True, env=child_env(), timeout=60)  # fmt: skip
    assert other.returncode == 2 and "not a crawl database" in other.stderr
