"""crawler.net.fetch: the Fetcher against real local servers (redirects, caps, types, errors)."""

from __future__ import annotations

import asyncio
import gzip

import pytest
from aiohttp import web

from crawler.errors import BadResponse, ConnectFailed, FetchError, FetchTimeout, TooLarge
from crawler.net.fetch import Fetcher, sniff_html
from crawler.net.guard import allow_all
from crawler.net.session import open_session
from crawler.settings import Settings
from tests.sites import SiteServer, html_handler


def fetch(url: str, check=None, **settings: object):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        config = Settings(**settings)  # type: ignore[arg-type]
        async with open_session(config, allow_all) as session:
            return await Fetcher(session, config).fetch(url, check)

    return asyncio.run(go())


def redirect(to: str, status: int = 301):  # type: ignore[no-untyped-def]
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": to})

    return handle


async def gzipped(request: web.Request) -> web.StreamResponse:
    body = gzip.compress(b"<title>z</title>" + b"a" * 100_000)
    return web.Response(body=body, headers={"Content-Encoding": "gzip",
                                            "Content-Type": "text/html"})  # fmt: skip


async def slow_drip(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/html"})
    await response.prepare(request)
    for _ in range(100):
        await response.write(b"x")
        await asyncio.sleep(0.1)
    return response


@pytest.fixture
def site() -> SiteServer:
    with SiteServer() as server:
        server.routes = {
            "/page": html_handler("<title>t</title>", headers={"X-Robots-Tag": "noindex"}),
            "/r1": redirect("/r2"),
            "/r2": redirect("/page", 302),
            "/loop": redirect("/loop2"),
            "/loop2": redirect("/loop"),
            "/bad-location": redirect("http://[::1"),
            "/mailto": redirect("mailto:x@y"),
            "/js": redirect("javascript:alert(1)", 302),
            "/gz": gzipped,
            "/pdf": _typed(b"%PDF" + b"x" * 1000, "application/pdf"),
            "/untyped": _typed(b"<!DOCTYPE html><title>u</title>", None),
            "/drip": slow_drip,
        }
        yield server


def _typed(body: bytes, content_type: str | None):  # type: ignore[no-untyped-def]
    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.Response(body=body)
        if content_type:
            response.content_type = content_type
        else:
            response.headers["Content-Type"] = ""
            del response.headers["Content-Type"]
        return response

    return handle


def test_html_body_and_headers(site: SiteServer) -> None:
    result = fetch(site.url + "/page")
    assert (result.status, result.content_type, result.body) == (
        200,
        "text/html",
        b"<title>t</title>",
    )
    assert result.x_robots_tag == "noindex" and result.is_html


def test_redirects_are_followed_hop_by_hop(site: SiteServer) -> None:
    seen: list[str] = []
    result = fetch(site.url + "/r1", lambda target: seen.append(target))
    assert seen == [site.url + "/r2", site.url + "/page"]
    assert (result.url, result.final_url, result.status) == (
        site.url + "/r1",
        site.url + "/page",
        200,
    )
    stopped = fetch(site.url + "/r1", lambda target: "scope")
    assert (stopped.status, stopped.redirect_to, stopped.stopped, stopped.body) == (
        301, site.url + "/r2", "scope", None)  # fmt: skip


def test_redirect_errors(site: SiteServer) -> None:
    with pytest.raises(BadResponse, match="redirect loop"):
        fetch(site.url + "/loop")
    with pytest.raises(BadResponse, match="more than 1 redirects"):
        fetch(site.url + "/r1", max_redirects=1)
    with pytest.raises(BadResponse, match="unusable redirect target"):
        fetch(site.url + "/bad-location")


def test_redirects_to_other_schemes_stop_there(site: SiteServer) -> None:
    """A redirect to a URL the crawl does not fetch (another scheme) is a response that was
    not followed, not a failure of the server's."""
    for path, status in (("/mailto", 301), ("/js", 302)):
        result = fetch(site.url + path)
        assert (result.status, result.stopped, result.redirect_to, result.final_url) == (
            status, "scheme", None, site.url + path)  # fmt: skip


def test_body_caps(site: SiteServer) -> None:
    assert len(fetch(site.url + "/gz").body) == 100_016  # decompressed
    with pytest.raises(TooLarge, match="decompressed"):
        fetch(site.url + "/gz", max_body_bytes=50_000)
    with pytest.raises(TooLarge, match="Content-Length"):
        fetch(site.url + "/page", max_body_bytes=5)


def test_types(site: SiteServer) -> None:
    pdf = fetch(site.url + "/pdf")
    assert (pdf.content_type, pdf.body, pdf.is_html) == ("application/pdf", None, False)
    untyped = fetch(site.url + "/untyped")
    assert untyped.content_type in ("", "application/octet-stream")
    assert sniff_html(b"  <!doctype HTML><p>") and not sniff_html(b"%PDF-1.4")


def test_deadline_beats_a_dripping_server(site: SiteServer) -> None:
    with pytest.raises(FetchTimeout) as caught:
        fetch(site.url + "/drip", timeout=1.0)
    assert caught.value.reason == "timeout" and isinstance(caught.value, FetchError)


def test_deadlines_of_many_requests_share_one_timer() -> None:
    """A silent server's requests time out at the deadline among requests that end in
    time; a redirect chain shares one deadline over all its hops (two hops of 0.6 s do not
    fit in 1 s); a cancellation from elsewhere stays a cancellation; and ended requests
    leave nothing behind."""

    async def silent(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="late", content_type="text/html")

    async def slow_hop(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.6)
        target = "/slow-2" if request.path == "/slow-1" else "/page"
        return web.Response(status=302, headers={"Location": target})

    async def go(base: str) -> None:
        config = Settings(timeout=1.0)
        async with open_session(config, allow_all) as session:
            fetcher = Fetcher(session, config)
            loop = asyncio.get_running_loop()

            async def timed(path: str) -> tuple[str, float]:
                start = loop.time()
                try:
                    result = await fetcher.fetch(base + path)
                except FetchTimeout:
                    return "timeout", loop.time() - start
                return str(result.status), loop.time() - start

            paths = ["/page", "/silent"] * 10 + ["/slow-1"]
            outcomes = await asyncio.gather(*(timed(path) for path in paths))
            for path, (outcome, took) in zip(paths, outcomes, strict=True):
                if path in ("/silent", "/slow-1"):  # /slow-1: 1.2 s of hops, one deadline
                    assert outcome == "timeout" and 1.0 <= took < 1.6, (path, took)
                else:
                    assert outcome == "200", (path, outcome)
            assert len(fetcher.deadlines) <= 1  # ended requests are forgotten

            waiting = asyncio.create_task(fetcher.fetch(base + "/silent"))
            await asyncio.sleep(0.2)
            waiting.cancel()  # a stop, not a timeout
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await asyncio.sleep(1.0)  # past its deadline: nothing fires at a finished task
            assert len(fetcher.deadlines) <= 1
            pending = asyncio.create_task(fetcher.fetch(base + "/silent"))
            await asyncio.sleep(0.1)
            fetcher.close()  # the crawl is over: no timer left on the loop
            assert len(fetcher.deadlines) == 0 and fetcher.deadlines._timer is None
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending

    with SiteServer() as server:
        server.routes = {"/page": html_handler("<title>t</title>"), "/silent": silent,
                         "/slow-1": slow_hop, "/slow-2": slow_hop}  # fmt: skip
        asyncio.run(go(server.url))


def test_connection_refused() -> None:
    with pytest.raises(ConnectFailed) as caught:
        fetch("http://127.0.0.1:9/")
    assert caught.value.reason == "connect" and caught.value.__cause__ is not None


def test_a_chain_may_come_back_to_a_url_once_a_cookie_is_set() -> None:
    """The login dance: ``/a`` without a session redirects to ``/login``, which sets one and
    redirects back to ``/a``. With cookies kept that is no loop (the answer changed); without,
    ``/a`` would redirect again, and it is one."""

    async def page(request: web.Request) -> web.StreamResponse:
        if request.cookies.get("s") == "1":
            return web.Response(text="<title>in</title>", content_type="text/html")
        return web.Response(status=302, headers={"Location": "/login"})

    async def login(request: web.Request) -> web.StreamResponse:
        response = web.Response(status=302, headers={"Location": "/a"})
        response.set_cookie("s", "1")
        return response

    with SiteServer({"/a": page, "/login": login}) as site:
        result = fetch(site.url + "/a", keep_cookies=True)
        assert (result.status, result.final_url) == (200, site.url + "/a")
        with pytest.raises(BadResponse, match="redirect loop"):
            fetch(site.url + "/a")


def test_a_location_byte_that_is_not_utf8_is_percent_encoded() -> None:
    """``Location: /caf\\xe9`` (latin-1, as old servers write it): followed to ``/caf%E9``,
    the byte kept as it came, where a URL parser would refuse the lone byte."""
    from tests.crawler.net.test_http import Server

    async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
        if head.startswith(b"GET /old "):
            writer.write(b"HTTP/1.1 302 Found\r\nLocation: /caf\xe9\r\nContent-Length: 0\r\n\r\n")
        else:
            target = head.split(b" ")[1]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d"
                         b"\r\n\r\n%s" % (len(target), target))  # fmt: skip
        return True

    async def go() -> object:
        async with Server(respond) as server:
            config = Settings()
            async with open_session(config, allow_all) as session:
                return await Fetcher(session, config).fetch(server.url("/old")), server.url("/")

    result, root = asyncio.run(go())  # type: ignore[misc]
    assert result.final_url == root + "caf%E9" and result.body == b"/caf%E9"
