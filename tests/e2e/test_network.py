"""``crawl`` on real networks, as a subprocess with the environment a user has: proxies from
``HTTP_PROXY`` / ``HTTPS_PROXY`` (tinyproxy) and ``NO_PROXY``, a private CA by
``SSL_CERT_FILE``, ``--header`` and per-host headers, cookie-gated pages (``--cookies``,
``--keep-cookies``), Basic auth from ``--netrc``, and each bad input's exit 2."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from tests.proc import child_env
from tests.proxies import private_ca, tinyproxy
from tests.sites import Handler, SiteServer, html_handler

FAST = ["--concurrency", "8", "--per-host", "4", "--delay", "0", "--workers", "1",
        "--no-sitemaps", "--no-progress", "--retries", "0"]  # fmt: skip
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                   "ALL_PROXY", "no_proxy", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")  # fmt: skip


def crawl(tmp_path: Path, seeds: list[str], *flags: str, env: dict[str, str] | None = None,
          db: str = "c.db") -> subprocess.CompletedProcess[str]:  # fmt: skip
    (tmp_path / "seeds.txt").write_text("\n".join(seeds) + "\n")
    return subprocess.run(
        [sys.executable, "-m", "crawler", str(tmp_path / "seeds.txt"), "--db",
         str(tmp_path / db), *FAST, *flags],
        env=child_env(drop=PROXY_VARIABLES, **(env or {})), capture_output=True, text=True,
        timeout=120, cwd=tmp_path,
    )  # fmt: skip


def statuses(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT url, status FROM pages"))


def site_routes() -> dict[str, Handler]:
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(4))
    return {"/": html_handler(f"<title>home</title>{links}"),
            **{f"/p{i}": html_handler(f"<title>p{i}</title>") for i in range(4)}}  # fmt: skip


def test_http_proxy_and_no_proxy_from_the_environment(tmp_path: Path) -> None:
    with (
        SiteServer(site_routes()) as proxied,
        SiteServer(site_routes(), host="127.0.0.2") as direct,
        tinyproxy(tmp_path) as proxy,
    ):
        result = crawl(tmp_path, [proxied.url + "/", direct.url + "/"],
                       env={"HTTP_PROXY": proxy.url, "NO_PROXY": "127.0.0.2"})  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert len(proxied.hits) == 6 and len(direct.hits) == 6  # robots.txt and 5 pages each
        assert all("tinyproxy" in (hit.header("Via") or "") for hit in proxied.hits)
        assert all(hit.header("Via") is None for hit in direct.hits)
        assert set(statuses(tmp_path / "c.db").values()) == {200}


def test_https_through_connect_with_a_private_ca_from_ssl_cert_file(tmp_path: Path) -> None:
    tls = private_ca(tmp_path)
    with SiteServer(site_routes(), tls=tls.server) as site, tinyproxy(tmp_path) as proxy:
        result = crawl(tmp_path, [site.url + "/"],
                       env={"HTTPS_PROXY": proxy.url, "SSL_CERT_FILE": str(tls.ca_pem)})  # fmt: skip
        assert result.returncode == 0, result.stderr
        pages = statuses(tmp_path / "c.db")
        assert len(pages) == 5 and set(pages.values()) == {200}
        assert f"CONNECT 127.0.0.1:{site.port}" in proxy.log_text()
        # --proxy on the command line: the same, and --ca-bundle instead of the variable
        again = crawl(tmp_path, [site.url + "/"], "--proxy", proxy.url, "--ca-bundle",
                      str(tls.ca_pem), db="flag.db")  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert set(statuses(tmp_path / "flag.db").values()) == {200}
        # without the CA: every page fails TLS verification, none is fetched
        untrusted = crawl(tmp_path, [site.url + "/"], "--proxy", proxy.url, db="untrusted.db")
        assert untrusted.returncode == 0
        assert statuses(tmp_path / "untrusted.db") == {}


def test_headers_given_and_per_host_arrive(tmp_path: Path) -> None:
    with SiteServer(site_routes()) as site, SiteServer(site_routes(), host="127.0.0.2") as other:
        config = tmp_path / "crawl.toml"
        config.write_text('[crawl.host-headers."127.0.0.2"]\nX-Token = "only-there"\n'
                          'Accept-Language = "fr"\n')  # fmt: skip
        result = crawl(tmp_path, [site.url + "/", other.url + "/"], "--header",
                       "Accept-Language: de", "-H", "User-Agent: customagent/2.0",
                       "-H", "Accept-Encoding:", "--config", str(config))  # fmt: skip
        assert result.returncode == 0, result.stderr
        pages = [hit for hit in site.hits if hit.path != "/robots.txt"]
        assert pages and all(hit.header("Accept-Language") == "de" for hit in pages)
        assert all(hit.header("User-Agent") == "customagent/2.0" for hit in site.hits)
        assert all(hit.header("X-Token") is None for hit in site.hits)
        assert all(hit.header("Accept-Encoding") in (None, "identity") for hit in pages)
        assert all(hit.header("X-Token") == "only-there" for hit in other.hits)
        assert all(hit.header("Accept-Language") == "fr" for hit in other.hits)
        with sqlite3.connect(tmp_path / "c.db") as conn:
            settings = json.loads(conn.execute("SELECT settings FROM runs").fetchone()[0])
        assert "Accept-Language: de" in settings["headers"]


def cookie_site() -> dict[str, Handler]:
    async def login(request: web.Request) -> web.Response:
        response = web.Response(text='<a href="/private/1">1</a><a href="/private/2">2</a>',
                                content_type="text/html")  # fmt: skip
        response.set_cookie("session", "opensesame", path="/", httponly=True)
        response.set_cookie("tracker", "x", domain="com")  # a public suffix: refused
        return response

    async def private(request: web.Request) -> web.Response:
        if request.cookies.get("session") != "opensesame":
            return web.Response(status=403, text="no session", content_type="text/html")
        return web.Response(text=f"<title>private {request.path}</title>", content_type="text/html")

    return {"/login": login, "/private/1": private, "/private/2": private}


def test_cookie_gated_pages_open_with_cookies_and_stay_closed_without(tmp_path: Path) -> None:
    with SiteServer(cookie_site()) as site:
        private = [f"{site.url}/private/1", f"{site.url}/private/2"]
        closed = crawl(tmp_path, [site.url + "/login"], db="stateless.db")
        assert closed.returncode == 0, closed.stderr
        assert {statuses(tmp_path / "stateless.db")[url] for url in private} == {403}
        assert all(hit.header("Cookie") is None for hit in site.hits)

        kept = crawl(tmp_path, [site.url + "/login"], "--keep-cookies", db="kept.db")
        assert kept.returncode == 0, kept.stderr
        assert {statuses(tmp_path / "kept.db")[url] for url in private} == {200}
        assert not any("tracker" in (hit.header("Cookie") or "") for hit in site.hits)

        jar = tmp_path / "cookies.txt"
        jar.write_text("# Netscape HTTP Cookie File\n"
                       "#HttpOnly_127.0.0.1\tFALSE\t/private\tFALSE\t0\tsession\topensesame\n"
                       "other.test\tFALSE\t/\tFALSE\t0\tsession\tnot-for-you\n")  # fmt: skip
        loaded = crawl(tmp_path, private, "--cookies", str(jar), db="file.db")
        assert loaded.returncode == 0, loaded.stderr
        assert set(statuses(tmp_path / "file.db").values()) == {200}
        with sqlite3.connect(tmp_path / "file.db") as conn:
            dump = "\n".join(conn.iterdump())
        assert "opensesame" not in dump


def test_netrc_opens_a_basic_auth_area_and_the_password_is_found_nowhere(tmp_path: Path) -> None:
    secret = "pa55-w0rd-zebra"
    token = "Basic " + base64.b64encode(f"reader:{secret}".encode()).decode()

    async def area(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != token:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        return web.Response(
            text='<title>area</title><a href="/area/2">2</a>', content_type="text/html"
        )

    with SiteServer({"/area/1": area, "/area/2": area}) as site:
        netrc = tmp_path / "netrc"
        netrc.write_text(f"machine 127.0.0.1 login reader password {secret}\n")
        netrc.chmod(0o600)
        log = tmp_path / "crawl.log"
        result = crawl(tmp_path, [site.url + "/area/1"], "--netrc", str(netrc), "--verbose",
                       "--store-body", "--log-file", str(log))  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert set(statuses(tmp_path / "c.db").values()) == {200}
        export = subprocess.run([sys.executable, "-m", "crawler", "export", str(tmp_path / "c.db"),
                                 "--format", "warc", "-o", str(tmp_path / "out.warc.gz")],
                                env=child_env(), capture_output=True, timeout=60)  # fmt: skip
        assert export.returncode == 0, export.stderr
        for path in tmp_path.rglob("*"):
            if path.is_file() and path.name not in ("netrc", "seeds.txt"):
                data = path.read_bytes()
                assert secret.encode() not in data and token.encode() not in data, path
        assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        (["--header", "Host: evil.test"], {}, "--header Host"),
        (["--header", "Transfer-Encoding: chunked"], {}, "--header Transfer-Encoding"),
        (["--header", "no colon"], {}, "--header"),
        (["--proxy", "ftp://p.test:21"], {}, "--proxy"),
        (["--proxy", "https://u:hidden@p.test"], {}, "--proxy"),
        (["--no-proxy", "10.0.0.0/99"], {}, "--no-proxy"),
        ([], {"HTTPS_PROXY": "gopher://p.test"}, "HTTPS_PROXY"),
        (["--cookies", "missing.txt"], {}, "--cookies missing.txt"),
        (["--netrc", "missing-netrc"], {}, "--netrc"),
        (["--ca-bundle", "missing.pem"], {}, "--ca-bundle missing.pem"),
    ],
)
def test_bad_network_input_exits_2_naming_it(
    tmp_path: Path, flags: list[str], env: dict[str, str], named: str
) -> None:
    result = crawl(tmp_path, ["http://127.0.0.1:9/"], *flags, env=env)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr and "Traceback" not in result.stderr
    assert "hidden" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
