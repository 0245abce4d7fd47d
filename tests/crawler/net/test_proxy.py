"""Proxies: which one a request takes (``--proxy``, the environment, ``NO_PROXY``, as curl and
Python read them), and requests through real ones on loopback: a forward proxy written in
the test (exact bytes: absolute form, credentials, keep-alive), tinyproxy (http, CONNECT,
Basic auth, refusals) and microsocks (SOCKS5, login, where names are resolved)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crawler.errors import Blocked, ConfigError, ProxyFailed
from crawler.net.fetch import Fetcher
from crawler.net.guard import allow_all, allow_origins
from crawler.net.proxy import NoProxy, ProxyRules, parse_proxy
from crawler.net.session import open_session
from crawler.settings import Settings
from tests.crawler.net.test_http import Server
from tests.proxies import free_port, microsocks, private_ca, tinyproxy
from tests.sites import SiteServer, html_handler


# -- which proxy -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("entries", "host", "port", "exempt"),
    [
        ("example.com", "example.com", 80, True),
        ("example.com", "www.example.com", 80, True),  # the hosts below it
        ("example.com", "badexample.com", 80, False),  # not a suffix of another label
        (".example.com", "example.com", 443, True),  # a leading dot changes nothing (curl)
        ("*.example.com", "a.b.example.com", 443, True),
        ("EXAMPLE.com.", "Example.COM".lower(), 80, True),
        ("*", "anything.test", 80, True),
        ("example.com:8080", "example.com", 8080, True),
        ("example.com:8080", "example.com", 80, False),
        ("10.0.0.0/8", "10.1.2.3", 80, True),
        ("10.0.0.0/8", "11.1.2.3", 80, False),
        ("10.0.0.0/8", "ten.example", 80, False),  # a name is not resolved to decide
        ("192.168.1.5", "192.168.1.5", 80, True),
        ("::1", "[::1]", 80, True),
        ("[::1]:8080", "[::1]", 8080, True),
        ("fd00::/8", "[fd12::1]", 443, True),
        ("a.test, b.test  c.test", "c.test", 80, True),  # commas and spaces
        ("", "example.com", 80, False),
    ],
)
def test_no_proxy_entries(entries: str, host: str, port: int, exempt: bool) -> None:
    assert NoProxy(entries).covers(host, port) is exempt


@pytest.mark.parametrize("bad", ["10.0.0.0/99", "example.com:http", "[::1", "*.", ":80"])
def test_bad_no_proxy_entries_name_the_input(bad: str) -> None:
    with pytest.raises(ConfigError, match="--no-proxy"):
        NoProxy(bad, "--no-proxy")


def test_the_environment_as_curl_and_python_read_it() -> None:
    env = {"http_proxy": "http://low:1", "HTTP_PROXY": "http://up:2", "HTTPS_PROXY": "up:3",
           "no_proxy": "direct.test"}  # fmt: skip
    rules = ProxyRules.from_settings(None, None, env)
    assert rules.select("http", "a.test", 80).url == "http://low:1"  # lower case first
    assert rules.select("https", "a.test", 443).url == "http://up:3"  # no scheme: http://
    assert rules.select("https", "direct.test", 443) is None
    assert rules.select("http", "www.direct.test", 80) is None
    # httpoxy: under CGI, HTTP_PROXY may come from a request's Proxy: header
    cgi = ProxyRules.from_settings(
        None, None, {"HTTP_PROXY": "http://up:2", "REQUEST_METHOD": "GET"}
    )
    assert cgi.select("http", "a.test", 80) is None
    every = ProxyRules.from_settings(
        None, None, {"ALL_PROXY": "socks5h://s:9", "https_proxy": "h:4"}
    )
    assert every.select("http", "a.test", 80).url == "socks5h://s:9"
    assert every.select("https", "a.test", 443).url == "http://h:4"
    assert not ProxyRules.from_settings(None, None, {})
    # --proxy: every scheme, over the environment; --no-proxy over no_proxy
    flag = ProxyRules.from_settings("http://flag:5", "other.test", env)
    assert flag.select("https", "direct.test", 443).url == "http://flag:5"
    assert flag.select("http", "other.test", 80) is None
    assert not ProxyRules.from_settings("http://flag:5", "*", env)


def test_proxy_urls() -> None:
    proxy = parse_proxy("http://us%40er:p%3Ass@proxy.test")
    assert (proxy.host, proxy.port, proxy.username, proxy.password) == (
        "proxy.test", 1080, "us@er", "p:ss")  # fmt: skip
    assert "p:ss" not in repr(proxy) and "p%3Ass" not in proxy.url and "us" not in str(proxy)
    assert proxy.authorization == "Basic dXNAZXI6cDpzcw=="  # base64 of us@er:p:ss
    assert parse_proxy("socks5h://[::1]:9050").url == "socks5h://[::1]:9050"
    for bad, words in [("https://p.test:443", "not supported"), ("ftp://p.test", "unknown proxy scheme"),
                       ("http://p.test:99999", "not a proxy URL"), ("http://:8080", "no proxy host"),
                       ("http://u:secret@p.test/path", "no path")]:  # fmt: skip
        with pytest.raises(ConfigError, match=words) as caught:
            parse_proxy(bad, "HTTPS_PROXY")
        assert "secret" not in str(caught.value) and "HTTPS_PROXY" in str(caught.value)
    with pytest.raises(ConfigError, match="http_proxy"):
        ProxyRules.from_settings(None, None, {"http_proxy": "gopher://x"})


# -- through a proxy ---------------------------------------------------------------------------
def _fetch_all(settings: Settings, urls: list[str], allowed=allow_all) -> list[object]:  # type: ignore[no-untyped-def]
    async def go() -> list[object]:
        out: list[object] = []
        async with open_session(settings, allowed) as session:
            fetcher = Fetcher(session, settings)
            for url in urls:
                try:
                    out.append(await fetcher.fetch(url))
                except Exception as exc:
                    out.append(exc)
            fetcher.close()
        return out

    return asyncio.run(go())


def test_http_targets_go_in_absolute_form_on_pooled_connections_to_the_proxy() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok"

    async def go() -> Server:
        async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
            writer.write(answer)
            return True

        async with Server(respond) as proxy:
            settings = Settings(proxy=f"http://u:pw@127.0.0.1:{proxy.port}", headers=("X-Test: 1",))
            async with open_session(settings, allow_all) as session:
                fetcher = Fetcher(session, settings)
                for url in (
                    "http://a.test/one?q=1",
                    "http://b.test:8080/two",
                    "http://a.test/three",
                ):
                    assert (await fetcher.fetch(url)).body == b"ok"
                fetcher.close()
        return proxy

    proxy = asyncio.run(go())
    assert proxy.connections == 1  # keep-alive to the proxy, shared by every http target
    lines = [head.decode().split("\r\n") for head in proxy.requests]
    assert [line[0] for line in lines] == [
        "GET http://a.test/one?q=1 HTTP/1.1",
        "GET http://b.test:8080/two HTTP/1.1",
        "GET http://a.test/three HTTP/1.1",
    ]
    assert "Host: b.test:8080" in lines[1] and "X-Test: 1" in lines[1]
    assert "Proxy-Authorization: Basic dTpwdw==" in lines[0]


def test_a_proxy_that_refuses_or_is_not_there_is_a_proxy_error() -> None:
    async def go() -> list[object]:
        async def refuse(head: bytes, writer: asyncio.StreamWriter) -> bool:
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            return True

        async with Server(refuse) as proxy:
            outcomes = []
            for url in (f"http://127.0.0.1:{proxy.port}", f"http://127.0.0.1:{free_port()}"):
                settings = Settings(proxy=url, retries=0)
                async with open_session(settings, allow_all) as session:
                    fetcher = Fetcher(session, settings)
                    for target in ("http://a.test/", "https://a.test/"):
                        try:
                            await fetcher.fetch(target)
                        except ProxyFailed as exc:
                            outcomes.append(exc)
                    fetcher.close()
            return outcomes

    outcomes = asyncio.run(go())
    assert len(outcomes) == 4 and all(exc.reason == "proxy" and exc.slows_host for exc in outcomes)
    assert "407" in str(outcomes[0]) and "refused CONNECT a.test:443: 407" in str(outcomes[1])


def test_tinyproxy_carries_http_and_https_and_asks_for_its_login(tmp_path: Path) -> None:
    tls = private_ca(tmp_path)
    page = html_handler("<p>through</p>")
    with (
        SiteServer({"/": page}) as plain,
        SiteServer({"/": page}, tls=tls.server) as secure,
        tinyproxy(tmp_path, login=("crawler", "s3cret")) as proxy,
    ):
        good = Settings(proxy=proxy.url, ca_bundle=str(tls.ca_pem))
        results = _fetch_all(good, [plain.url + "/", secure.url + "/", secure.url.replace(
            "127.0.0.1", "localhost") + "/"])  # fmt: skip
        assert [getattr(r, "status", r) for r in results] == [200, 200, 200]
        assert plain.hits[0].header("Via") and "tinyproxy" in plain.hits[0].header("Via")
        assert f"CONNECT 127.0.0.1:{secure.port}" in proxy.log_text()
        without = Settings(proxy=proxy.url.replace("crawler:s3cret@", ""), retries=0,
                           ca_bundle=str(tls.ca_pem))  # fmt: skip
        refused = _fetch_all(without, [plain.url + "/", secure.url + "/"])
        assert all(isinstance(r, ProxyFailed) for r in refused), refused
        assert len(plain.hits) == 1 and len(secure.hits) == 2
        # TLS is end to end: a CA the crawl does not trust fails through the tunnel too
        untrusted = _fetch_all(Settings(proxy=proxy.url, retries=0), [secure.url + "/"])
        assert untrusted[0].reason == "connect" and "CERTIFICATE_VERIFY_FAILED" in str(untrusted[0])
        # NO_PROXY: this host is reached directly
        direct = _fetch_all(Settings(proxy=proxy.url, no_proxy="127.0.0.1"), [plain.url + "/"])
        assert direct[0].status == 200 and plain.hits[-1].header("Via") is None


def test_socks5_resolves_here_behind_the_guard_and_socks5h_at_the_proxy(tmp_path: Path) -> None:
    with (
        SiteServer({"/": html_handler("<p>socks</p>")}) as site,
        microsocks(tmp_path, login=("u", "pw")) as proxy,
    ):
        for scheme in ("socks5", "socks5h"):
            url = proxy.url.replace("socks5", scheme, 1)
            results = _fetch_all(
                Settings(proxy=url), [site.url + "/", f"http://localhost:{site.port}/"]
            )
            assert [getattr(r, "body", r) for r in results] == [b"<p>socks</p>"] * 2
        # socks5: the crawl resolves localhost itself, and the guard refuses the address
        guarded = allow_origins(["http://example.com/"])
        blocked = _fetch_all(
            Settings(proxy=proxy.url, retries=0), [f"http://localhost:{site.port}/"], guarded
        )
        assert isinstance(blocked[0], Blocked)
        wrong = _fetch_all(
            Settings(proxy=proxy.url.replace("pw@", "bad@"), retries=0), [site.url + "/"]
        )
        assert isinstance(wrong[0], ProxyFailed) and "bad" not in str(wrong[0])
