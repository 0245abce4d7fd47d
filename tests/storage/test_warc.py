"""``crawl export --format warc``: real crawls with --store-body, read back with warcio (its
ArchiveIterator with digest checks, and its own ``check`` and ``index`` commands)."""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from click.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator

import crawler
from crawler import Settings
from crawler.cli import main
from storage.warc import export_warc
from tests.proc import ROOT as ROOT_DIR
from tests.proc import child_env
from tests.sites import Handler, SiteServer
from tests.traced import traced

FAST: dict[str, Any] = {"concurrency": 8, "per_host": 8, "delay": 0.0, "workers": 1, "progress": False,
        "sitemaps": False}  # fmt: skip
ROOT = ROOT_DIR

UTF8_BODY = "<title>Ünïcödé</title><p>naïve café — 日本語 ☃</p>".encode()
GZ_HTML = b"<title>Zipped</title><p>sent gzip-encoded</p>"
PLAIN = b"<title>Plain</title><p>plain text</p>"
NEW = b"<title>New home</title><p>moved here</p>"
INDEX = (b'<title>Index</title><a href="/plain">p</a><a href="/gz">g</a><a href="/utf8">u</a>'
         b'<a href="/old">o</a><a href="/dup">d</a><a href="/to-plain">t</a>')  # fmt: skip


class Site:
    """The site every test exports: what it sent, per path, byte for byte."""

    def __init__(self, server: SiteServer) -> None:
        self.server = server
        self.sent: dict[str, bytes] = {}
        html = {"/": INDEX, "/plain": PLAIN, "/dup": PLAIN, "/new": NEW}
        for path, body in html.items():
            server.routes[path] = self._html(path, body)
        server.routes["/gz"] = self._gzip
        server.routes["/utf8"] = self._chunked_utf8
        server.routes["/old"] = self._redirect("/new")  # followed: /new is not linked
        server.routes["/to-plain"] = self._redirect("/plain")  # not followed: /plain is known

    def url(self, path: str) -> str:
        return self.server.url + path

    def _html(self, path: str, body: bytes) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            self.sent[path] = body
            return web.Response(body=body, content_type="text/html")

        return handle

    async def _gzip(self, request: web.Request) -> web.StreamResponse:
        body = gzip.compress(GZ_HTML, mtime=0)
        self.sent["/gz"] = body
        return web.Response(body=body, headers={"Content-Type": "text/html",
                                                "Content-Encoding": "gzip"})  # fmt: skip

    async def _chunked_utf8(self, request: web.Request) -> web.StreamResponse:
        # chunked, with a raw UTF-8 header value: both must survive byte for byte
        response = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8",
                                               "X-Name": "café"})  # fmt: skip
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(UTF8_BODY[:20])
        await response.write(UTF8_BODY[20:])
        await response.write_eof()
        self.sent["/utf8"] = UTF8_BODY
        return response

    def _redirect(self, target: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            raise web.HTTPMovedPermanently(target)

        return handle


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with SiteServer() as server:
        yield Site(server)


@pytest.fixture(scope="module")
def stored_db(site: Site, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real crawl of ``site`` with --store-body (shared: tests copy it to change it)."""
    db = str(tmp_path_factory.mktemp("warc") / "stored.db")
    report = crawler.run([site.url("/")], Settings(db=db, store_body=True, **FAST))
    assert report.pages_ok >= 6
    return db


def query(db: str, sql: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        return connection.execute(sql).fetchall()


def records(data: bytes) -> list[dict]:
    """Every record of a WARC, read in full with digests checked (a bad one raises)."""
    out = []
    for record in ArchiveIterator(io.BytesIO(data), check_digests="raise"):
        headers = record.http_headers
        out.append({
            "type": record.rec_type,
            "warc": dict(record.rec_headers.headers),
            "uri": record.rec_headers.get_header("WARC-Target-URI"),
            "http": headers,
            "raw": record.raw_stream.read(),
            "digest_ok": record.digest_checker.passed,
        })  # fmt: skip
    return out


def export(db: str, out: Path, *flags: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["export", db, "--format", "warc", "-o", str(out), *flags])
    return result.exit_code, result.stderr


def test_round_trip_through_warcio(site: Site, stored_db: str, tmp_path: Path) -> None:
    out = tmp_path / "out.warc.gz"
    code, stderr = export(stored_db, out)
    assert code == 0, stderr
    data = out.read_bytes()
    found = records(data)

    assert found[0]["type"] == "warcinfo" and found[0]["warc"]["WARC-Filename"] == "out.warc.gz"
    info = found[0]["raw"].decode()
    assert "software: crawl/" in info and f"database: {stored_db}" in info
    assert "format: WARC File Format 1.1" in info
    assert all(r["digest_ok"] is not False for r in found)
    assert data.startswith(b"\x1f\x8b") and data.count(b"\x1f\x8b\x08") >= len(found)

    responses = {r["uri"]: r for r in found if r["type"] == "response"}
    requests = {r["uri"]: r for r in found if r["type"] == "request"}
    bodied = dict(query(stored_db, "SELECT final_url, fetched_at FROM pages WHERE body NOT NULL"))
    assert set(responses) == set(requests) == set(bodied)
    assert f"exported {len(bodied)} pages" in stderr
    assert set(bodied) == {site.url(p) for p in ("/", "/plain", "/gz", "/utf8", "/new", "/dup")}
    # the redirect that was not followed has no stored response: no record claims one
    assert query(stored_db, f"SELECT status, body FROM pages WHERE url = '{site.url('/to-plain')}'") == [(301, None)]  # fmt: skip

    for uri, response in responses.items():
        path = uri[len(site.server.url) :]
        assert response["raw"] == site.sent[path], uri  # the payload as the server sent it
        assert response["http"].protocol == "HTTP/1.1"
        assert response["http"].get_statuscode() == "200"
        assert response["http"].get_header("Transfer-Encoding") is None
        assert response["http"].get_header("Content-Length") == str(len(site.sent[path]))
        assert response["warc"]["WARC-Payload-Digest"].startswith("sha1:")
        assert response["warc"]["WARC-Block-Digest"].startswith("sha1:")
        assert response["digest_ok"] is True
        request = requests[uri]
        assert request["warc"]["WARC-Concurrent-To"] == response["warc"]["WARC-Record-ID"]
        assert request["http"].protocol == "GET"
        assert request["http"].statusline == f"{path} HTTP/1.1"
        assert request["http"].get_header("Host") == site.server.url.removeprefix("http://")
        # WARC-Date is when the page was fetched: ISO-8601 UTC with Z
        stamp = bodied[uri].replace("+00:00", "Z")
        assert response["warc"]["WARC-Date"] == request["warc"]["WARC-Date"] == stamp

    gz = responses[site.url("/gz")]
    assert gz["http"].get_header("Content-Encoding") == "gzip"  # kept: payload still encoded
    assert gzip.decompress(gz["raw"]) == GZ_HTML
    # the chunked, non-ASCII page: de-chunked payload, header bytes exactly as sent
    utf8 = next(r for r in ArchiveIterator(io.BytesIO(data))
                if r.rec_headers.get_header("WARC-Target-URI") == site.url("/utf8")
                and r.rec_type == "response")  # fmt: skip
    assert b"\r\nX-Name: caf\xc3\xa9\r\n" in gzip.decompress(data)  # not percent-encoded
    assert utf8.http_headers.get_header("X-Name") == "café"
    assert utf8.content_stream().read() == UTF8_BODY
    # the followed redirect: the response is the URL that answered; a metadata record for
    # the URL that was requested refers to it
    (moved,) = [r for r in found if r["type"] == "metadata"]
    assert moved["uri"] == site.url("/old")
    assert moved["warc"]["WARC-Refers-To"] == responses[site.url("/new")]["warc"]["WARC-Record-ID"]
    assert moved["raw"] == f"redirected-to: {site.url('/new')}\r\n".encode()

    tool = [sys.executable, "-m", "warcio.cli"]
    check = subprocess.run([*tool, "check", "-v", str(out)], capture_output=True, text=True,
                           timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("digest pass") == len(found)
    index = subprocess.run([*tool, "index", "-f", "warc-type,warc-target-uri,http:status", str(out)],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert index.returncode == 0, index.stderr
    lines = [json.loads(line) for line in index.stdout.splitlines()]
    listed = {(e["warc-type"], e.get("warc-target-uri"), e.get("http:status")) for e in lines}
    assert {("response", uri, "200") for uri in bodied} <= listed
    assert ("metadata", site.url("/old"), None) in listed


def test_real_subprocess_to_stdout(stored_db: str) -> None:
    env = child_env()
    done = subprocess.run([sys.executable, "-m", "crawler", "export", stored_db, "--format", "warc"],
                          capture_output=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = records(done.stdout)
    assert found[0]["type"] == "warcinfo" and "WARC-Filename" not in found[0]["warc"]
    assert sum(r["type"] == "response" for r in found) == 6
    assert done.stderr.decode().strip().endswith("exported 6 pages")


def test_filters_are_honoured(site: Site, stored_db: str, tmp_path: Path) -> None:
    def uris(*flags: str) -> list[str]:
        out = tmp_path / "f.warc.gz"
        code, stderr = export(db, out, *flags)
        assert code == 0, stderr
        found = records(out.read_bytes())
        assert found[0]["type"] == "warcinfo"
        return sorted(r["uri"][len(site.server.url) :] for r in found if r["type"] == "response")

    db = str(tmp_path / "copy.db")
    shutil.copy(stored_db, db)
    everything = uris()
    assert everything == ["/", "/dup", "/gz", "/new", "/plain", "/utf8"]
    assert uris("--since", "2000-01-01") == everything
    # a selection of no pages is an empty archive (only warcinfo), as jsonl gives no lines
    assert uris("--since", "2999-01-01") == []
    # /dup and /plain are the same page: whichever was stored second is the duplicate
    ((copy,),) = query(db, "SELECT url FROM pages WHERE duplicate_of IS NOT NULL")
    copy = copy[len(site.server.url) :]
    assert copy in ("/dup", "/plain")
    deduped = [p for p in everything if p != copy]
    assert uris("--dedup") == deduped
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("UPDATE pages SET score = CASE WHEN url LIKE '%/gz' OR url LIKE '%/utf8'"
                           " THEN 2.0 ELSE 0.5 END")  # fmt: skip
    assert uris("--min-score", "1") == ["/gz", "/utf8"]
    assert uris("--dedup", "--min-score", "0.5") == deduped
    info = records((tmp_path / "f.warc.gz").read_bytes())[0]["raw"].decode()
    assert "selection: dedup min-score=0.5" in info


def test_database_without_bodies_is_a_one_line_error(site: Site, tmp_path: Path) -> None:
    db = str(tmp_path / "plain.db")
    crawler.run([site.url("/")], Settings(db=db, **FAST))
    out = tmp_path / "none.warc.gz"
    code, stderr = export(db, out)
    assert code == 2
    assert stderr.splitlines() == [
        f"crawl: error: {db}: no stored bodies: crawl with --store-body to export WARC"
    ]
    assert not out.exists()  # raised before anything was written; the empty file removed
    result = CliRunner().invoke(main, ["export", db, "--format", "jsonl"])
    assert result.exit_code == 0 and len(result.stdout.splitlines()) >= 6  # jsonl still works


def test_export_streams_in_constant_memory(stored_db: str, tmp_path: Path) -> None:
    db = str(tmp_path / "big.db")
    shutil.copy(stored_db, db)
    pages, size = 2000, 8192
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        headers, fetched_at = connection.execute(
            "SELECT headers, fetched_at FROM pages WHERE url LIKE '%/plain'").fetchone()  # fmt: skip
        connection.executemany(
            "INSERT INTO pages (url, final_url, status, depth, fetched_at, body, headers) "
            "VALUES (?, ?, 200, 1, ?, ?, ?)",
            (
                (url, url, fetched_at, zlib.compress(os.urandom(size)), headers)
                for url in (f"http://synthetic.test/p{i}" for i in range(pages))
            ),
        )
    total = pages * size  # incompressible bodies: stored as large as they are
    out = tmp_path / "big.warc.gz"
    with traced() as memory, open(out, "wb") as handle:
        count = export_warc(db, handle)
    peak = memory.peak
    assert count == pages + 6
    assert out.stat().st_size > total
    assert peak < total / 20, f"peak {peak} bytes for {total} bytes of bodies"
    # the stored headers' Content-Length (the original page's) is corrected to the payload
    with open(out, "rb") as handle:
        for record in ArchiveIterator(handle, check_digests="raise"):
            if record.rec_headers.get_header("WARC-Target-URI") == "http://synthetic.test/p0":
                assert record.http_headers.get_header("Content-Length") == str(size)
                assert len(record.content_stream().read()) == size
                break
        else:
            pytest.fail("synthetic page not exported")


def test_no_credentials_reach_the_warc(site: Site, stored_db: str, tmp_path: Path) -> None:
    """A database written before the crawler dropped them: a seed's ``user:password@`` in the
    URLs, its Basic credentials, a cookie and proxy credentials in the stored request headers."""
    password = "s3cr3t-pw"
    basic = base64.b64encode(f"user:{password}".encode()).decode()
    secrets = [["Authorization", f"Basic {basic}"], ["cookie", "a=b"],
               ["Proxy-Authorization", "Basic cHJveHk6cHJveHktcHc="]]  # fmt: skip
    with_userinfo = site.server.url.replace("http://", f"http://user:{password}@")
    db = str(tmp_path / "secrets.db")
    shutil.copy(stored_db, db)
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        for path in ("/plain", "/old"):
            page_id, final_url, headers_json = connection.execute(
                "SELECT id, final_url, headers FROM pages WHERE url = ?", (site.url(path),)
            ).fetchone()
            stored = json.loads(headers_json)
            stored["request"]["url"] = final_url.replace(site.server.url, with_userinfo)
            stored["request"]["headers"][1:1] = secrets
            connection.execute(
                "UPDATE pages SET url = ?, final_url = ?, headers = ? WHERE id = ?",
                (site.url(path).replace(site.server.url, with_userinfo),
                 final_url.replace(site.server.url, with_userinfo), json.dumps(stored), page_id),
            )  # fmt: skip
    assert len(query(db, f"SELECT url FROM pages WHERE url LIKE '%{password}%'")) == 2

    out = tmp_path / "secrets.warc.gz"
    code, stderr = export(db, out)
    assert code == 0, stderr
    data = out.read_bytes()
    found = records(data)  # digests still check out
    everything = gzip.decompress(data)
    for secret in (password, basic, "cHJveHk6cHJveHktcHc=", "a=b", "user:"):
        assert secret.encode() not in everything and secret.encode() not in data, secret
    requests = [r for r in found if r["type"] == "request"]
    assert len(requests) == 6
    for request in requests:
        for name in ("Authorization", "Cookie", "Proxy-Authorization"):
            assert request["http"].get_header(name) is None, (request["uri"], name)
        assert request["http"].get_header("Host") == site.server.url.removeprefix("http://")
        assert request["http"].get_header("User-Agent")  # the other headers are kept
    for record in found[1:]:
        assert "@" not in record["uri"], record["uri"]
    uris = {r["uri"] for r in requests}
    assert {site.url("/plain"), site.url("/new")} <= uris
    (moved,) = [r for r in found if r["type"] == "metadata"]
    assert moved["uri"] == site.url("/old")
    assert moved["warc"]["WARC-Refers-To-Target-URI"] == site.url("/new")
    assert moved["raw"] == f"redirected-to: {site.url('/new')}\r\n".encode()
    plain = next(r for r in requests if r["uri"] == site.url("/plain"))
    assert plain["http"].statusline == "/plain HTTP/1.1"
