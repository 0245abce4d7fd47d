"""Differential tests, part two: through a real forward proxy (tinyproxy: http in absolute
form, https through CONNECT with a private CA) and with cookies set and sent, the crawler's
HTTP stack and aiohttp's client must see the same thing. The framing, keep-alive, redirect,
coding and error scenarios are in ``test_differential``.

Differences on purpose, asserted where they show: an http proxy's 407 to a plain http
request is a ``proxy`` error to us (the page was never fetched: storing it as a 407 page
would be wrong), where aiohttp hands the 407 back as the response; an ``Expires`` of the
epoch deletes a cookie (aiohttp's jar keeps it as a session cookie).
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import aiohttp
from aiohttp import web

from crawler.errors import FetchError
from crawler.net.fetch import Fetcher
from crawler.net.guard import allow_all
from crawler.net.session import open_session
from crawler.settings import Settings
from tests.proxies import private_ca, tinyproxy
from tests.sites import SiteServer, html_handler

Seen = tuple[int, bytes] | str
"""(status, body), or a failure's kind."""


async def ours(urls: list[str], **settings: object) -> list[Seen]:
    config = Settings(retries=0, **settings)  # type: ignore[arg-type]
    seen: list[Seen] = []
    async with open_session(config, allow_all) as session:
        fetcher = Fetcher(session, config)
        for url in urls:
            try:
                result = await fetcher.fetch(url, any_type=True)
            except FetchError as exc:
                seen.append(exc.reason)
            else:
                seen.append((result.status, result.body or b""))
        fetcher.close()
    return seen


async def reference(urls: list[str], *, proxy: str | None = None, ca: Path | None = None,
                    jar: bool = False) -> list[Seen]:  # fmt: skip
    context = ssl.create_default_context(cafile=str(ca)) if ca else True
    cookie_jar = aiohttp.CookieJar(unsafe=True) if jar else aiohttp.DummyCookieJar()
    seen: list[Seen] = []
    async with aiohttp.ClientSession(cookie_jar=cookie_jar) as session:
        for url in urls:
            try:
                async with session.get(url, proxy=proxy, ssl=context) as response:
                    seen.append((response.status, await response.read()))
            except aiohttp.ClientHttpProxyError:
                seen.append("proxy")
            except aiohttp.ClientProxyConnectionError:
                seen.append("proxy")
            except aiohttp.ClientConnectorError:
                seen.append("connect")
    return seen


def test_through_a_forward_proxy_http_and_https(tmp_path: Path) -> None:
    tls = private_ca(tmp_path)
    page = html_handler("<p>same</p>")
    with (
        SiteServer({"/": page, "/x": page}) as plain,
        SiteServer({"/": page}, tls=tls.server) as secure,
        tinyproxy(tmp_path) as proxy,
    ):
        urls = [plain.url + "/", secure.url + "/", plain.url + "/x", plain.url + "/missing"]
        mine = asyncio.run(ours(urls, proxy=proxy.url, ca_bundle=str(tls.ca_pem)))
        theirs = asyncio.run(reference(urls, proxy=proxy.url, ca=tls.ca_pem))
        assert mine == theirs
        assert [s[0] for s in mine if isinstance(s, tuple)] == [200, 200, 200, 404]
        assert all("tinyproxy" in (hit.header("Via") or "") for hit in plain.hits)
        assert proxy.log_text().count(f"CONNECT 127.0.0.1:{secure.port}") == 2  # one each


def test_a_proxy_that_wants_a_login(tmp_path: Path) -> None:
    tls = private_ca(tmp_path)
    with (
        SiteServer({"/": html_handler("<p>x</p>")}) as plain,
        SiteServer({"/": html_handler("<p>x</p>")}, tls=tls.server) as secure,
        tinyproxy(tmp_path, login=("u", "pw")) as proxy,
    ):
        anonymous = proxy.url.replace("u:pw@", "")
        urls = [secure.url + "/", plain.url + "/"]
        mine = asyncio.run(ours(urls, proxy=anonymous, ca_bundle=str(tls.ca_pem)))
        theirs = asyncio.run(reference(urls, proxy=anonymous, ca=tls.ca_pem))
        assert mine[0] == theirs[0] == "proxy"  # CONNECT refused: both a proxy error
        # the difference: a plain request refused with 407 is no page to us
        assert mine[1] == "proxy" and isinstance(theirs[1], tuple) and theirs[1][0] == 407
        logged_in = asyncio.run(ours(urls, proxy=proxy.url, ca_bundle=str(tls.ca_pem)))
        assert logged_in == asyncio.run(reference(urls, proxy=proxy.url, ca=tls.ca_pem))
        assert [s[0] for s in logged_in if isinstance(s, tuple)] == [200, 200]
        assert not plain.hits or len(plain.hits) == 2  # refused requests never reached it


def test_a_refusing_proxy_address(tmp_path: Path) -> None:
    from tests.proxies import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    urls = ["http://127.0.0.1:9/", "https://127.0.0.1:9/"]
    assert asyncio.run(ours(urls, proxy=dead)) == ["proxy", "proxy"]
    assert asyncio.run(reference(urls, proxy=dead)) == ["proxy", "proxy"]


def cookie_app() -> dict[str, web.RequestHandler]:  # type: ignore[name-defined]
    async def set_cookies(request: web.Request) -> web.Response:
        response = web.Response(text="set", content_type="text/html")
        response.set_cookie("plain", "1")
        response.set_cookie("scoped", "2", path="/a")
        response.set_cookie("sec", "3", secure=True)
        response.set_cookie("gone", "4", max_age=0)
        response.set_cookie("old", "5", expires="Thu, 01 Jan 1970 00:00:00 GMT")
        response.set_cookie("other", "6", domain="example.com")
        response.headers.add("Set-Cookie", 'quoted="a b"; Path=/')
        return response

    async def echo(request: web.Request) -> web.Response:
        return web.Response(text=request.headers.get("Cookie", "-"), content_type="text/html")

    async def replace(request: web.Request) -> web.Response:
        response = web.Response(text="replaced", content_type="text/html")
        response.set_cookie("plain", "7")
        response.del_cookie("scoped", path="/a")
        return response

    return {"/set": set_cookies, "/echo": echo, "/a/echo": echo, "/b/echo": echo,
            "/replace": replace}  # fmt: skip


def jar_set(seen: Seen) -> set[str]:
    """The cookies a ``/echo`` answer says were sent."""
    assert isinstance(seen, tuple)
    return set(seen[1].decode().split("; "))


def test_cookies_set_and_sent_alike() -> None:
    with SiteServer(cookie_app()) as site:
        urls = [site.url + path for path in
                ("/echo", "/set", "/echo", "/a/echo", "/b/echo", "/replace", "/a/echo")]  # fmt: skip
        mine = asyncio.run(ours(urls, keep_cookies=True))
        theirs = asyncio.run(reference(urls, jar=True))
        # One difference, RFC 6265's rule over aiohttp's: "old", whose Expires is the epoch,
        # the usual way to delete a cookie (aiohttp's jar reads that date as none).
        assert mine == [(200, b.replace(b"old=5; ", b"")) for _, b in theirs]  # type: ignore[misc]
        assert b"old=5" in theirs[3][1]  # type: ignore[index]
        sent = [body.decode() for _, body in mine]  # type: ignore[misc]
        assert sent[0] == "-" and "plain=1" in sent[2] and "scoped" not in sent[2]
        assert "scoped=2" in sent[3] and "sec=" not in sent[3] and "gone" not in sent[3]
        assert "old" not in sent[3] and "other" not in sent[3] and 'quoted="a b"' in sent[3]
        assert "plain=7" in sent[6] and "scoped" not in sent[6]
        # without a jar neither sends anything
        assert asyncio.run(ours(urls[1:3])) == asyncio.run(reference(urls[1:3]))
        assert asyncio.run(ours(urls[1:3]))[1] == (200, b"-")
