"""The whole pipeline against local sites: real HTTP, a real process pool, real SQLite."""

from __future__ import annotations

import contextlib
import gc
import logging
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import crawler
from crawler import Settings
from crawler.engine import engine as engine_module
from crawler.engine import pages as pages_module
from crawler.pool.parse_pool import ParsePool
from tests.sites import LinkGraph, SiteServer, html_handler, max_concurrency, min_start_gap

FAST = {
    "concurrency": 32,
    "per_host": 16,
    "delay": 0.0,
    "workers": 2,
    "progress": False,
    "sitemaps": False,
}


def rows(db: str, sql: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        return connection.execute(sql).fetchall()


def test_link_graph_is_crawled_completely(
    graph_site: tuple[SiteServer, LinkGraph], external: SiteServer, db_path: str
) -> None:
    server, graph = graph_site
    report = crawler.run([server.url + "/"], Settings(db=db_path, **FAST))
    expected = graph.expected_paths() - {"/"}  # "/" redirects to /index.html
    assert report.status == "finished" and report.reason == "done"
    stored = rows(db_path, "SELECT url, final_url, status, content_type, title, text FROM pages")
    finals = [r[1].removeprefix(server.url) for r in stored]
    assert len(finals) == len(set(finals)) == len(expected)  # every page exactly once
    assert set(finals) == expected
    assert len(expected) > 500
    by_url = {r[0].removeprefix(server.url): r for r in stored}
    assert by_url["/"][1] == server.url + "/index.html"
    page = by_url["/s7/p17.html"]
    assert page[2:5] == (200, "text/html", "Page 17")
    assert "Heading 17" in page[5] and "hidden17" not in page[5]
    assert by_url["/files/doc3.pdf"][2:4] == (200, "application/pdf")
    assert by_url["/missing4.html"][2] == 404
    assert external.hits == []  # another host: never requested
    hits = Counter(server.paths())
    assert hits["/robots.txt"] == 1
    assert max(hits.values()) == 1  # no URL fetched twice
    assert report.pages_ok + report.pages_failed == len(expected)


def test_links_table_is_complete(graph_site: tuple[SiteServer, LinkGraph], db_path: str) -> None:
    server, graph = graph_site
    crawler.run([server.url + "/index.html"], Settings(db=db_path, max_pages=60, **FAST))
    stored = rows(
        db_path, "SELECT url FROM pages WHERE content_type = 'text/html' AND status = 200"
    )
    links = rows(db_path, "SELECT src_url, dst_url FROM links")
    by_src: dict[str, set[str]] = {}
    for src, dst in links:
        by_src.setdefault(src, set()).add(dst)
    for (url,) in stored:
        path, _, query = url.removeprefix(server.url).partition("?")
        index = graph._index_of(path)
        assert index is not None
        assert by_src[url] == graph.expected_links(index, "?" + query if query else ""), url


def test_max_pages_and_depth(graph_site: tuple[SiteServer, LinkGraph], db_path: str) -> None:
    server, _ = graph_site
    report = crawler.run([server.url + "/index.html"], Settings(db=db_path, max_pages=25, **FAST))
    assert report.pages == 25 and report.reason == "max-pages" and report.queued_left > 0
    assert rows(db_path, "SELECT count(*) FROM pages") == [(25,)]
    report = crawler.run(
        [server.url + "/index.html"], Settings(db=db_path + "2", max_depth=1, **FAST)
    )
    depths = rows(db_path + "2", "SELECT depth, count(*) FROM pages GROUP BY depth")
    assert [d for d, _ in depths] == [0, 1]
    first_level = rows(
        db_path + "2", "SELECT count(*) FROM links WHERE src_url LIKE '%/index.html'"
    )
    assert depths[1][1] <= first_level[0][0]


def test_scope_include_exclude(db_path: str) -> None:
    with SiteServer() as other, SiteServer() as site:
        body = (
            f'<a href="/docs/a">a</a><a href="/docs/b">b</a><a href="/blog/c">c</a>'
            f'<a href="{other.url}/x">other host</a>'
        )
        site.routes = {"/": html_handler(body)}
        site.fallback = html_handler("<p>leaf</p>")
        other.fallback = html_handler("<p>other</p>")
        seeds = [site.url + "/"]
        crawler.run(
            seeds, Settings(db=db_path, include=("/docs/", r"/$"), exclude=("/b$",), **FAST)
        )
        assert sorted(site.paths()) == ["/", "/docs/a", "/robots.txt"]
        assert other.hits == []
        crawler.run(seeds, Settings(db=db_path + "any", scope="any", **FAST))
        assert other.hits == []  # another port of 127.0.0.1: not a seed's origin (SSRF guard)
        crawler.run(seeds, Settings(db=db_path + "priv", scope="any", allow_private=True, **FAST))
        assert sorted(other.paths()) == ["/robots.txt", "/x"]


def test_domain_scope_keeps_subdomains_only() -> None:
    from crawler.policy.scope import Scope

    scope = Scope(["http://www.example.com/"], "domain")
    assert scope.check("http://example.com:8080/a") is None
    assert scope.check("https://docs.example.com/") is None
    assert scope.check("http://badexample.com/") == "scope"
    host = Scope(["http://example.com:81/"], "host")
    assert host.check("http://example.com:81/x") is None
    assert host.check("http://example.com/x") == "scope"


def test_per_host_limit_and_delay_seen_by_the_server(db_path: str) -> None:
    links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(12))
    with SiteServer(latency_s=0.05) as site:
        site.routes = {"/": html_handler(links)}
        site.fallback = html_handler("<p>leaf</p>")
        crawler.run([site.url + "/"], Settings(db=db_path, concurrency=20, per_host=3, delay=0, sitemaps=False,
                                               workers=1, progress=False))  # fmt: skip
        assert len(site.hits) == 14
        assert max_concurrency(site.hits) == 3
    with SiteServer() as site:
        site.routes = {"/": html_handler(links[:80])}
        site.fallback = html_handler("<p>leaf</p>")
        crawler.run([site.url + "/"], Settings(db=db_path + "2", concurrency=20, per_host=2, sitemaps=False,
                                               delay=0.2, workers=1, progress=False))  # fmt: skip
        assert len(site.hits) >= 5
        assert min_start_gap(site.hits) >= 0.2 - 0.01
        assert max_concurrency(site.hits) == 1


def test_robots_txt_is_obeyed(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": _text("User-agent: *\nDisallow: /private\n"),
            "/": html_handler('<a href="/private/x">p</a><a href="/public">q</a>'),
        }
        site.fallback = html_handler("<p>leaf</p>")
        report = crawler.run([site.url + "/"], Settings(db=db_path, **FAST))
        assert sorted(site.paths()) == ["/", "/public", "/robots.txt"]
        assert report.skipped == {"robots": 1}


@pytest.mark.parametrize(("status", "fetched"), [(404, True), (503, False)])
def test_robots_txt_errors_follow_rfc_9309(db_path: str, status: int, fetched: bool) -> None:
    with SiteServer() as site:
        site.routes = {"/robots.txt": html_handler("x", status=status)}
        site.fallback = html_handler("<p>leaf</p>")
        crawler.run([site.url + "/"], Settings(db=db_path, **FAST))
        assert ("/" in site.paths()) is fetched


def test_errors_are_data_not_failures(db_path: str) -> None:
    from aiohttp import web

    async def reset(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        return web.Response()

    with SiteServer() as site:
        site.routes = {
            "/": html_handler('<a href="/500">a</a><a href="/reset">b</a><a href="/big">c</a>'),
            "/500": html_handler("oops", status=500),
            "/reset": reset,
            "/big": html_handler("x" * 5000),
        }
        report = crawler.run(
            [site.url + "/"], Settings(db=db_path, max_body_bytes=4000, retries=0, **FAST)
        )
    assert report.status == "finished"
    stored = dict(rows(db_path, "SELECT substr(url, instr(url, '/500') ), error FROM pages"))
    errors = dict(rows(db_path, "SELECT url, coalesce(error, status) FROM pages"))
    assert errors[site.url + "/500"] == 500
    assert errors[site.url + "/reset"] in ("connect", "bad-response")
    assert errors[site.url + "/big"] == "too-large"
    assert report.by_status.get(500) == 1 and stored


def test_runs_table_and_restart_in_one_process(db_path: str) -> None:
    with SiteServer() as site:
        site.fallback = html_handler("<p>only</p>")
        first = crawler.run([site.url + "/"], Settings(db=db_path, **FAST))
        second = crawler.run([site.url + "/"], Settings(db=db_path, **FAST))  # nothing due
        third = crawler.run([site.url + "/"], Settings(db=db_path, max_interval=0, **FAST))
    assert (first.run_id, second.run_id, third.run_id) == (1, 2, 3)
    runs = rows(
        db_path,
        "SELECT id, status, reason, pages_ok, pages_unchanged, ended_at IS NOT NULL FROM runs",
    )
    assert runs == [
        (1, "finished", "done", 1, 0, 1),
        (2, "finished", "done", 0, 0, 1),
        (3, "finished", "done", 0, 1, 1),  # due at once: refetched, found the same
    ]
    assert [h.path for h in site.hits if h.path == "/"] == ["/", "/"]
    assert rows(db_path, "SELECT count(*) FROM pages") == [(1,)]


def test_async_api_inside_a_users_event_loop(db_path: str) -> None:
    import asyncio

    async def users_app(url: str) -> tuple[crawler.CrawlReport, crawler.CrawlReport]:
        seen: list[crawler.Progress] = []
        one = crawler.crawl([url], Settings(**FAST), db=db_path, on_progress=seen.append)
        two = crawler.crawl([url], Settings(**FAST), db=db_path + "2")
        reports = await asyncio.gather(one, two)  # two crawls at the same time
        assert seen and seen[0].done == 0
        return reports

    with SiteServer() as site:
        site.fallback = html_handler("<title>t</title>")
        first, second = asyncio.run(users_app(site.url + "/"))
    assert first.pages_ok == second.pages_ok == 1 and first.db == db_path


def _text(body: str):  # type: ignore[no-untyped-def]
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, content_type="text/plain")

    return handle


_PAGE_FIELDS = ("url, final_url, status, content_type, title, lang, canonical, meta_robots, "
                "body_bytes, content_hash, outlinks")  # fmt: skip
_TEXT_FIELDS = "url, text, tokens, simhash"
"""Stored for a page that is no duplicate, which depends on the order pages came in."""


def test_pages_parsed_before_the_workers_are_up_are_stored_as_the_workers_store_them(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the parse workers start (here made slow: 0.5 s), the crawl parses pages
    itself, without numba, and a worker adds the terms of their text: each page is stored
    as a crawl without that (one CPU) stores it. With a query, so anchor hits, token counts
    and SimHash are compared too."""
    spawn = ParsePool._spawn

    def slow_spawn(pool: ParsePool) -> Any:
        time.sleep(0.5)
        return spawn(pool)

    monkeypatch.setattr(ParsePool, "_spawn", slow_spawn)
    settings = Settings(query="page heading", device="cpu", **FAST)
    here, workers_only = str(tmp_path / "here.db"), str(tmp_path / "workers.db")
    with SiteServer() as server:
        LinkGraph(600, stable=True).serve(server)
        with caplog.at_level(logging.DEBUG, logger="crawler.engine.engine"):
            assert crawler.run([server.url + "/"], settings.replace(db=here)).reason == "done"
            parsed = [r.getMessage() for r in caplog.records if "crawl process" in r.getMessage()]
            assert len(parsed) == 1 and int(parsed[0].split()[0]) >= 20, parsed
            caplog.clear()
            monkeypatch.setattr(engine_module, "_usable_cpus", lambda: 1)
            report = crawler.run([server.url + "/"], settings.replace(db=workers_only))
            assert report.reason == "done"
            assert not [r for r in caplog.records if "crawl process" in r.getMessage()]
    pages = f"SELECT {_PAGE_FIELDS} FROM pages ORDER BY url"
    assert len(rows(here, pages)) > 500
    assert rows(here, pages) == rows(workers_only, pages)
    texts = [  # of the pages that are no duplicate in either crawl
        {row[0]: row for row in rows(db, f"SELECT {_TEXT_FIELDS} FROM pages WHERE tokens NOTNULL")}
        for db in (here, workers_only)
    ]
    both = sorted(texts[0].keys() & texts[1].keys())
    assert len(both) > 300
    assert [texts[0][url] for url in both] == [texts[1][url] for url in both]


def test_a_one_page_crawl_starts_no_parse_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crawl of one page parses it in the crawl process and starts no parse worker (their
    start, fork and exit would cost more than the page); a crawl of more starts them all
    at its second page. The first page is stored the same either way."""
    spawned: list[ParsePool] = []
    spawn = ParsePool._spawn

    def counted(pool: ParsePool) -> Any:
        spawned.append(pool)
        return spawn(pool)

    monkeypatch.setattr(ParsePool, "_spawn", counted)
    monkeypatch.setattr(engine_module, "_usable_cpus", lambda: 2)
    one, more = str(tmp_path / "one.db"), str(tmp_path / "more.db")
    settings = Settings(**FAST)  # two workers
    with SiteServer() as server:
        LinkGraph(300, stable=True).serve(server)
        report = crawler.run([server.url + "/"], settings.replace(db=one, max_pages=1))
        assert (report.reason, report.pages_ok, spawned) == ("max-pages", 1, [])
        report = crawler.run([server.url + "/"], settings.replace(db=more))
    assert report.reason == "done" and report.pages_ok > 250
    assert len(spawned) == 2 and spawned[0] is spawned[1]
    first = f"SELECT {_PAGE_FIELDS}, {_TEXT_FIELDS} FROM pages WHERE url = '{server.url}/'"
    assert rows(one, first) == rows(more, first) != []


def test_a_failure_of_the_terms_for_a_page_parsed_here_is_the_pages_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page parsed in the crawl process whose terms fail (here, or in the worker) is
    stored as a parse failure, as a worker's failed parse is; the crawl goes on (``int``
    stands for a ``text_terms`` and a ``plain_terms`` that raise: ``int(text, ())`` is a
    ``TypeError``)."""
    spawn = ParsePool._spawn

    def slow_spawn(pool: ParsePool) -> Any:
        time.sleep(0.5)
        return spawn(pool)

    monkeypatch.setattr(ParsePool, "_spawn", slow_spawn)
    monkeypatch.setattr(pages_module, "text_terms", int)
    monkeypatch.setattr(pages_module, "plain_terms", int)
    db = str(tmp_path / "c.db")
    with SiteServer() as server:
        LinkGraph(100, stable=True).serve(server)
        report = crawler.run([server.url + "/"], Settings(db=db, **FAST))
    assert (report.status, report.reason) == ("finished", "done")
    failed = rows(db, "SELECT count(*) FROM pages WHERE error = 'parse' AND status = 200")[0][0]
    parsed = rows(db, "SELECT count(*) FROM pages WHERE error IS NULL AND tokens NOTNULL")[0][0]
    html = rows(db, "SELECT count(*) FROM pages WHERE status = 200 AND content_type = 'text/html'")
    assert failed >= 1 and failed + parsed == html[0][0] > 100  # each page parsed or failed


def test_a_crawl_frees_its_pages_by_reference_counting(tmp_path: Path) -> None:
    """What a crawl holds of each page (its response, body, parse job and result, the
    record written) is freed as the page is done, not left to the cyclic collector: the
    ``crawl`` command runs that seldom (``crawler.cli.tuning``), so one cycle a page keeps
    every body of a crawl (as a parse request and its batch once did: 350 MB on the
    10,000-page bench site). Counted with the collector off, after an 800-page crawl (most
    of it parsed by the workers, not by the crawl process while they start)."""
    from crawler.net.fetch import FetchResult
    from crawler.net.http.response import Response
    from parsers.page import Page, ParseJob
    from storage.base import PageRecord

    kinds = (Response, FetchResult, ParseJob, Page, PageRecord)
    body = "<p>" + "filler text " * 400 + "</p>"
    with SiteServer({"/robots.txt": html_handler("", status=404)}) as site:
        site.fallback = html_handler(
            "<title>p</title>" + body + "".join(f'<a href="/p{i}">{i}</a>' for i in range(800))
        )
        gc.collect()
        gc.disable()
        try:
            report = crawler.run([site.url + "/"], Settings(db=str(tmp_path / "c.db"), **FAST))
            alive = Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, kinds))
        finally:
            gc.enable()
    assert report.pages_ok == 801
    assert all(count <= 40 for count in alive.values()), alive
