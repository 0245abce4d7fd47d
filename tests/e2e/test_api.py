"""The library API (``crawler.__all__``, ``Crawler``, hooks), checked for real.

Every crawl here runs against local aiohttp servers (``tests.sites``) whose request logs
say what was fetched and when, on real SQLite files read back with ``sqlite3``:
- the public names: ``__all__``, docstrings, lazy imports, a CLI flag for every setting;
- streaming: ``Crawler.pages`` yields every page of a generated site exactly once, with the
  right fields, and a slow consumer holds the crawl back (the server's log is the witness);
- stopping: breaking out of the loop, or ``stop()``, ends the run cleanly and resumably;
- hooks: ``on_page``, ``url_filter`` and ``extract`` (run in the spawned parse workers);
- two crawls in one process, at the same time and one after the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import sqlite3
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import crawler
from crawler import ConfigError, CrawledPage, Crawler, CrawlerError, CrawlReport, Settings
from tests.proc import ROOT as ROOT_DIR
from tests.sites import LinkGraph, PageSite, SiteServer, html_handler

ROOT = ROOT_DIR

EXPECTED_ALL = [
    "ConfigError",
    "CrawlReport",
    "CrawledPage",
    "Crawler",
    "CrawlerError",
    "DatabaseLocked",
    "FetchError",
    "ParseError",
    "Progress",
    "Settings",
    "StorageError",
    "crawl",
    "rank",
    "run",
]


def fast(db: str, **changes: Any) -> Settings:
    """Settings for a local site: no delay, one parse worker, no progress bar, no sitemaps."""
    values: dict[str, Any] = {"concurrency": 8, "per_host": 8, "delay": 0.0, "workers": 1,
                              "progress": False, "sitemaps": False}  # fmt: skip
    values.update(changes)
    return Settings(db=db, **values)


def rows(db: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def stored_urls(db: str) -> set[str]:
    return {url for (url,) in rows(db, "SELECT url FROM pages")}


# -- extract hooks: module level, so that the spawned parse workers can import them ---------
def extract_heading(tree: Any, url: str) -> dict[str, Any]:
    """The page's first <h1>, its number of links and the URL the hook was given."""
    h1 = tree.css_first("h1")
    return {"h1": h1.text() if h1 is not None else None, "links": len(tree.css("a")), "url": url}


def extract_or_fail(tree: Any, url: str) -> Any:
    """Fails on every third page (raises) and on the next ones (not JSON: a set)."""
    number = int(tree.css_first("h1").text().split()[-1])
    if number % 3 == 0:
        raise ValueError(f"no extract for page {number}")
    if number % 3 == 1:
        return {number}  # json.dumps refuses a set
    return {"n": number}


# -- 1. the public names -------------------------------------------------------------------
def test_all_is_the_public_api_and_every_name_is_documented() -> None:
    assert crawler.__all__ == EXPECTED_ALL
    namespace: dict[str, Any] = {}
    exec("from crawler import *", namespace)  # resolves the lazy names through __getattr__
    assert set(EXPECTED_ALL) <= set(namespace)
    for name in EXPECTED_ALL:
        obj = getattr(crawler, name)
        assert namespace[name] is obj
        doc = obj.__doc__ or ""  # own docstring, not an inherited one (inspect.getdoc would)
        assert doc.strip(), f"crawler.{name} has no docstring"
        assert not doc.startswith(f"{name}("), f"crawler.{name}: only dataclass's generated doc"
    with pytest.raises(AttributeError):
        crawler.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


def test_public_methods_and_properties_have_docstrings() -> None:
    """The issue asks for docstrings on everything public: class members too."""
    missing = []
    for name in EXPECTED_ALL:
        obj = getattr(crawler, name)
        if not inspect.isclass(obj):
            continue
        for member, value in vars(obj).items():
            if member.startswith("_"):
                continue
            if isinstance(value, classmethod | staticmethod):
                value = value.__func__
            documentable = isinstance(value, property) or inspect.isfunction(value)
            if documentable and not (value.__doc__ or "").strip():
                missing.append(f"{name}.{member}")
    assert missing == []


def test_the_package_is_typed() -> None:
    assert (ROOT / "crawler" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    for package in ("crawler", "parsers", "storage"):
        assert "py.typed" in package_data[package]
    # crawl serve's CSS and icon ship in the wheel: the page works offline.
    assert "serve/static/*" in package_data["crawler"]
    assert crawler.crawl.__annotations__["return"] == "CrawlReport"
    assert inspect.iscoroutinefunction(crawler.crawl)
    assert not inspect.iscoroutinefunction(crawler.run)
    assert inspect.isasyncgenfunction(Crawler.pages)


def test_import_crawler_is_light() -> None:
    """``import crawler`` (and touching the lazy names) loads no HTTP, parsing, numba or
    engine code: the CLI's ``--help`` and a script's import stay fast. Of ``parsers``, only
    the package and its memo of dataclass methods (``parsers.dataclass_cache``)."""
    code = (
        "import json, sys\n"
        "import crawler\n"
        "crawler.Settings(delay=0, max_pages=3)\n"
        "first = sorted(sys.modules)\n"
        "crawler.Crawler, crawler.CrawledPage, crawler.CrawlReport, crawler.Progress\n"
        "print(json.dumps([first, sorted(sys.modules)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=True)  # fmt: skip
    after_import, after_lazy = json.loads(done.stdout)
    heavy = ("aiohttp", "numba", "numpy", "selectolax", "uvloop", "yarl", "parsers", "storage",
             "crawler.engine.engine", "crawler.net.fetch", "crawler.pool.parse_pool", "crawler.frontier.hosts")  # fmt: skip
    for modules in (after_import, after_lazy):
        light = ("parsers", "parsers.dataclass_cache")
        loaded = [m for m in modules if m.startswith(heavy) and m not in light]
        assert loaded == [], loaded
    assert "crawler.api" not in after_import  # lazy until first used
    assert "crawler.api" in after_lazy


def test_every_setting_is_a_cli_flag_and_every_flag_a_setting() -> None:
    """Complements test_cli's list of flags: derived from the dataclass, both directions."""
    from crawler.cli import main

    command = main.get_command(None, "crawl")  # type: ignore[arg-type]
    assert command is not None
    help_text = CliRunner().invoke(main, ["--help"]).output
    options = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    negated = {"progress", "sitemaps"}  # --no-progress, --no-sitemaps: the default is on
    config_only = {"host_headers"}  # a table: only a config file holds it
    fields = [f.name for f in dataclasses.fields(Settings) if f.init and f.name not in config_only]
    renamed = {"headers": "--header"}  # repeatable: one header a flag
    for name in fields:
        flag = renamed.get(name) or ("--no-" if name in negated else "--") + name.replace("_", "-")
        assert flag in options, f"Settings.{name} has no CLI flag {flag}"
        assert flag in help_text, f"{flag} missing from crawl --help"
    # the reverse: every option of the crawl command is a setting, but for --config (a file
    # of settings) and --help
    names = {p.name for p in command.params if isinstance(p, click.Option)}
    names -= {"config_file", "help"}
    assert {n if n in fields else n.removeprefix("no_") for n in names} == set(fields)


def test_settings_is_frozen_and_reads_a_crawl_table(tmp_path: Path) -> None:
    settings = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.delay = 0.0  # type: ignore[misc]
    config = tmp_path / "crawl.toml"
    config.write_text('[crawl]\nper-host = 3\nmax_pages = 7\nexclude = ["/a", "/b"]\n')
    loaded = Settings.from_toml(str(config))
    assert (loaded.per_host, loaded.max_pages, loaded.exclude) == (3, 7, ("/a", "/b"))
    assert loaded.replace(delay=0).delay == 0 and loaded.delay == Settings().delay
    with pytest.raises(ConfigError):
        loaded.replace(per_host=0)


# -- 2. streaming --------------------------------------------------------------------------
def test_pages_streams_every_page_once_with_its_fields(tmp_path: Path) -> None:
    db = str(tmp_path / "stream.db")
    config = tmp_path / "crawl.toml"
    config.write_text(
        "concurrency = 8\nper-host = 8\ndelay = 0\nworkers = 1\nno-progress = true\n"
        "no-sitemaps = true\n"
    )
    settings = Settings.from_toml(config)
    with SiteServer() as external, SiteServer() as server:
        graph = LinkGraph(150, external=external.url)
        graph.serve(server)

        async def stream() -> tuple[list[CrawledPage], Crawler, CrawlReport | None]:
            pages: list[CrawledPage] = []
            async with Crawler(settings, db=db) as c:
                assert c.report is None
                async for page in c.pages([server.url + "/"]):
                    pages.append(page)
                report = c.report  # set as soon as the loop has ended
            return pages, c, report

        pages, c, report = asyncio.run(stream())
        assert external.hits == []
    expected = graph.expected_paths() - {"/"}  # "/" redirects to /index.html
    finals = [p.final_url.removeprefix(server.url) for p in pages]
    assert len(finals) == len(set(finals)) == len(expected)  # every page, exactly once
    assert set(finals) == expected
    assert len({p.url for p in pages}) == len(pages)
    assert report is not None and report is c.report
    assert (report.status, report.reason, report.db) == ("finished", "done", db)
    assert report.pages == len(pages) and c.settings.db == db

    by_final = {p.final_url.removeprefix(server.url): p for p in pages}
    depth_of = {p.final_url: p.depth for p in pages}
    for path, page in by_final.items():
        assert page.error is None and page.unchanged is False and page.fetched_at
        if path.startswith("/files/"):
            assert (page.status, page.content_type, page.title) == (200, "application/pdf", None)
            assert page.links == ()
            continue
        index = graph._index_of(path.split("?")[0])
        if index is None:
            assert page.status == 404, path  # /missing<i>.html, or a <base href> directory
            continue
        query = "?" + path.split("?")[1] if "?" in path else ""
        assert (page.status, page.content_type, page.title) == (200, "text/html", f"Page {index}")
        assert page.text is not None and f"Heading {index}" in page.text
        assert f"hidden{index}" not in page.text and page.lang == "en"
        assert set(page.links) == graph.expected_links(index, query), path
        assert page.extract is None  # no extract hook
    root = by_final["/index.html"]
    assert root.url == server.url + "/" and root.depth == 0
    # a page's depth is one more than the depth of a page that links to it (the one it was
    # found on first), so never less than its shortest distance from the seed
    parents: dict[str, list[int]] = {}
    for page in pages:
        for link in page.links:
            parents.setdefault(link.split("#")[0], []).append(page.depth)
    for page in pages:
        if page is not root:
            assert page.depth - 1 in parents[page.url], page.url
    assert max(depth_of.values()) > 1
    # the stream and the database agree
    stored = rows(db, "SELECT url, final_url, status, title, depth, outlinks FROM pages")
    assert {r[0]: (r[1], r[2], r[3], r[4], json.loads(r[5])) for r in stored} == {
        p.url: (p.final_url, p.status, p.title, p.depth, list(p.links)) for p in pages
    }


# -- 3. backpressure -----------------------------------------------------------------------
def test_slow_consumer_slows_the_crawl_instead_of_buffering(db_path: str) -> None:
    """While the consumer sleeps 40 ms per page, the pages the server has served but the
    consumer has not seen stay bounded: ``buffer`` pages wait in the queue, and at most the
    engine's pipeline (4 x concurrency jobs: fetched, in the parse pool or waiting to hand
    their page over) is ahead of it."""
    buffer, concurrency, n = 4, 2, 50
    site = PageSite(n, links=4)
    bound = buffer + 4 * concurrency + 1
    with SiteServer() as server:
        site.serve(server)

        async def slow_consumer() -> tuple[list[int], CrawlReport | None]:
            lags: list[int] = []
            settings = fast(db_path, concurrency=concurrency, per_host=concurrency)
            async with Crawler(settings, buffer=buffer) as c:
                async for _page in c.pages([server.url + "/"]):
                    served = len(site.page_hits(server.hits))
                    lags.append(served - (len(lags) + 1))
                    await asyncio.sleep(0.04)
            return lags, c.report

        lags, report = asyncio.run(slow_consumer())
    assert len(lags) == n and report is not None and report.status == "finished"
    assert max(lags) <= bound, lags
    assert max(lags) >= buffer, lags  # the buffer did fill: the consumer set the pace


# -- 4. stopping ---------------------------------------------------------------------------
def test_break_stops_the_crawl_cleanly_and_a_second_run_resumes(db_path: str) -> None:
    site = PageSite(40)
    with SiteServer() as server:
        site.serve(server)
        seeds = [server.url + "/"]
        settings = fast(db_path, concurrency=2, per_host=2)

        async def read_five() -> tuple[list[str], CrawlReport | None]:
            seen: list[str] = []
            async with Crawler(settings, buffer=2) as c:
                async for page in c.pages(seeds):
                    seen.append(page.url)
                    if len(seen) == 5:
                        break
            return seen, c.report

        seen, report = asyncio.run(read_five())
        assert report is not None and report.status == "interrupted"
        assert report.reason in ("consumer stopped", "crawler closed")
        first = stored_urls(db_path)
        assert set(seen) <= first and 5 <= len(first) < site.n
        assert rows(db_path, "SELECT status, ended_at IS NOT NULL FROM runs") == [
            ("interrupted", 1)
        ]
        assert rows(db_path, "SELECT count(*) FROM urls WHERE lease IS NOT NULL") == [(0,)]
        assert rows(db_path, "SELECT count(*) FROM urls WHERE state = 'queued'")[0][0] > 0
        first_hits = len(server.hits)

        again = asyncio.run(Crawler(settings).run(seeds))  # a new Crawler, the same database
        assert (again.status, again.reason) == ("finished", "done")
        assert stored_urls(db_path) == site.urls()
        refetched = {server.url + h.path for h in site.page_hits(server.hits[first_hits:])}
        assert refetched.isdisjoint(first)  # what the first run stored is not fetched again
        assert again.pages_ok == site.n - len(first)
        assert rows(db_path, "SELECT status FROM runs ORDER BY id") == [
            ("interrupted",),
            ("finished",),
        ]


def test_stop_then_keep_reading_yields_what_was_stored(db_path: str) -> None:
    site = PageSite(40)
    with SiteServer() as server:
        site.serve(server)

        async def stop_after_three() -> tuple[list[str], CrawlReport | None]:
            seen: list[str] = []
            async with Crawler(fast(db_path, concurrency=2, per_host=2), buffer=2) as c:
                async for page in c.pages([server.url + "/"]):
                    seen.append(page.url)
                    if len(seen) == 3:
                        c.stop()
            return seen, c.report

        seen, report = asyncio.run(stop_after_three())
    assert report is not None and (report.status, report.reason) == ("interrupted", "stopped")
    assert len(seen) == len(set(seen)) < site.n
    assert set(seen) == stored_urls(db_path)  # every stored page was yielded, none lost
    assert rows(db_path, "SELECT count(*) FROM urls WHERE lease IS NOT NULL") == [(0,)]


# -- 5. on_page ----------------------------------------------------------------------------
def test_on_page_gets_every_page_once(tmp_path: Path) -> None:
    site = PageSite(25)
    with SiteServer() as server:
        site.serve(server)
        seeds = [server.url + "/"]
        called: list[str] = []

        async def on_page(page: CrawledPage) -> None:
            await asyncio.sleep(0)
            called.append(page.url)

        report = asyncio.run(Crawler(fast(str(tmp_path / "a.db")), on_page=on_page).run(seeds))
        assert report.status == "finished"
        assert len(called) == len(set(called)) and set(called) == site.urls()

        called.clear()

        async def stream() -> list[str]:
            async with Crawler(fast(str(tmp_path / "b.db")), on_page=on_page) as c:
                return [page.url async for page in c.pages(seeds)]

        streamed = asyncio.run(stream())
        assert called == streamed  # the callback runs first, then the page is yielded
        assert set(streamed) == site.urls()


def test_a_failing_hook_fails_the_run_and_leaves_the_database_consistent(
    tmp_path: Path,
) -> None:
    """An exception in ``on_page`` or ``url_filter`` (main-process hooks, unlike ``extract``)
    reaches the caller; the run is recorded as failed and holds no leases."""
    site = PageSite(20)

    async def on_page(page: CrawledPage) -> None:
        if page.url.endswith("/p3.html"):
            raise RuntimeError("on_page failed")

    def url_filter(url: str) -> bool:
        if url.endswith("/p5.html"):
            raise RuntimeError("url_filter failed")
        return True

    with SiteServer() as server:
        site.serve(server)
        for name, crawl in [
            ("on_page", Crawler(fast(str(tmp_path / "a.db")), on_page=on_page)),
            ("url_filter", Crawler(fast(str(tmp_path / "b.db")), url_filter=url_filter)),
        ]:
            with pytest.raises(Exception) as caught:
                asyncio.run(crawl.run([server.url + "/"]))
            error: BaseException = caught.value
            while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
                error = error.exceptions[0]  # the engine's TaskGroup may wrap it
            assert isinstance(error, RuntimeError) and str(error) == f"{name} failed"
            db = crawl.settings.db
            assert rows(db, "SELECT status, ended_at IS NOT NULL FROM runs") == [("failed", 1)]
            assert rows(db, "SELECT count(*) FROM urls WHERE lease IS NOT NULL") == [(0,)]
            # the pages accepted before the failure are stored, and counted as stored
            (stored,) = rows(db, "SELECT count(*) FROM pages")[0]
            assert rows(db, "SELECT pages_ok + pages_failed FROM runs") == [(stored,)]
            assert stored >= (3 if name == "on_page" else 1)


def test_a_cancelled_run_stores_and_counts_what_it_accepted(tmp_path: Path) -> None:
    """The caller's cancel (``wait_for``'s timeout) ends the run as interrupted: the pages
    already handed to the writer are written first, and the run's row counts exactly the
    pages stored."""
    site = PageSite(2000, links=4)
    db = str(tmp_path / "c.db")
    seen = 0

    async def on_page(page: CrawledPage) -> None:
        nonlocal seen
        seen += 1
        await asyncio.sleep(0.002)

    async def scenario(url: str) -> None:
        crawl = Crawler(fast(db), on_page=on_page)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(crawl.run([url]), timeout=0.8)

    with SiteServer(latency_s=0.02) as server:  # ~400 pages/s: the cancel comes mid-way
        site.serve(server)
        asyncio.run(scenario(server.url + "/"))
    (stored,) = rows(db, "SELECT count(*) FROM pages")[0]
    assert rows(db, "SELECT status FROM runs") == [("interrupted",)]
    assert rows(db, "SELECT pages_ok + pages_failed FROM runs") == [(stored,)]
    assert 0 < stored < site.n and stored >= seen  # every page on_page saw is stored


def test_a_sync_on_page_is_refused() -> None:
    def on_page(page: CrawledPage) -> None:
        pass

    with pytest.raises(ConfigError, match="on_page must be an async function"):
        Crawler(on_page=on_page)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Crawler(on_page=lambda page: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="buffer"):
        Crawler(buffer=0)


def test_hooks_that_would_never_be_awaited_are_refused() -> None:
    """An async url_filter returns a coroutine (true: every URL passes), an async extract
    one that is no JSON, an async on_progress one nobody awaits: refused at once. An object
    whose ``__call__`` is async is an on_page like any."""

    async def passes(url: str) -> bool:
        return True

    class OnPage:
        async def __call__(self, page: CrawledPage) -> None:
            pass

    with pytest.raises(ConfigError, match="url_filter must be a plain function"):
        Crawler(url_filter=passes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="extract must be a plain function"):
        Crawler(extract=passes)
    Crawler(on_page=OnPage())
    with pytest.raises(ConfigError, match="on_progress must be a plain function"):
        crawler.run(["http://127.0.0.1:9/"], on_progress=passes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="on_progress must be a plain function"):
        crawler.run(["http://127.0.0.1:9/"], on_progress=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seeds", "message"),
    [("http://a.test/", "a list of URLs, not one str"), ([None], "not NoneType"),
     ([b"http://a.test/"], "not bytes"), (["ftp://a.test/"], "not an absolute http")],
)  # fmt: skip
def test_seeds_of_the_wrong_shape_are_a_config_error(seeds: Any, message: str) -> None:
    """A string alone would be iterated into one seed a character."""
    with pytest.raises(ConfigError, match=message):
        crawler.run(seeds, Settings(db=":memory:"))


def test_the_sync_call_inside_an_event_loop_says_what_to_use() -> None:
    async def inside() -> None:
        with pytest.raises(CrawlerError, match=r"await crawler\.crawl"):
            crawler.run(["http://127.0.0.1:9/"])

    asyncio.run(inside())


def test_one_pattern_given_alone_is_one_pattern() -> None:
    assert Settings(exclude="logout").exclude == ("logout",)
    assert Settings(include=["/a", "/b"]).include == ("/a", "/b")


def test_rank_refuses_bad_arguments_and_names_a_missing_database(tmp_path: Path) -> None:
    db = str(tmp_path / "none.db")
    for kwargs, message in (({"top": -1}, "top must be"), ({"device": "tpu"}, "--device"),
                            ({"query": " "}, "query must not be empty")):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            crawler.rank(**{"db": db, "query": "x", **kwargs})  # type: ignore[arg-type]
    with pytest.raises(crawler.StorageError, match="no such database"):
        crawler.rank(db, "x")


# -- 6. url_filter -------------------------------------------------------------------------
def test_url_filter_refusals_are_not_fetched_and_recorded(db_path: str) -> None:
    with SiteServer() as other, SiteServer() as site:
        site.routes = {
            "/": html_handler(
                '<a href="/keep/1">1</a><a href="/keep/2">2</a><a href="/drop/1">x</a>'
                f'<a href="/drop/2">y</a><a href="{other.url}/elsewhere">other host</a>'
            ),
            "/keep/1": html_handler('<a href="/drop/3">z</a><a href="/keep/3">3</a>'),
        }
        site.fallback = html_handler("<title>leaf</title>")
        asked: list[str] = []

        def only_keep(url: str) -> bool:
            asked.append(url)
            return "/drop/" not in url

        report = asyncio.run(Crawler(fast(db_path), url_filter=only_keep).run([site.url + "/"]))
        assert sorted(site.paths()) == ["/", "/keep/1", "/keep/2", "/keep/3", "/robots.txt"]
        assert other.hits == []
    assert report.status == "finished" and report.skipped == {"filter": 3, "scope": 1}
    skipped = rows(db_path, "SELECT url, reason FROM skipped ORDER BY reason, url")
    assert skipped == [(f"{site.url}/drop/{i}", "filter") for i in (1, 2, 3)] + [
        (f"{other.url}/elsewhere", "scope")
    ]
    assert stored_urls(db_path) == {site.url + p for p in ("/", "/keep/1", "/keep/2", "/keep/3")}
    # asked about in-scope URLs only (the other host is out of scope), each once
    assert all(u.startswith(site.url + "/") for u in asked) and len(asked) == len(set(asked))
    assert {u.removeprefix(site.url) for u in asked} >= {"/drop/1", "/drop/2", "/drop/3"}


# -- 7. extract ----------------------------------------------------------------------------
def test_extract_runs_in_the_workers_and_is_stored_as_json(db_path: str) -> None:
    site = PageSite(20, links=3)
    with SiteServer() as server:
        site.serve(server)

        async def stream() -> list[CrawledPage]:
            async with Crawler(fast(db_path), extract=extract_heading) as c:
                return [page async for page in c.pages([server.url + "/"])]

        pages = asyncio.run(stream())
    assert {p.url for p in pages} == site.urls()
    for page in pages:
        i = site.index_of_url(page.url)
        assert i is not None
        expected = {"h1": f"Heading {i}", "links": len(site.outlinks[i]), "url": page.final_url}
        assert page.extract == expected, page.url
    stored = dict(rows(db_path, "SELECT url, extract FROM pages"))
    assert {url: json.loads(value) for url, value in stored.items()} == {
        p.url: p.extract for p in pages
    }


def test_extract_must_be_picklable() -> None:
    def local_extract(tree: Any, url: str) -> int:
        return 1

    with pytest.raises(ConfigError, match="module level"):
        Crawler(extract=lambda tree, url: 1)
    with pytest.raises(ConfigError, match="module level"):
        Crawler(extract=local_extract)
    with pytest.raises(ConfigError):
        Crawler(extract="h1")  # type: ignore[arg-type]


def test_a_failing_extract_leaves_the_page_without_one(db_path: str) -> None:
    site = PageSite(18, links=2)
    with SiteServer() as server:
        site.serve(server)
        crawl = Crawler(fast(db_path), extract=extract_or_fail)
        report = asyncio.run(crawl.run([server.url + "/"]))
    assert (report.status, report.reason, report.pages_ok) == ("finished", "done", site.n)
    stored = rows(db_path, "SELECT url, status, title, extract FROM pages")
    assert len(stored) == site.n
    for url, status, title, extract in stored:
        i = site.index_of_url(url)
        assert i is not None and (status, title) == (200, f"Page {i}")
        assert extract == (json.dumps({"n": i}) if i % 3 == 2 else None), url


# -- 8. two crawls in one process ----------------------------------------------------------
def test_two_crawls_at_the_same_time(tmp_path: Path) -> None:
    site_a, site_b = PageSite(30, seed=1), PageSite(24, seed=2)
    db_a, db_b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    with SiteServer(latency_s=0.01) as server_a, SiteServer(latency_s=0.01) as server_b:
        site_a.serve(server_a)
        site_b.serve(server_b)
        times: dict[str, list[float]] = {"a": [], "b": []}

        async def both() -> list[CrawlReport]:
            loop = asyncio.get_running_loop()
            started = {"a": asyncio.Event(), "b": asyncio.Event()}

            async def page_of(name: str, other: str) -> None:
                # each crawl waits, on its first page, for the other's first page: a deadlock
                # (a timeout here) unless both crawls really run at the same time
                times[name].append(loop.time())
                started[name].set()
                await asyncio.wait_for(started[other].wait(), 60)

            async def on_a(page: CrawledPage) -> None:
                await page_of("a", "b")

            async def on_b(page: CrawledPage) -> None:
                await page_of("b", "a")

            a = Crawler(fast(db_a, concurrency=2, per_host=2), on_page=on_a,
                        extract=extract_heading)  # fmt: skip
            b = Crawler(fast(db_b, concurrency=2, per_host=2), on_page=on_b)
            runs = asyncio.gather(a.run([server_a.url + "/"]), b.run([server_b.url + "/"]))
            await asyncio.wait_for(started["a"].wait(), 60)
            # a third crawl on a database in use, in the same process, is refused
            with pytest.raises(CrawlerError, match="in use by another crawl"):
                await Crawler(fast(db_a)).run([server_a.url + "/"])
            return list(await runs)

        report_a, report_b = asyncio.run(both())
        assert Counter(h.path for h in site_a.page_hits(server_a.hits)) == Counter(site_a.paths())
        assert Counter(h.path for h in site_b.page_hits(server_b.hits)) == Counter(site_b.paths())
    # both were producing pages at the same time: each one's first page came before the
    # other's last
    assert times["a"][0] < times["b"][-1] and times["b"][0] < times["a"][-1]
    assert (report_a.status, report_a.pages_ok, report_a.db) == ("finished", 30, db_a)
    assert (report_b.status, report_b.pages_ok, report_b.db) == ("finished", 24, db_b)
    assert stored_urls(db_a) == site_a.urls() and stored_urls(db_b) == site_b.urls()
    # each crawl's parse pool has its own hook: b's pages got no extract
    assert rows(db_b, "SELECT count(*) FROM pages WHERE extract IS NOT NULL") == [(0,)]
    assert rows(db_a, "SELECT count(*) FROM pages WHERE extract IS NULL") == [(0,)]


def test_one_crawler_runs_again_and_again(tmp_path: Path) -> None:
    site_a, site_b = PageSite(15, seed=3), PageSite(12, seed=4)
    db = str(tmp_path / "one.db")
    with SiteServer() as server_a, SiteServer() as server_b:
        site_a.serve(server_a)
        site_b.serve(server_b)

        async def twice() -> tuple[CrawlReport, list[CrawledPage], Crawler]:
            c = Crawler(fast(db))
            first = await c.run([server_a.url + "/"])
            assert c.report is first
            async with c:
                pages = []
                async for page in c.pages([server_b.url + "/"]):
                    if not pages:  # one run at a time per Crawler
                        with pytest.raises(CrawlerError, match="already running"):
                            await c.run([server_b.url + "/"])
                    pages.append(page)
            return first, pages, c

        first, pages, c = asyncio.run(twice())
    assert (first.status, first.pages_ok) == ("finished", 15)
    second = c.report
    assert second is not None and second is not first
    assert (second.status, second.pages_ok, second.run_id) == ("finished", 12, first.run_id + 1)
    assert {p.url for p in pages} == site_b.urls()
    assert stored_urls(db) == site_a.urls() | site_b.urls()
