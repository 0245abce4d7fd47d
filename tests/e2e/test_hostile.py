"""A hostile or odd site can't stall, throttle or fool the crawl: end to end, ``crawler.run``
against local sites, judged from the server's side (what was requested, when) and from the
database.

Scenarios: the crawler's own refusals never slow a host, while redirect hops keep its pace;
endless URL spaces (calendars, soft 404s) are bounded while a large site of one URL shape is
crawled whole; content types as a browser sees them; stalls (stacked content codings, a
robots.txt of thousands of wildcard rules, a page lexbor takes long on, a quadratic charset,
redirects through other ports of a seed host, a slow redirect chain); credentials in a seed
URL reach their origin and nothing else.
"""

from __future__ import annotations

import asyncio
import base64
import calendar as calendar_module
import contextlib
import gzip
import itertools
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import crawler
from crawler import CrawlReport, Settings
from crawler.policy.traps import MAX_QUERY_SHAPES
from parsers import page_scan
from tests.e2e.test_hardening import BASE, RawServer
from tests.proc import child_env
from tests.sites import Handler, SiteServer, html_handler

NO_ROBOTS = html_handler("no robots here", status=404)


def crawl(seeds: list[str], db: str, **settings: Any) -> CrawlReport:
    return crawler.run(seeds, Settings(db=db, **{**BASE, **settings}))


def rows(db: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        return connection.execute(sql, params).fetchall()


def anchors(*hrefs: str) -> str:
    return "".join(f'<a href="{href}">link {i}</a> ' for i, href in enumerate(hrefs))


def redirect(location: str, status: int = 302) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handle


def typed(body: bytes, content_type: str | None, **headers: str) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.Response(body=body, headers=headers)
        if content_type is None:
            response.headers.popall("Content-Type", None)
        else:
            response.headers["Content-Type"] = content_type
        return response

    return handle


def starts(site: SiteServer, prefix: str = "") -> list[float]:
    return sorted(hit.start for hit in site.hits if hit.path.startswith(prefix))


# -- politeness: refusals are not distress; hops keep the pace --------------------------------


def test_the_crawlers_own_refusals_never_slow_a_host(db_path: str) -> None:
    """Eight redirects the crawler refuses to follow (other schemes, private and metadata
    addresses, another port of the seed's host) cost nothing but themselves: the thirty
    plain pages beside them are all fetched well within the time budget."""
    refused = ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi", "ftp://x/y",
               "gopher://x/", "http://10.0.0.1/", "http://169.254.169.254/latest/",
               "http://127.0.0.1:9/"]  # fmt: skip
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": NO_ROBOTS,
            "/": html_handler(
                anchors(*(f"/r{i}" for i in range(8)), *(f"/p{i}" for i in range(30)))
            ),
            **{f"/r{i}": redirect(target) for i, target in enumerate(refused)},
        }
        site.fallback = html_handler("<p>plain</p>")
        report = crawl([site.url + "/"], db_path, max_time=3.0, per_host=1)
    fetched = Counter(site.paths())
    assert all(fetched[f"/p{i}"] == 1 for i in range(30)), fetched
    assert report.reason == "done"
    gaps = [b - a for a, b in itertools.pairwise(starts(site))]
    assert max(gaps) < 0.5, gaps  # no backoff: --delay 0 and a fast, healthy server
    stored = dict(rows(db_path, "SELECT url, status FROM pages WHERE url LIKE ?", "%/r%"))
    assert sorted(stored.values()) == [302] * 8  # each a redirect not followed, not an error


def test_server_distress_still_slows_a_host(db_path: str) -> None:
    """The other side: a server that answers 500 gets its requests spaced out."""
    with SiteServer() as site:
        site.routes = {"/robots.txt": NO_ROBOTS,
                       "/": html_handler(anchors(*(f"/e{i}" for i in range(4))))}  # fmt: skip
        site.fallback = html_handler("down", status=500)
        crawl([site.url + "/"], db_path, retries=0, per_host=1, max_delay=0.4)
    errors = starts(site, "/e")
    assert len(errors) == 4
    assert min(b - a for a, b in itertools.pairwise(errors)) >= 0.25


def test_redirect_hops_keep_the_hosts_crawl_delay(db_path: str) -> None:
    """A ten-hop chain under ``Crawl-delay: 0.2``: every request to the host, hops and
    robots.txt included, starts at least 0.2 s after the one before."""
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": html_handler("User-agent: *\nCrawl-delay: 0.2\n"),
            "/": html_handler(anchors("/hop/0", "/a", "/b", "/c")),
            **{f"/hop/{i}": redirect(f"/hop/{i + 1}") for i in range(10)},
            "/hop/10": html_handler("<p>end of the chain</p>"),
        }
        site.fallback = html_handler("<p>page</p>")
        crawl([site.url + "/"], db_path, per_host=2, timeout=30.0)
    assert Counter(site.paths())["/hop/10"] == 1
    times = starts(site)
    assert len(times) == 16
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.2 - 0.02, gaps


# -- endless URL spaces ----------------------------------------------------------------------


def _calendar(request: web.Request) -> web.StreamResponse:
    year, month = (int(part) for part in request.match_info["tail"].split("/")[1:3])
    prev = (year - 1, 12) if month == 1 else (year, month - 1)
    nxt = (year + 1, 1) if month == 12 else (year, month + 1)
    links = anchors(f"/cal/{prev[0]}/{prev[1]:02d}", f"/cal/{nxt[0]}/{nxt[1]:02d}",
                    f"/cal/{year + 1}/{month:02d}")  # fmt: skip
    name = calendar_module.month_name[month]
    body = f"<h1>Events of {name} {year}</h1><p>No events this month.</p>{links}"
    return web.Response(text=body, content_type="text/html")


async def calendar(request: web.Request) -> web.StreamResponse:
    return _calendar(request)


def _article_text(i: int) -> str:
    rng = random.Random(i)
    words = [f"w{rng.randrange(3000)}" for _ in range(250)]
    return " ".join(words)


async def articles(request: web.Request) -> web.StreamResponse:
    """400 pages of one shape, /p/N.html, each saying something new, each linking to five
    others, and hub pages reached with ``?ref=`` variants (duplicates) from everywhere."""
    i = int(request.path.removeprefix("/p/").removesuffix(".html"))
    rng = random.Random(i)
    links = [f"/p/{rng.randrange(400)}.html" for _ in range(5)] + [f"/p/{(i + 1) % 400}.html"]
    links += [f"/p/{i % 5}.html?ref=nav{i % 9}"]
    body = f"<title>a{i}</title><p>{_article_text(i)}</p>{anchors(*links)}"
    return web.Response(text=body, content_type="text/html")


def test_an_endless_calendar_is_bounded_and_a_site_of_one_shape_is_not(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {"/robots.txt": NO_ROBOTS,
                       "/": html_handler(anchors("/cal/2026/01", "/p/0.html"))}  # fmt: skip
        site.fallback = articles
        app_routes = site.routes

        async def dispatch(request: web.Request) -> web.StreamResponse:
            if request.path.startswith("/cal/"):
                return await calendar(request)
            return await articles(request)

        site.fallback = dispatch
        assert app_routes is site.routes
        report = crawl([site.url + "/"], db_path, max_time=60.0)
    fetched = Counter(site.paths())
    calendar_fetches = sum(n for path, n in fetched.items() if path.startswith("/cal/"))
    assert 10 <= calendar_fetches <= 50, calendar_fetches
    assert all(fetched[f"/p/{i}.html"] == 1 for i in range(400))
    variants = {f"/p/{i % 5}.html?ref=nav{i % 9}" for i in range(400)}
    assert all(fetched[variant] == 1 for variant in variants)  # duplicates, but no trap
    assert report.reason == "done"
    skipped = rows(db_path, "SELECT url, reason FROM skipped WHERE reason = 'url-template'")
    assert skipped and all("/cal/" in url for url, _ in skipped)


def test_a_soft_404_that_links_to_more_of_itself_is_bounded(db_path: str) -> None:
    """Every URL under /x/ answers 200 with the same "not found" page and a link to a new
    random URL there (a soft 404 with a related-links box)."""
    counter = iter(range(10**6))

    async def soft404(request: web.Request) -> web.StreamResponse:
        n = next(counter)
        body = f"<h1>Page not found</h1><p>Try these:</p>{anchors(f'/x/{n}a', f'/x/{n}b')}"
        return web.Response(text=body, content_type="text/html")

    with SiteServer(latency_s=0.005) as site:  # a server's pace, not a burst of thousands
        site.routes = {"/robots.txt": NO_ROBOTS, "/": html_handler(anchors("/x/start"))}
        site.fallback = soft404
        crawl([site.url + "/"], db_path, max_time=60.0, template_budget=8)
    # Two templates (/x/Na, /x/Nb), each closed after 1 + 8 + 1 pages; the rest were in
    # flight or being parsed when they closed (the links double at every page).
    assert 8 <= sum(path.startswith("/x/") for path in site.paths()) <= 60


def test_no_template_budget_follows_the_calendar_on(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {"/robots.txt": NO_ROBOTS, "/": html_handler(anchors("/cal/2026/01"))}
        site.fallback = calendar
        crawl([site.url + "/"], db_path, template_budget=0, max_pages=120)
    assert sum(path.startswith("/cal/") for path in site.paths()) >= 110


def test_a_filter_that_adds_a_parameter_a_link_is_bounded(db_path: str) -> None:
    """``/shop?f0=1`` links to ``/shop?f0=1&f1=1`` and so on: every page a new set of
    query names (so a new template), the path followed with at most MAX_QUERY_SHAPES."""

    async def shop(request: web.Request) -> web.StreamResponse:
        names = list(request.query)
        more = "&".join([*(f"{n}=1" for n in names), f"f{len(names)}=1"])
        other = "&".join([*(f"{n}=1" for n in names), f"g{len(names)}=1"])
        body = f"<p>Shop: all items.</p>{anchors('/shop?' + more, '/shop?' + other)}"
        return web.Response(text=body, content_type="text/html")

    with SiteServer() as site:
        site.routes = {"/robots.txt": NO_ROBOTS, "/": html_handler(anchors("/shop?f0=1"))}
        site.fallback = shop
        crawl([site.url + "/"], db_path, max_time=60.0)
    assert sum(path.startswith("/shop") for path in site.paths()) <= MAX_QUERY_SHAPES + 1


def test_a_retry_after_of_an_hour_does_not_hold_the_crawl(db_path: str) -> None:
    """429 with ``Retry-After: 3600``: the host is paused for at most ``--max-delay``."""
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": NO_ROBOTS,
            "/": html_handler(anchors("/busy", "/a", "/b")),
            "/busy": html_handler("slow down", 429, {"Retry-After": "3600"}),
        }
        site.fallback = html_handler("<p>page</p>")
        report = crawl([site.url + "/"], db_path, max_delay=1.0, retries=1, max_time=60.0)
    assert Counter(site.paths())["/busy"] == 2 and {"/a", "/b"} <= set(site.paths())
    assert report.elapsed_s < 10 and report.reason == "done"


# -- content types as a browser sees them ----------------------------------------------------


def raw(body: bytes, *headers: str, status: int = 200) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def test_content_types_are_read_as_a_browser_reads_them(db_path: str) -> None:
    """Declared HTML is parsed even with NUL bytes in it (dropped from the text, as the HTML
    standard's tree construction drops them in a body); no type (or an unknown one) is
    sniffed by the WHATWG rules; ``text/plain`` and ``application/octet-stream`` are not
    HTML, whatever they hold; ``nosniff`` forbids sniffing."""
    nul = b"<html><body><p>x\x00y</p>" + b"\x00" * 100 + b'<a href="/after-nul">n</a>'

    def page_with(link: str) -> bytes:
        return f'<html><body><a href="{link}">x</a></body></html>'.encode()

    paths = ("/nul", "/untyped", "/unknown", "/octet", "/plain", "/nosniff", "/pre")
    with RawServer({}) as site:
        site.responses.update({
            "/robots.txt": raw(b"", status=404),
            "/": raw(anchors(*paths).encode(), "Content-Type: text/html"),
            "/nul": raw(nul, "Content-Type: text/html"),
            "/untyped": raw(page_with("/from-untyped")),
            "/unknown": raw(page_with("/from-unknown"), "Content-Type: unknown/unknown"),
            "/octet": raw(page_with("/from-octet"), "Content-Type: application/octet-stream"),
            "/plain": raw(page_with("/from-plain"), "Content-Type: text/plain"),
            "/nosniff": raw(page_with("/from-nosniff"), "X-Content-Type-Options: nosniff"),
            "/pre": raw(b"<pre><a href='/from-pre'>x</a></pre>"),  # "<p" + "r": no pattern
        })  # fmt: skip
        for leaf in ("/after-nul", "/from-untyped", "/from-unknown"):
            site.responses[leaf] = raw(b"<p>leaf</p>", "Content-Type: text/html")
        crawl([site.url + "/"], db_path)
    fetched = set(site.paths)
    assert {"/after-nul", "/from-untyped", "/from-unknown"} <= fetched
    assert not fetched & {"/from-octet", "/from-plain", "/from-nosniff", "/from-pre"}
    (text,) = rows(db_path, "SELECT text FROM pages WHERE url = ?", site.url + "/nul")[0]
    assert "xy" in text


def test_a_twelve_hop_redirect_chain_is_followed(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {"/robots.txt": NO_ROBOTS, "/": html_handler(anchors("/r/0"))}
        site.routes.update({f"/r/{i}": redirect(f"/r/{i + 1}") for i in range(12)})
        site.routes["/r/12"] = html_handler("<title>arrived</title>")
        crawl([site.url + "/"], db_path)
    assert rows(db_path, "SELECT final_url, title FROM pages WHERE url = ?", site.url + "/r/0") == [
        (site.url + "/r/12", "arrived")
    ]


# -- stalls ----------------------------------------------------------------------------------


def test_stacked_content_codings_are_capped(db_path: str) -> None:
    body = b"<html><body><p>deep</p></body></html>" + b" " * 4_000_000
    five = body
    for _ in range(5):
        five = gzip.compress(five, 1)
    many = body
    for _ in range(300):
        many = gzip.compress(many, 1)
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": NO_ROBOTS,
            "/": html_handler(anchors("/five", "/many")),
            "/five": typed(five, "text/html", **{"Content-Encoding": ", ".join(["gzip"] * 5)}),
            "/many": typed(many, "text/html", **{"Content-Encoding": ", ".join(["gzip"] * 300)}),
        }
        report = crawl([site.url + "/"], db_path, timeout=5.0)
    got = {
        url: (error, text)
        for url, error, text in rows(db_path, "SELECT url, error, text FROM pages")
    }
    assert got[site.url + "/five"] == (None, "deep")
    assert got[site.url + "/many"] == ("bad-response", None)
    assert report.status == "finished"


def test_a_robots_txt_of_thousands_of_wildcard_rules_cannot_stall_the_crawl(db_path: str) -> None:
    """15,000 distinct wildcard rules (within the 500 KiB cap) allowing only a 400-URL
    sitemap: every sitemap URL is judged, and ``--max-time`` still ends the run."""
    rng = random.Random(5)
    rules = []
    while len(rules) < 15_000:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7))
        rules.append(f"Disallow: /*{word}*.php$")
    robots = (
        "User-agent: *\nAllow: /ok/\nAllow: /sitemap.xml$\n" + "\n".join(rules) + "\nDisallow: /\n"
    )
    assert len(robots.encode()) < 500 * 1024
    urls = "".join(f"<url><loc>{{origin}}/ok/{i}</loc></url>" for i in range(400))
    with SiteServer() as site:
        sitemap = f"<urlset>{urls}</urlset>"
        site.routes = {"/robots.txt": html_handler(robots), "/": html_handler("<p>root</p>")}
        site.fallback = html_handler("<p>ok</p>")

        async def sitemap_handler(request: web.Request) -> web.StreamResponse:
            return web.Response(text=sitemap.replace("{origin}", site.url),
                                content_type="application/xml")  # fmt: skip

        site.routes["/sitemap.xml"] = sitemap_handler
        started = time.monotonic()
        report = crawl([site.url + "/"], db_path, sitemaps=True, max_time=3.0, concurrency=16,
                       per_host=16)  # fmt: skip
        took = time.monotonic() - started
    assert took < 3.0 + 5.0 + 1.0, took  # the time budget, the stop's grace, slack
    assert report.status == "finished"
    assert sum(path.startswith("/ok/") for path in site.paths()) > 0


def test_a_sitemap_nested_millions_deep_is_cut_short(db_path: str) -> None:
    """10 MB of nested elements in a sitemap: read up to the depth cap, the rest ignored,
    the crawl goes on (its URLs before the nesting are followed)."""
    deep = b"<urlset><url><loc>{origin}/listed</loc></url>" + b"<a>" * 3_300_000
    with SiteServer() as site:

        async def sitemap(request: web.Request) -> web.StreamResponse:
            body = deep.replace(b"{origin}", site.url.encode())
            return web.Response(body=body, content_type="application/xml")

        site.routes = {"/robots.txt": NO_ROBOTS, "/sitemap.xml": sitemap,
                       "/": html_handler("<p>root</p>")}  # fmt: skip
        site.fallback = html_handler("<p>listed</p>")
        report = crawl([site.url + "/"], db_path, sitemaps=True, max_time=30.0)
    assert "/listed" in site.paths()
    assert report.status == "finished" and report.reason == "done"


def serve_a_slow_parse(site: SiteServer) -> None:
    """``/`` links to ``/nested`` (80,000 nested elements: lexbor's tree builder is quadratic
    in nesting; MathML at the end makes the scan of the tokens give up and build the tree,
    and its one link ``/never`` is never reached) and to 20 fine pages."""
    nested = b"<html><body>" + b"<div>" * 80_000 + b'<math></math><a href="/never">x</a>'
    site.routes = {
        "/robots.txt": NO_ROBOTS,
        "/": html_handler(anchors("/nested", *(f"/p{i}" for i in range(20)))),
        "/nested": typed(nested, "text/html"),
    }
    site.fallback = html_handler("<title>fine</title><p>a fine page</p>")


def test_a_page_the_parser_takes_long_on_is_abandoned(db_path: str) -> None:
    """80,000 nested elements (lexbor is quadratic in nesting): the page is stored as
    ``parse-timeout``, its worker replaced, the rest of the crawl parsed as usual, and
    ``--max-time`` holds."""
    with SiteServer() as site:
        serve_a_slow_parse(site)
        report = crawl([site.url + "/"], db_path, parse_timeout=1.0, max_time=20.0)
    errors = dict(rows(db_path, "SELECT url, error FROM pages WHERE error IS NOT NULL"))
    assert errors == {site.url + "/nested": "parse-timeout"}
    titles = rows(db_path, "SELECT count(*) FROM pages WHERE title = 'fine'")
    assert titles == [(20,)]
    assert "/never" not in site.paths()
    assert report.status == "finished" and report.elapsed_s < 15


@pytest.mark.skipif(
    not page_scan.scans and not os.environ.get("CI"), reason="the scan does not run here"
)
def test_deep_nesting_that_needs_no_tree_is_parsed_in_time(db_path: str) -> None:
    """The same 80,000 nested elements with nothing the scan of the tokens gives up on: the
    page is read without building lexbor's tree, in time, and its link followed."""
    with SiteServer() as site:
        nested = b"<html><body>" + b"<div>" * 80_000 + b'<a href="/deep">x</a>'
        site.routes = {
            "/robots.txt": NO_ROBOTS,
            "/": html_handler(anchors("/nested")),
            "/nested": typed(nested, "text/html"),
        }
        site.fallback = html_handler("<title>deep</title><p>reached</p>")
        report = crawl([site.url + "/"], db_path, parse_timeout=1.0, max_time=20.0)
    assert rows(db_path, "SELECT url, error FROM pages WHERE error IS NOT NULL") == []
    assert "/deep" in site.paths()
    assert report.status == "finished"


def test_the_crawl_command_abandons_a_slow_parse_after_its_fork_server_ended(
    tmp_path: Path,
) -> None:
    """The same in the ``crawl`` command, which ends its fork server once its workers are up
    (``crawler.pool.forkserver.release``): the overrunning worker, adopted by the crawl, is
    still killed and replaced (from a new fork server), and the crawl ends on time."""
    db = tmp_path / "cli.db"
    with SiteServer() as site:
        serve_a_slow_parse(site)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(site.url + "/\n")
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), "--delay", "0",
             "--parse-timeout", "1", "--max-time", "20", "--no-progress", "-q"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    errors = dict(rows(str(db), "SELECT url, error FROM pages WHERE error IS NOT NULL"))
    assert errors == {site.url + "/nested": "parse-timeout"}
    assert rows(str(db), "SELECT count(*) FROM pages WHERE title = 'fine'") == [(20,)]
    assert elapsed < 15


def test_a_charset_python_knows_but_browsers_do_not_is_not_used(db_path: str) -> None:
    """``charset=punycode`` (a quadratic decoder) is no WHATWG label: the page is decoded
    as a browser would, at once, and its links are found."""
    filler = "<p>" + "a" * 800_000 + "</p>"
    body = f'<html><body>{filler}<a href="/found">f</a></body></html>'.encode()
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": NO_ROBOTS,
            "/": typed(body, "text/html; charset=punycode"),
        }
        site.fallback = html_handler("<p>leaf</p>")
        report = crawl([site.url + "/"], db_path, parse_timeout=5.0)
    assert "/found" in site.paths()
    assert rows(db_path, "SELECT error FROM pages WHERE url = ?", site.url + "/") == [(None,)]
    assert report.status == "finished"


def test_a_seeds_exemption_covers_its_own_origin_only(db_path: str) -> None:
    """The SSRF guard exempts the seed's origin (scheme, host, port), not its host: links to
    another port of 127.0.0.1 under ``--scope domain`` are not fetched, nor robots.txt
    redirected there (then, robots.txt unreadable, nothing on the seed is: RFC 9309)."""
    with SiteServer() as other, SiteServer() as site:
        other.fallback = html_handler("User-agent: *\nDisallow:\n")
        site.routes = {"/robots.txt": NO_ROBOTS,
                       "/": html_handler(anchors(other.url + "/page", "/here"))}  # fmt: skip
        site.fallback = html_handler("<p>here</p>")
        crawl([site.url + "/"], db_path, scope="domain")
        assert other.hits == []
        assert "/here" in site.paths()
        skipped = dict(rows(db_path, "SELECT url, reason FROM skipped"))
        assert skipped.get(other.url + "/page") == "ssrf"
        site.routes["/robots.txt"] = redirect(other.url + "/robots.txt")
        crawl([site.url + "/"], db_path + "-2", scope="domain")
    assert other.hits == []
    assert dict(rows(db_path + "-2", "SELECT url, reason FROM skipped")) == {
        site.url + "/": "robots"
    }


def test_timeout_is_one_deadline_for_the_whole_fetch(db_path: str) -> None:
    async def slow_hop(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.4)
        n = int(request.path.removeprefix("/slow/"))
        return web.Response(status=302, headers={"Location": f"/slow/{n + 1}"})

    with SiteServer() as site:
        site.routes = {"/robots.txt": NO_ROBOTS, "/": html_handler(anchors("/slow/0"))}
        site.fallback = slow_hop
        crawl([site.url + "/"], db_path, timeout=1.0, retries=0)
    hops = starts(site, "/slow/")
    assert len(hops) <= 3  # within 1 s of the first: 0.4 s a hop
    assert hops[-1] - hops[0] < 1.0
    assert rows(db_path, "SELECT error FROM pages WHERE url = ?", site.url + "/slow/0") == [
        ("timeout",)
    ]


# -- credentials in a seed URL ---------------------------------------------------------------

SECRET = "s3cr3t-Pa55"


def basic_area(site: SiteServer) -> None:
    expected = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()

    async def guarded(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        if request.path == "/":
            return web.Response(text=anchors("/a", "/b", "/away"), content_type="text/html")
        return web.Response(text=f"<title>{request.path}</title>", content_type="text/html")

    site.fallback = guarded


def test_seed_credentials_open_their_origin_and_are_stored_nowhere(
    db_path: str, tmp_path: Path
) -> None:
    """``crawl`` of a seed ``http://alice:PASSWORD@host/``: the Basic-auth area opens, the
    credentials go to that origin only (not across a redirect to another one), and the
    password is nowhere afterwards: database files, JSONL/CSV/WARC exports, the ``-v`` log."""
    seeds, log = tmp_path / "seeds.txt", tmp_path / "crawl.log"
    with SiteServer() as other, SiteServer() as site:
        basic_area(site)
        other.fallback = html_handler("<p>elsewhere</p>")
        site.routes = {"/robots.txt": NO_ROBOTS, "/away": redirect(other.url + "/landing")}
        seeds.write_text(site.url.replace("http://", f"http://alice:{SECRET}@") + "/\n")
        done = subprocess.run(
            [sys.executable, "-m", "crawler", str(seeds), "--db", db_path, "--store-body", "-v",
             "--log-file", str(log), "--delay", "0", "--scope", "any", "--allow-private",
             "--no-progress"],
            env=child_env(), capture_output=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        other_headers = [hit.header("Authorization") for hit in other.hits]
    titles = dict(rows(db_path, "SELECT url, title FROM pages"))
    assert titles[site.url + "/a"] == "/a" and titles[site.url + "/b"] == "/b"
    assert site.url + "/" in titles  # stored without its userinfo
    assert other_headers and all(value is None for value in other_headers)
    exports = []
    for fmt in ("jsonl", "csv", "warc"):
        out = tmp_path / f"pages.{fmt}"
        done = subprocess.run(
            [sys.executable, "-m", "crawler", "export", db_path, "--format", fmt, "-o", str(out)],
            env=child_env(), capture_output=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        exports.append(out)
    token = base64.b64encode(f"alice:{SECRET}".encode())
    files = [*tmp_path.rglob("crawl.db*"), log, *exports]
    assert len(files) >= 5 and log.stat().st_size > 0
    for path in files:
        data = path.read_bytes()
        with contextlib.suppress(OSError, EOFError):
            data += gzip.decompress(data)  # a WARC is gzipped record by record
        assert SECRET.encode() not in data and token not in data, path
        assert b"alice" not in data, path


# -- the library as a newcomer uses it -------------------------------------------------------

FIVE_LINES = """\
import crawler
report = crawler.run([{seed!r}], crawler.Settings(db={db!r}, delay=0, progress=False,
                                                  concurrency=8, per_host=8))
print("pages", report.pages_ok)
"""


@pytest.fixture(scope="module")
def hundred_pages() -> Any:
    with SiteServer() as site:
        site.routes = {"/robots.txt": NO_ROBOTS,
                       "/": html_handler(anchors(*(f"/p{i}" for i in range(99))))}  # fmt: skip
        site.fallback = html_handler("<title>p</title><p>text</p>")
        yield site


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_an_unguarded_five_line_script_just_works(how: str, hundred_pages: SiteServer,
                                                   tmp_path: Path) -> None:  # fmt: skip
    db = str(tmp_path / f"{how}.db")
    script = FIVE_LINES.format(seed=hundred_pages.url + "/", db=db)
    if how == "file":
        path = tmp_path / "five.py"
        path.write_text(script)
        done = subprocess.run([sys.executable, str(path)], env=child_env(), cwd=tmp_path,
                              capture_output=True, text=True, timeout=180)  # fmt: skip
    else:
        done = subprocess.run([sys.executable, "-"], input=script, env=child_env(), cwd=tmp_path,
                              capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pages 100" in done.stdout
    assert "Traceback" not in done.stderr


EXTRACT_UNGUARDED = """\
import asyncio, crawler
def extract(tree, url):
    node = tree.css_first("title")
    return node.text() if node is not None else None
settings = crawler.Settings(db={db!r}, delay=0, progress=False)
asyncio.run(crawler.Crawler(settings, extract=extract).run([{seed!r}]))
"""


def test_an_unguarded_script_with_an_extract_hook_stops_with_one_line(
    hundred_pages: SiteServer, tmp_path: Path
) -> None:
    path = tmp_path / "hook.py"
    path.write_text(
        EXTRACT_UNGUARDED.format(seed=hundred_pages.url + "/", db=str(tmp_path / "h.db"))
    )
    done = subprocess.run([sys.executable, str(path)], env=child_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and '__name__ == "__main__"' in lines[0], done.stderr


def test_an_extract_hook_from_standard_input_is_run_in_the_crawl_process(
    hundred_pages: SiteServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "stdin-hook.db")
    script = EXTRACT_UNGUARDED.format(seed=hundred_pages.url + "/", db=db)
    done = subprocess.run([sys.executable, "-"], input=script, env=child_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(db, "SELECT count(*) FROM pages WHERE extract LIKE '%\"p\"%'") == [(99,)]


def dies_in_a_worker(tree: Any, url: str) -> str:
    """An ``extract`` hook that kills any parse worker running it (as a crashing C
    extension would) and works in the crawl process."""
    import multiprocessing
    import os

    if multiprocessing.parent_process() is not None:
        os._exit(3)
    return "here"


def test_workers_that_keep_dying_leave_the_parsing_to_the_crawl_process(
    db_path: str, hundred_pages: SiteServer, caplog: pytest.LogCaptureFixture
) -> None:
    crawl_ = crawler.Crawler(Settings(db=db_path, **BASE), extract=dies_in_a_worker)
    report = asyncio.run(crawl_.run([hundred_pages.url + "/"]))
    assert report.status == "finished" and report.pages_ok == 100
    assert rows(db_path, "SELECT count(*) FROM pages WHERE extract = '\"here\"'") == [(100,)]
    assert sum("parsing in the crawl process" in r.getMessage() for r in caplog.records) == 1


def test_seed_credentials_are_split_off_their_url() -> None:
    from crawler.seeds import split_credentials

    seeds, credentials = split_credentials(
        ["http://u%40x:p%3Aw@h:81/a@b?c=@", "http://h:81/other", "https://plain/"]
    )
    assert seeds == ["http://h:81/a@b?c=@", "http://h:81/other", "https://plain/"]
    assert credentials == {"http://h:81": "u%40x:p%3Aw"}
