"""Politeness and hardening, end to end: ``crawler.run`` against small local sites.

Each test serves its own tiny site on 127.0.0.x (``tests.sites.SiteServer``, which records
every request with its arrival and end times) and crawls it in-process with a real parse pool
and a real SQLite file in ``tmp_path``. Assertions come from the server's side (what was
requested, how often, when) and from the database (``pages``, ``skipped``, ``robots``,
``runs`` and the ``links`` view), never from the crawler's internals.

Scenarios: robots.txt (rules, Crawl-delay, 404/503, redirect, 24 h cache), retries
(503/500/404, Retry-After, ``retries=0``), redirects (chains, loops, scope, SSRF guard),
limits (gzip bomb, Content-Length cap, stacked encodings, deadlines, resets), content
(binary, sniffing, noindex/nofollow, duplicates, canonical), traps and hygiene (repeated
segments, long URLs, session ids, per-host budget, outlink cap) and sitemaps.

Nothing here leaves 127.0.0.0/8: the one non-loopback address named (169.254.169.254) is
only a redirect target that the SSRF guard must refuse; the test checks the guard refuses
it before it lets the crawler see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import json
import resource
import socketserver
import sqlite3
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import brotli
import pytest
from aiohttp import web

import crawler
from crawler import CrawlReport, Settings
from crawler.net.decoding import BodyDecoder
from crawler.policy.robots import MAX_ROBOTS_BYTES
from tests.sites import Handler, Hit, SiteServer, html_handler, max_concurrency, min_start_gap

BASE: dict[str, Any] = {
    "workers": 1,
    "progress": False,
    "sitemaps": False,
    "delay": 0.0,
    "concurrency": 8,
    "per_host": 2,
}
TOLERANCE_S = 0.05
"""Slack on server-side timings: the server stamps arrival a little after the client starts."""


# -- helpers ---------------------------------------------------------------------------------
def crawl(seeds: list[str], db: str, **settings: Any) -> CrawlReport:
    return crawler.run(seeds, Settings(db=db, **{**BASE, **settings}))


def rows(db: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        return connection.execute(sql, params).fetchall()


def page(db: str, url: str) -> dict[str, Any]:
    """The ``pages`` row of ``url`` as a dict (fails if there is none)."""
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.row_factory = sqlite3.Row
        row = connection.execute("SELECT * FROM pages WHERE url = ?", (url,)).fetchone()
    assert row is not None, f"no pages row for {url}"
    return dict(row)


def skipped(db: str) -> dict[str, str]:
    return dict(rows(db, "SELECT url, reason FROM skipped"))


def links_of(db: str, url: str) -> list[str]:
    return [dst for (dst,) in rows(db, "SELECT dst_url FROM links WHERE src_url = ?", url)]


def hits_of(server: SiteServer) -> Counter[str]:
    return Counter(server.paths())


def anchors(*hrefs: str) -> str:
    return "".join(f'<a href="{href}">link {i}</a>' for i, href in enumerate(hrefs))


def text_handler(
    body: str | bytes,
    content_type: str = "text/plain",
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> Handler:
    data = body.encode() if isinstance(body, str) else body

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=data, status=status, content_type=content_type, headers=headers)

    return handle


def redirect(location: str, status: int = 302) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handle


def sequence(*handlers: Handler) -> Handler:
    """Answer the n-th request with the n-th handler (the last one from then on)."""
    calls = [0]

    async def handle(request: web.Request) -> web.StreamResponse:
        index = min(calls[0], len(handlers) - 1)
        calls[0] += 1
        return await handlers[index](request)

    return handle


def robots(body: str) -> Handler:
    return text_handler(body, "text/plain")


def wait_until_hits_end(server: SiteServer, timeout_s: float = 5.0) -> None:
    """Handlers the client abandoned end a moment later, when the server sees the close."""
    deadline = time.monotonic() + timeout_s
    while any(hit.end == 0.0 for hit in server.hits) and time.monotonic() < deadline:
        time.sleep(0.02)


def first_start_after(hits: list[Hit], after: Hit) -> Hit:
    later = [hit for hit in hits if hit.start > after.start]
    assert later, "no request after the one given"
    return min(later, key=lambda hit: hit.start)


class RawServer:
    """A bare HTTP/1.1 server for responses aiohttp's server will not produce, such as a
    body without a ``Content-Type`` header. ``responses`` maps a path to the raw response
    bytes; other paths get a 404. Records the requested paths."""

    def __init__(self, responses: dict[str, bytes]) -> None:
        self.responses = responses
        self.paths: list[str] = []
        outer = self

        class _Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                request_line = self.rfile.readline().decode("latin-1")
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                path = request_line.split(" ")[1] if request_line.count(" ") >= 2 else ""
                outer.paths.append(path)
                self.wfile.write(outer.responses.get(path, _raw_response(404, b"", None)))

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


def _raw_response(status: int, body: bytes, content_type: str | None) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
    if content_type is not None:
        head.append(f"Content-Type: {content_type}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def stored_gzip(data: bytes) -> bytes:
    """``data`` gzipped without compression (stored blocks): a little longer than it."""
    compressor = zlib.compressobj(0, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


@functools.cache
def gzip_bomb(megabytes: int = 100) -> bytes:
    """``megabytes`` MiB of zeros, gzipped (~100 KiB), compressed in 1 MiB steps so that the
    test process itself never holds the decompressed size."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    parts = [compressor.compress(zeros) for _ in range(megabytes)]
    parts.append(compressor.flush())
    return b"".join(parts)


# -- 1. robots.txt ---------------------------------------------------------------------------
def test_robots_disallowed_paths_are_never_requested(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": robots("User-agent: *\nDisallow: /private\n"),
            "/": html_handler(anchors("/private/a", "/public", "/private/b?x=1")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        report = crawl([site.url + "/"], db_path)
    assert sorted(site.paths()) == ["/", "/public", "/robots.txt"]
    assert skipped(db_path) == {
        site.url + "/private/a": "robots",
        site.url + "/private/b?x=1": "robots",
    }
    assert report.skipped == {"robots": 2}
    assert rows(db_path, "SELECT origin, status FROM robots") == [(site.url, 200)]
    assert rows(db_path, "SELECT status, reason FROM runs") == [("finished", "done")]


def test_crawl_delay_spaces_request_starts_even_with_no_delay(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": robots("User-agent: *\nCrawl-delay: 0.3\nDisallow: /nothing\n"),
            "/": html_handler(anchors("/p1", "/p2", "/p3", "/p4")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path, delay=0.0, per_host=2)
    assert len(site.hits) == 6
    assert min_start_gap(site.hits) >= 0.3 - TOLERANCE_S
    assert max_concurrency(site.hits) == 1  # starts 0.3 s apart: never two at once here


def test_robots_404_allows_everything(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": html_handler("not found", status=404),
            "/": html_handler(anchors("/private", "/a")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path)
    assert sorted(site.paths()) == ["/", "/a", "/private", "/robots.txt"]
    assert skipped(db_path) == {}
    assert rows(db_path, "SELECT origin, status FROM robots") == [(site.url, 404)]


def test_a_robots_redirect_that_cannot_be_followed_is_asked_again_then_none(
    db_path: str,
) -> None:
    """A 302 with no Location (as one whose target is refused, or paced for now) is no rules:
    asked again, then the origin is crawled as if it had none (as a 404; Google reads it
    so), and nothing is cached that would disallow the origin for a day."""
    with SiteServer() as site:
        site.routes = {"/robots.txt": html_handler("moved", status=302)}
        site.fallback = html_handler(anchors("/a"))
        report = crawl([site.url + "/"], db_path)
    assert site.paths().count("/robots.txt") == 3 and "/a" in site.paths()
    assert skipped(db_path) == {} and report.pages_ok == 2
    assert rows(db_path, "SELECT count(*) FROM robots") == [(0,)]


def test_one_site_s_sitemaps_do_not_use_up_another_s(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap on sitemap documents is per origin: a site listing more than it reads them
    up to it; another site's sitemap is still read."""
    from crawler.engine import discovery

    monkeypatch.setattr(discovery, "MAX_SITEMAPS", 2)
    urlset = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{}</loc></url></urlset>'
    with SiteServer() as a, SiteServer() as b:
        a.routes = {"/robots.txt": text_handler("".join(f"Sitemap: /s{i}.xml\n" for i in range(5)))}
        a.routes |= {f"/s{i}.xml": text_handler(urlset.format(f"{a.url}/p{i}"), "application/xml")
                     for i in range(5)}  # fmt: skip
        b.routes = {"/robots.txt": text_handler("Sitemap: /b.xml\n"),
                    "/b.xml": text_handler(urlset.format(f"{b.url}/listed"), "application/xml")}  # fmt: skip
        a.fallback = b.fallback = html_handler("<p>leaf</p>")
        crawl([a.url + "/", b.url + "/"], db_path, sitemaps=True)
        assert sum(p.startswith("/s") for p in a.paths()) == 2
        assert "/b.xml" in b.paths() and "/listed" in b.paths()


def test_robots_503_means_nothing_is_fetched(db_path: str) -> None:
    with SiteServer() as site:
        # Retry-After: 0 keeps the test quick (the jittered backoff could take 6 s)
        site.routes = {"/robots.txt": html_handler("busy", 503, {"Retry-After": "0"})}
        site.fallback = html_handler(anchors("/a"))
        report = crawl([site.url + "/"], db_path)
    assert site.paths() == ["/robots.txt"] * 3  # the first request and 2 retries
    assert skipped(db_path) == {site.url + "/": "robots-unavailable"}
    assert rows(db_path, "SELECT count(*) FROM pages") == [(0,)]
    assert report.status == "finished"


def test_robots_redirect_is_followed(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": redirect("/policy/robots-real.txt", 301),
            "/policy/robots-real.txt": robots("User-agent: *\nDisallow: /secret\n"),
            "/": html_handler(anchors("/secret/x", "/open")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path)
    assert sorted(site.paths()) == ["/", "/open", "/policy/robots-real.txt", "/robots.txt"]
    assert skipped(db_path) == {site.url + "/secret/x": "robots"}


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_robots_txt_over_the_body_cap_is_read_to_500_kib(db_path: str, encoding: str) -> None:
    """RFC 9309 2.5: a crawler must parse at least 500 KiB of it. A longer one (here 2 MiB,
    over a 100 KB ``--max-body-bytes``) is read to 500 KiB, not failed as too large (which
    left the whole site unfetched): its rules there hold, a rule past it does not."""
    text = "User-agent: *\nDisallow: /private\n" + "# padding\n" * 200_000 + "Disallow: /late\n"
    body = text.encode() if encoding == "identity" else gzip.compress(text.encode())
    headers = {"Content-Encoding": "gzip"} if encoding == "gzip" else None
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": text_handler(body, headers=headers),
            "/": html_handler(anchors("/private/a", "/late", "/open")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        report = crawl([site.url + "/"], db_path, max_body_bytes=100_000)
    assert sorted(site.paths()) == ["/", "/late", "/open", "/robots.txt"]
    assert skipped(db_path) == {site.url + "/private/a": "robots"} and report.pages_ok == 3
    [(status, stored)] = rows(db_path, "SELECT status, length(body) FROM robots")
    assert status == 200 and stored == 500 * 1024 + 1  # the prefix; the cut line is dropped


def test_a_compressed_robots_txt_cut_as_it_came_loses_its_cut_line(db_path: str) -> None:
    """A gzip robots.txt cut at 500 KiB on the wire decodes to less (stored blocks: gzip's
    framing is on top): its cut last line is dropped too, or ``Allow: /private-exception/``
    cut to ``Allow: /private`` would open what ``Disallow: /p`` closes."""
    head, pad = b"User-agent: *\nDisallow: /p\n", b"# p\n" * 200_000
    probe = BodyDecoder("gzip", MAX_ROBOTS_BYTES + 1, cut=True)
    decoded = len(
        probe.feed(stored_gzip(head + pad)[: MAX_ROBOTS_BYTES + 1]) + probe.finish(truncated=True)
    )
    line = b"Allow: /private-exception/\n"
    filler = b"#" * (decoded - len(head) - len(b"Allow: /private") - 1) + b"\n"
    text = head + filler + line + pad  # the wire's cut falls right after "Allow: /private"
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": text_handler(stored_gzip(text), headers={"Content-Encoding": "gzip"}),
            "/": html_handler(anchors("/private/a", "/open")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path)
    assert sorted(site.paths()) == ["/", "/open", "/robots.txt"]
    [(stored,)] = rows(db_path, "SELECT body FROM robots")
    assert stored.endswith(b"\n") and not stored.endswith(b"Allow: /private")


def test_a_robots_redirect_chain_is_followed_five_hops_whatever_max_redirects(db_path: str) -> None:
    """RFC 9309 2.3.1.2: at least five hops. ``--max-redirects 1`` does not make a two-hop
    robots.txt missing (allow all): its rules hold."""
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": redirect("/r1"),
            "/r1": redirect("/real-robots.txt"),
            "/real-robots.txt": robots("User-agent: *\nDisallow: /secret\n"),
            "/": html_handler(anchors("/secret/a", "/open")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path, max_redirects=1)
    assert "/secret/a" not in site.paths() and "/open" in site.paths()
    assert skipped(db_path) == {site.url + "/secret/a": "robots"}


def test_a_brotli_page_of_many_decoding_steps_is_stored_whole(db_path: str) -> None:
    """A br page decoding to several 64 KiB steps (~300 KB) is stored whole, not failed
    as truncated."""
    html = "<html><body>" + "".join(f"<p>paragraph {i} of the page</p>\n" for i in range(9000))
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": robots("User-agent: *\nDisallow:\n"),
            "/": text_handler(brotli.compress(html.encode()), "text/html",
                              headers={"Content-Encoding": "br"}),
        }  # fmt: skip
        crawl([site.url + "/"], db_path)
    stored = page(db_path, site.url + "/")
    assert stored["error"] is None and stored["status"] == 200
    assert "paragraph 8999 of the page" in stored["text"]


@pytest.mark.parametrize("chain", ["loop", "endless"])
def test_robots_redirects_that_never_end_are_no_robots_txt(db_path: str, chain: str) -> None:
    """RFC 9309 2.3.1.2: past five redirects the robots.txt may be taken as unavailable, a
    4xx: allow all (as Google). A loop, and a chain longer than ``--max-redirects``, are
    that, not a failure that leaves the site unfetched; nothing is cached."""
    with SiteServer() as site:
        if chain == "loop":
            site.routes = {"/robots.txt": redirect("/r1"), "/r1": redirect("/robots.txt")}
        else:
            site.routes = {"/robots.txt": redirect("/r0")}
            site.routes |= {f"/r{i}": redirect(f"/r{i + 1}") for i in range(10)}
        site.fallback = html_handler(anchors("/a"))
        report = crawl([site.url + "/"], db_path, max_redirects=5)
    assert "/a" in site.paths() and report.pages_ok == 2
    assert skipped(db_path) == {}
    assert rows(db_path, "SELECT count(*) FROM robots") == [(0,)]


def test_robots_txt_is_cached_for_the_next_run(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/robots.txt": robots("User-agent: *\nDisallow: /secret\n"),
            "/": html_handler(anchors("/secret", "/open")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path)
        assert hits_of(site)["/robots.txt"] == 1
        cached = rows(db_path, "SELECT origin, status, body FROM robots")
        assert cached == [(site.url, 200, b"User-agent: *\nDisallow: /secret\n")]

        site.hits.clear()
        # every page due again (max_interval=0); robots.txt within 24 h: the cached copy
        crawl([site.url + "/"], db_path, max_interval=0)
        assert sorted(site.paths()) == ["/", "/open"]

        site.hits.clear()  # a copy older than 24 h is fetched again
        with contextlib.closing(sqlite3.connect(db_path)) as connection, connection:
            connection.execute("UPDATE robots SET fetched_at = '2000-01-01T00:00:00+00:00'")
        crawl([site.url + "/"], db_path, max_interval=0)
        assert sorted(site.paths()) == ["/", "/open", "/robots.txt"]
    runs = rows(db_path, "SELECT id, status, reason FROM runs")
    assert runs == [(1, "finished", "done"), (2, "finished", "done"), (3, "finished", "done")]
    assert skipped(db_path) == {site.url + "/secret": "robots"}


# -- 2. retries ------------------------------------------------------------------------------
def test_503_once_then_200_is_stored_with_two_attempts(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/flaky")),
            "/flaky": sequence(
                html_handler("busy", status=503), html_handler("<title>Back</title><p>ok</p>")
            ),
        }
        crawl([site.url + "/"], db_path)
    assert hits_of(site)["/flaky"] == 2
    row = page(db_path, site.url + "/flaky")
    assert (row["status"], row["attempts"], row["error"], row["title"]) == (200, 2, None, "Back")


def test_500_is_retried_twice_and_404_is_not(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/broken", "/gone")),
            # Retry-After: 0 keeps the test quick (the jittered backoff could take 6 s)
            "/broken": html_handler("oops", status=500, headers={"Retry-After": "0"}),
            "/gone": html_handler("missing", status=404),
        }
        report = crawl([site.url + "/"], db_path)
    hits = hits_of(site)
    assert (hits["/broken"], hits["/gone"]) == (3, 1)
    broken = page(db_path, site.url + "/broken")
    assert (broken["status"], broken["attempts"], broken["text"]) == (500, 3, None)
    gone = page(db_path, site.url + "/gone")
    assert (gone["status"], gone["attempts"]) == (404, 1)
    assert report.by_status == {200: 1, 500: 1, 404: 1}


@pytest.mark.parametrize("retries", [2, 0])
def test_retry_after_on_429_pauses_the_host(db_path: str, retries: int) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/limited", "/after")),
            "/limited": sequence(
                html_handler("slow down", 429, {"Retry-After": "1"}),
                html_handler("<title>Fine</title>"),
            ),
            "/after": html_handler("<title>After</title>"),
        }
        crawl([site.url + "/"], db_path, per_host=1, retries=retries)
    limited = [hit for hit in site.hits if hit.path == "/limited"]
    following = first_start_after(site.hits, limited[0])
    assert following.start - limited[0].end >= 1.0 - TOLERANCE_S
    row = page(db_path, site.url + "/limited")
    if retries:
        assert len(limited) == 2
        assert (row["status"], row["attempts"], row["title"]) == (200, 2, "Fine")
    else:  # retries=0: one request, stored as it came; the pause still holds for the host
        assert len(limited) == 1 and following.path == "/after"
        assert (row["status"], row["attempts"]) == (429, 1)
    assert page(db_path, site.url + "/after")["status"] == 200


def test_retries_zero_means_one_request(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/broken", "/flaky")),
            "/broken": html_handler("oops", status=500),
            "/flaky": sequence(html_handler("busy", status=503), html_handler("<p>ok</p>")),
        }
        crawl([site.url + "/"], db_path, retries=0)
    hits = hits_of(site)
    assert (hits["/broken"], hits["/flaky"]) == (1, 1)
    got = rows(db_path, "SELECT url, status, attempts FROM pages WHERE url != ?", site.url + "/")
    assert sorted(got) == [(site.url + "/broken", 500, 1), (site.url + "/flaky", 503, 1)]


# -- 3. redirects ----------------------------------------------------------------------------
def test_redirect_chain_is_followed_and_final_url_stored(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/start": redirect("/r1", 301),
            "/r1": redirect("/r2", 302),
            "/r2": redirect("/end", 307),
            "/end": html_handler("<title>The end</title>" + anchors("/r1", "/start")),
        }
        crawl([site.url + "/start"], db_path)
    assert site.paths() == ["/robots.txt", "/start", "/r1", "/r2", "/end"]  # each once
    row = page(db_path, site.url + "/start")
    assert (row["final_url"], row["status"], row["title"]) == (site.url + "/end", 200, "The end")
    assert rows(db_path, "SELECT count(*) FROM pages") == [(1,)]


def test_redirect_loops_end_with_an_error(db_path: str) -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        n = int(request.path.removeprefix("/inf/"))
        return web.Response(status=302, headers={"Location": f"/inf/{n + 1}"})

    with SiteServer() as site:
        site.routes = {
            "/robots.txt": html_handler("not found", status=404),
            "/": html_handler(anchors("/loop1", "/self", "/inf/0")),
            "/loop1": redirect("/loop2"),
            "/loop2": redirect("/loop1"),
            "/self": redirect("/self"),
        }
        site.fallback = endless
        crawl([site.url + "/"], db_path, max_redirects=5)
    hits = hits_of(site)
    assert (hits["/loop1"], hits["/loop2"], hits["/self"]) == (1, 1, 1)
    assert sum(n for path, n in hits.items() if path.startswith("/inf/")) == 6  # 1 + 5 hops
    for path in ("/loop1", "/self", "/inf/0"):
        row = page(db_path, site.url + path)
        assert (row["error"], row["text"]) == ("bad-response", None), path


def test_redirect_to_another_host_is_not_followed(db_path: str) -> None:
    with SiteServer() as other, SiteServer() as site:
        other.fallback = html_handler("<p>other</p>")
        site.routes = {"/": html_handler(anchors("/out")), "/out": redirect(other.url + "/x")}
        crawl([site.url + "/"], db_path)
    assert other.hits == []
    assert skipped(db_path) == {other.url + "/x": "scope"}
    row = page(db_path, site.url + "/out")
    assert (row["status"], row["final_url"]) == (302, other.url + "/x")


METADATA_URL = "http://169.254.169.254/latest/meta-data/"


def _guard_refuses_metadata() -> None:
    """Refuse to run a crawl that could reach the metadata address if the pure guard is
    broken: this test must never be the one that connects there."""
    from crawler.net.guard import allow_hosts, check_url_host

    if check_url_host(METADATA_URL, allow_hosts(["127.0.0.1"])) is None:
        pytest.fail("crawler.net.guard.check_url_host allows 169.254.169.254: not crawling")


def _ssrf_redirect_crawl(db_path: str) -> tuple[SiteServer, SiteServer]:
    _guard_refuses_metadata()
    with SiteServer(host="127.0.0.2") as private, SiteServer() as site:
        private.fallback = html_handler("<title>internal</title>")
        site.routes = {
            "/": html_handler(anchors("/to-private", "/to-metadata")),
            "/to-private": redirect(private.url + "/secret"),
            "/to-metadata": redirect(METADATA_URL),
        }
        crawl([site.url + "/"], db_path, scope="any", timeout=3.0, connect_timeout=1.0)
    return site, private


def test_ssrf_guard_refuses_private_redirect_targets(db_path: str) -> None:
    site, private = _ssrf_redirect_crawl(db_path)
    assert private.hits == []  # 127.0.0.2 is loopback and not a seed's host
    assert sorted(site.paths()) == ["/", "/robots.txt", "/to-metadata", "/to-private"]
    refused = skipped(db_path)
    assert set(refused) == {private.url + "/secret", METADATA_URL}
    for url in ("/to-private", "/to-metadata"):
        row = page(db_path, site.url + url)
        assert row["status"] == 302 and row["text"] is None
    assert rows(db_path, "SELECT count(*) FROM pages") == [(3,)]


def test_ssrf_refusals_are_recorded_as_ssrf(db_path: str) -> None:
    _, private = _ssrf_redirect_crawl(db_path)
    assert skipped(db_path) == {private.url + "/secret": "ssrf", METADATA_URL: "ssrf"}


def _ssrf_link_crawl(db_path: str) -> SiteServer:
    with SiteServer(host="127.0.0.2") as private, SiteServer() as site:
        private.fallback = html_handler("<title>internal</title>")
        site.routes = {"/": html_handler(anchors(private.url + "/linked"))}
        crawl([site.url + "/"], db_path, scope="any")
    return private


def test_ssrf_guard_refuses_private_links_too(db_path: str) -> None:
    private = _ssrf_link_crawl(db_path)
    assert private.hits == []  # not even its robots.txt
    assert private.url + "/linked" in skipped(db_path)


def test_ssrf_refused_links_are_recorded_as_ssrf(db_path: str) -> None:
    private = _ssrf_link_crawl(db_path)
    assert skipped(db_path) == {private.url + "/linked": "ssrf"}


def test_allow_private_lets_the_crawl_reach_other_loopback_hosts(db_path: str) -> None:
    with SiteServer(host="127.0.0.2") as private, SiteServer() as site:
        private.fallback = html_handler("<title>internal</title>")
        site.routes = {
            "/": html_handler(anchors("/to-private")),
            "/to-private": redirect(private.url + "/secret"),
        }
        crawl([site.url + "/"], db_path, scope="any", allow_private=True)
    assert sorted(private.paths()) == ["/robots.txt", "/secret"]
    assert page(db_path, private.url + "/secret")["title"] == "internal"
    assert skipped(db_path) == {}


# -- 4. limits -------------------------------------------------------------------------------
def test_gzip_bomb_is_too_large_and_memory_stays_flat(db_path: str) -> None:
    bomb = gzip_bomb()
    assert len(bomb) < 1 << 20

    async def serve_bomb(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=bomb, headers={"Content-Type": "text/html", "Content-Encoding": "gzip"}
        )

    with SiteServer() as site:
        site.routes = {"/": html_handler(anchors("/bomb")), "/bomb": serve_bomb}
        before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        crawl([site.url + "/"], db_path)
        after_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert hits_of(site)["/bomb"] == 1  # too large is final: no retry
    row = page(db_path, site.url + "/bomb")
    assert (row["error"], row["text"], row["title"]) == ("too-large", None, None)
    assert (after_kib - before_kib) / 1024 < 60  # 100 MiB decoded would show here


def test_content_length_over_the_cap_is_refused(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/huge", "/small")),
            "/huge": html_handler("<title>huge</title>" + "x" * 50_000),
            "/small": html_handler("<title>small</title>"),
        }
        crawl([site.url + "/"], db_path, max_body_bytes=10_000)
    assert hits_of(site)["/huge"] == 1
    huge = page(db_path, site.url + "/huge")
    assert (huge["error"], huge["title"], huge["text"]) == ("too-large", None, None)
    assert page(db_path, site.url + "/small")["title"] == "small"


def test_stacked_gzip_is_decoded(db_path: str) -> None:
    html = b"<html><head><title>Twice packed</title></head><body><p>inner</p></body></html>"

    async def serve(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=gzip.compress(gzip.compress(html)),
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip, gzip"},
        )

    with SiteServer() as site:
        site.routes = {"/": serve}
        crawl([site.url + "/"], db_path)
    row = page(db_path, site.url + "/")
    assert (row["status"], row["error"], row["title"]) == (200, None, "Twice packed")
    assert row["text"] == "inner" and row["body_bytes"] == len(html)


def test_deadline_ends_dripping_and_silent_servers(db_path: str) -> None:
    async def drip(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.content_length = 1000
        await response.prepare(request)
        for _ in range(1000):  # a byte every 0.2 s: 200 s in all
            await response.write(b"x")
            await asyncio.sleep(0.2)
        return response

    async def silent(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="too late", content_type="text/html")

    with SiteServer() as site:
        site.routes = {"/drip": drip, "/silent": silent}
        crawl([site.url + "/drip", site.url + "/silent"], db_path, timeout=1.5, retries=0)
        wait_until_hits_end(site)
    for path in ("/drip", "/silent"):
        row = page(db_path, site.url + path)
        assert (row["error"], row["status"], row["text"]) == ("timeout", None, None), path
        (hit,) = [hit for hit in site.hits if hit.path == path]
        assert 0.0 < hit.end - hit.start < 1.5 + 1.0, path  # the client hung up at the deadline


def test_connection_reset_mid_body_is_an_error_not_a_page(db_path: str) -> None:
    async def reset(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.content_length = 10_000
        await response.prepare(request)
        await response.write(b"<html><head><title>partial</title></head><body>" + b"y" * 3000)
        assert request.transport is not None
        request.transport.close()
        return response

    with SiteServer() as site:
        site.routes = {"/": html_handler(anchors("/reset")), "/reset": reset}
        crawl([site.url + "/"], db_path, retries=0)
    row = page(db_path, site.url + "/reset")
    assert row["error"] in ("bad-response", "connect")
    assert row["status"] != 200 and row["text"] is None and row["title"] is None


# -- 5. content ------------------------------------------------------------------------------
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06" + bytes(64)


def test_a_body_served_as_html_is_parsed_whatever_its_bytes(db_path: str) -> None:
    """As a browser renders it: a binary body declared ``text/html`` is HTML (its NULs are
    U+FFFD to the parser); it fails nothing and links nowhere."""
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/image")),
            "/image": text_handler(PNG, "text/html"),
        }
        report = crawl([site.url + "/"], db_path)
    row = page(db_path, site.url + "/image")
    assert (row["status"], row["error"], row["outlinks"]) == (200, None, "[]")
    assert row["text"] is not None and "PNG" in row["text"] and "\x00" not in row["text"]
    assert report.status == "finished"


def test_html_without_content_type_is_sniffed(db_path: str) -> None:
    body = b"<!DOCTYPE html><html><head><title>Sniffed</title></head><body><p>hi</p></body></html>"
    with RawServer({}) as site:
        site.responses["/"] = _raw_response(200, body, None)
        crawl([site.url + "/"], db_path)
    assert site.paths == ["/robots.txt", "/"]
    row = page(db_path, site.url + "/")
    assert (row["status"], row["title"], row["text"]) == (200, "Sniffed", "hi")


def test_noindex_keeps_the_row_without_text_and_follows_links(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/meta", "/header")),
            "/meta": html_handler(
                '<meta name="robots" content="noindex"><title>M</title>'
                "<p>secret words</p>" + anchors("/from-meta")
            ),
            "/header": html_handler(
                "<title>H</title><p>hidden words</p>" + anchors("/from-header"),
                headers={"X-Robots-Tag": "noindex"},
            ),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path)
    hits = hits_of(site)
    assert hits["/from-meta"] == hits["/from-header"] == 1
    for path, title in (("/meta", "M"), ("/header", "H")):
        row = page(db_path, site.url + path)
        assert (row["status"], row["title"], row["text"]) == (200, title, None), path
    assert page(db_path, site.url + "/meta")["meta_robots"] == "noindex"


def test_nofollow_links_are_recorded_but_not_fetched(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/meta", "/header", "/rel")),
            "/meta": html_handler(
                '<meta name="robots" content="nofollow"><p>visible</p>' + anchors("/m1", "/m2")
            ),
            "/header": html_handler(anchors("/h1"), headers={"X-Robots-Tag": "nofollow"}),
            "/rel": html_handler(
                '<a rel="nofollow" href="/r-no">no</a>'
                '<a rel="external NoFollow" href="/r-no2">no</a>'
                '<a href="/r-yes">yes</a>'
            ),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path)
    assert sorted(site.paths()) == ["/", "/header", "/meta", "/r-yes", "/rel", "/robots.txt"]
    assert links_of(db_path, site.url + "/meta") == [site.url + "/m1", site.url + "/m2"]
    assert links_of(db_path, site.url + "/header") == [site.url + "/h1"]
    rel = [site.url + p for p in ("/r-no", "/r-no2", "/r-yes")]
    assert links_of(db_path, site.url + "/rel") == rel
    assert page(db_path, site.url + "/meta")["text"].startswith("visible")  # not noindex


def test_identical_bodies_are_duplicates(db_path: str) -> None:
    same = "<title>Same</title><p>the very same body</p>" + anchors("/child")
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/first", "/second")),
            "/first": html_handler(same),
            "/second": html_handler(same),
        }
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path, per_host=1)
    assert site.paths().index("/first") < site.paths().index("/second")
    first = page(db_path, site.url + "/first")
    second = page(db_path, site.url + "/second")
    assert (first["duplicate_of"], first["text"]) == (None, "the very same body link 0")
    assert (second["duplicate_of"], second["text"]) == (site.url + "/first", None)
    assert second["content_hash"] == first["content_hash"]
    assert hits_of(site)["/child"] == 1


def test_canonical_to_a_queued_url_marks_a_duplicate(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors("/item?ref=nav", "/item")),
            "/item?ref=nav": html_handler(
                '<link rel="canonical" href="/item"><title>Item</title><p>variant</p>'
            ),
            "/item": html_handler("<title>Item</title><p>the item</p>"),
        }
        crawl([site.url + "/"], db_path, per_host=1)
    assert hits_of(site)["/item"] == 1
    variant = page(db_path, site.url + "/item?ref=nav")
    assert variant["canonical"] == site.url + "/item"
    assert (variant["duplicate_of"], variant["text"]) == (site.url + "/item", None)
    item = page(db_path, site.url + "/item")
    assert (item["duplicate_of"], item["text"]) == (None, "the item")


# -- 6. traps and hygiene --------------------------------------------------------------------
def test_trap_urls_are_never_requested(db_path: str) -> None:
    long_path = "/" + "x" * 300
    with SiteServer() as site:
        site.routes = {"/": html_handler(anchors("/a/b/a/b/a/b/a/", long_path, "/ok"))}
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path, max_url_length=200)
    assert sorted(site.paths()) == ["/", "/ok", "/robots.txt"]
    assert skipped(db_path) == {
        site.url + "/a/b/a/b/a/b/a/": "repeated-segment",
        site.url + long_path: "url-too-long",
    }


def test_session_ids_are_stripped(db_path: str) -> None:
    hrefs = (
        "/page?jsessionid=ABC123",
        "/page;jsessionid=XYZ789",
        "/page?PHPSESSID=f00ba4",
        "/page",
        "/item?id=7&PHPSESSID=zzz",
        "/item?id=7",
    )
    with SiteServer() as site:
        site.routes = {"/": html_handler(anchors(*hrefs))}
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path)
    assert sorted(site.paths()) == ["/", "/item?id=7", "/page", "/robots.txt"]
    stored = {url for (url,) in rows(db_path, "SELECT url FROM pages")}
    assert stored == {site.url + p for p in ("/", "/page", "/item?id=7")}


def test_max_pages_per_host(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {"/": html_handler(anchors(*(f"/p{i}" for i in range(10))))}
        site.fallback = html_handler("<p>leaf</p>")
        report = crawl([site.url + "/"], db_path, max_pages_per_host=5)
    assert len([p for p in site.paths() if p != "/robots.txt"]) == 5
    assert rows(db_path, "SELECT count(*) FROM pages") == [(5,)]
    refused = skipped(db_path)
    assert len(refused) == 6 and set(refused.values()) == {"host-limit"}
    assert report.skipped == {"host-limit": 6}


def test_max_outlinks_keeps_the_first_links(db_path: str) -> None:
    with SiteServer() as site:
        site.routes = {"/": html_handler(anchors(*(f"/l{i}" for i in range(50))))}
        site.fallback = html_handler("<p>leaf</p>")
        crawl([site.url + "/"], db_path, max_outlinks=10)
    first_ten = [site.url + f"/l{i}" for i in range(10)]
    assert links_of(db_path, site.url + "/") == first_ten
    assert json.loads(page(db_path, site.url + "/")["outlinks"]) == first_ten
    assert sorted(site.paths()) == sorted(["/", "/robots.txt", *(f"/l{i}" for i in range(10))])


def test_pages_at_paths_with_empty_segments_are_crawled(db_path: str) -> None:
    """``http://h//a/p.html`` is a URL like any other (WHATWG path ``["", "a", "p.html"]``):
    its page is parsed and its links resolved as a browser does (``../q.html`` -> ``//q.html``,
    one segment up). Such a page once hung its parse worker in an endless loop."""
    with SiteServer() as site:
        site.routes = {
            "/": html_handler(anchors(site.url + "//a/p.html", "/b//c.html")),
            "//a/p.html": html_handler(anchors("../q.html", "../../r.html", "./s.html")),
        }
        site.fallback = html_handler("<p>leaf</p>")
        report = crawl([site.url + "/"], db_path)
    assert links_of(db_path, site.url + "//a/p.html") == [
        site.url + "//q.html", site.url + "/r.html", site.url + "//a/s.html",
    ]  # fmt: skip
    assert report.pages_ok == 6  # /, //a/p.html, /b//c.html and its three links


# -- 7. sitemaps -----------------------------------------------------------------------------
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(*urls: str) -> str:
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return f'<?xml version="1.0"?><urlset xmlns="{SITEMAP_NS}">{entries}</urlset>'


@pytest.fixture
def leaf_site() -> Iterator[SiteServer]:
    with SiteServer() as site:
        site.routes = {"/": html_handler("<title>home</title><p>no links</p>")}
        site.fallback = html_handler("<p>leaf</p>")
        yield site


def test_sitemap_from_robots_txt(db_path: str, leaf_site: SiteServer) -> None:
    site = leaf_site
    site.routes["/robots.txt"] = robots(f"User-agent: *\nDisallow:\nSitemap: {site.url}/sm.xml\n")
    site.routes["/sm.xml"] = text_handler(
        urlset(site.url + "/hidden1", site.url + "/hidden2"), "application/xml"
    )
    crawl([site.url + "/"], db_path, sitemaps=True)
    assert sorted(site.paths()) == ["/", "/hidden1", "/hidden2", "/robots.txt", "/sm.xml"]
    stored = {url for (url,) in rows(db_path, "SELECT url FROM pages")}
    assert stored == {site.url + p for p in ("/", "/hidden1", "/hidden2")}


def test_relative_sitemap_line_in_robots_txt(db_path: str, leaf_site: SiteServer) -> None:
    site = leaf_site
    site.routes["/robots.txt"] = robots("User-agent: *\nDisallow:\nSitemap: /sm.xml\n")
    site.routes["/sm.xml"] = text_handler(urlset(site.url + "/hidden"), "application/xml")
    crawl([site.url + "/"], db_path, sitemaps=True)
    assert sorted(site.paths()) == ["/", "/hidden", "/robots.txt", "/sm.xml"]


def test_sitemap_index_with_a_gzipped_sitemap(db_path: str, leaf_site: SiteServer) -> None:
    site = leaf_site
    index = (
        f'<?xml version="1.0"?><sitemapindex xmlns="{SITEMAP_NS}">'
        f"<sitemap><loc>{site.url}/sm1.xml.gz</loc></sitemap></sitemapindex>"
    )
    site.routes["/robots.txt"] = robots(f"Sitemap: {site.url}/index.xml\n")
    site.routes["/index.xml"] = text_handler(index, "application/xml")
    packed = gzip.compress(urlset(site.url + "/deep").encode())
    site.routes["/sm1.xml.gz"] = text_handler(packed, "application/gzip")
    crawl([site.url + "/"], db_path, sitemaps=True)
    assert sorted(site.paths()) == ["/", "/deep", "/index.xml", "/robots.txt", "/sm1.xml.gz"]
    assert page(db_path, site.url + "/deep")["status"] == 200


@pytest.mark.parametrize("kind", ["xml", "text"])
def test_a_sitemap_over_the_body_cap_is_read_to_it(
    db_path: str, leaf_site: SiteServer, kind: str
) -> None:
    """A sitemap longer than ``--max-body-bytes`` is read to the cap, not dropped: the URLs
    listed before the cut are crawled, those after it are not, and the line the cut falls
    in (``/listed/01``...) is no URL."""
    site = leaf_site
    listed = [f"{site.url}/listed/{i:05d}" for i in range(2000)]  # ~100 KB
    body = urlset(*listed) if kind == "xml" else "\n".join(listed)
    site.routes["/robots.txt"] = robots(f"Sitemap: {site.url}/sm.{kind}\n")
    site.routes[f"/sm.{kind}"] = text_handler(body, f"application/{kind}")
    crawl([site.url + "/"], db_path, sitemaps=True, max_body_bytes=20_005)
    fetched = [p for p in site.paths() if p not in ("/", "/robots.txt", f"/sm.{kind}")]
    assert 200 < len(fetched) < 600
    assert sorted(fetched) == [u.removeprefix(site.url) for u in listed[: len(fetched)]]


def test_a_sitemap_on_another_host_named_in_robots_txt_is_read(
    db_path: str, leaf_site: SiteServer
) -> None:
    """sitemaps.org cross-submission: a robots.txt may name a sitemap on another host,
    which may list this site's pages. It is read (that host's robots.txt first); its pages
    in scope are crawled, the rest are not, and that host's own sitemaps are not asked for."""
    site = leaf_site
    with SiteServer() as other:
        other.routes = {
            "/robots.txt": robots("User-agent: *\nDisallow: /private\n"),
            "/for-a.xml": text_handler(urlset(site.url + "/listed", other.url + "/x"), "text/xml"),
        }
        other.fallback = html_handler("<p>other</p>")
        site.routes["/robots.txt"] = robots(f"Sitemap: {other.url}/for-a.xml\n")
        crawl([site.url + "/"], db_path, sitemaps=True, allow_private=True)
        assert sorted(other.paths()) == ["/for-a.xml", "/robots.txt"]
    assert sorted(site.paths()) == ["/", "/listed", "/robots.txt"]


def test_one_robots_txt_sends_the_crawl_to_few_other_hosts_for_sitemaps(
    db_path: str, leaf_site: SiteServer
) -> None:
    """A robots.txt naming sitemaps on eight other hosts has those on the first five read
    (``MAX_SITEMAP_HOSTS``): a site cannot turn the crawl on a list of others."""
    site = leaf_site
    with contextlib.ExitStack() as stack:
        others = [stack.enter_context(SiteServer()) for _ in range(8)]
        for other in others:
            other.routes = {"/robots.txt": robots("User-agent: *\nDisallow:\n"),
                            "/sm.xml": text_handler(urlset(site.url + "/x"), "text/xml")}  # fmt: skip
        site.routes["/robots.txt"] = robots("".join(f"Sitemap: {o.url}/sm.xml\n" for o in others))
        crawl([site.url + "/"], db_path, sitemaps=True, allow_private=True)
        asked = [o for o in others if o.paths()]
    assert asked == others[:5]


def test_include_patterns_judge_a_sitemap_s_pages_not_the_sitemap(
    db_path: str, leaf_site: SiteServer
) -> None:
    """``--include /blog/``: /sitemap.xml is still read, and the pages it lists under
    /blog/ crawled (the patterns choose pages; a sitemap is how they are found)."""
    site = leaf_site
    site.routes["/robots.txt"] = robots("User-agent: *\nDisallow:\n")
    site.routes["/sitemap.xml"] = text_handler(
        urlset(site.url + "/blog/post", site.url + "/shop/item"), "application/xml"
    )
    crawl([site.url + "/blog/"], db_path, sitemaps=True, include=["/blog/"])
    assert sorted(site.paths()) == ["/blog/", "/blog/post", "/robots.txt", "/sitemap.xml"]
    assert skipped(db_path) == {site.url + "/shop/item": "include"}


def test_default_sitemap_location_is_tried(db_path: str, leaf_site: SiteServer) -> None:
    site = leaf_site
    site.routes["/robots.txt"] = robots("User-agent: *\nDisallow: /private\n")
    site.routes["/sitemap.xml"] = text_handler(urlset(site.url + "/found"), "text/xml")
    crawl([site.url + "/"], db_path, sitemaps=True)
    assert sorted(site.paths()) == ["/", "/found", "/robots.txt", "/sitemap.xml"]


def test_no_sitemaps_when_disabled(db_path: str, leaf_site: SiteServer) -> None:
    site = leaf_site
    site.routes["/robots.txt"] = robots(f"Sitemap: {site.url}/sm.xml\n")
    site.routes["/sm.xml"] = text_handler(urlset(site.url + "/hidden"), "application/xml")
    site.routes["/sitemap.xml"] = text_handler(urlset(site.url + "/hidden"), "application/xml")
    crawl([site.url + "/"], db_path, sitemaps=False)
    assert sorted(site.paths()) == ["/", "/robots.txt"]
