"""The runnable examples in ``examples/``: each is run as a real subprocess, the way a user
would run it, against a local site (``tests.sites``), and its output files, database and
stdout are checked for the content the site holds."""

from __future__ import annotations

import ast
import contextlib
import json
import select
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.proc import ROOT as ROOT_DIR
from tests.proc import child_env
from tests.sites import PageSite, SiteServer, html_handler

ROOT = ROOT_DIR
EXAMPLES = ROOT / "examples"
FAST = ["--delay", "0", "--workers", "1"]
TESTED = {"embed_in_asyncio_app.py", "custom_extract.py", "stream_to_sink.py", "sync_script.py"}


def _env() -> dict[str, str]:
    return child_env()


def run_example(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, env=_env(), cwd=cwd, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return connection.execute(sql).fetchall()


@pytest.fixture
def page_site() -> Iterator[tuple[SiteServer, PageSite]]:
    site = PageSite(30, links=4)
    with SiteServer() as server:
        site.serve(server)
        yield server, site


def test_every_example_is_documented_guarded_and_tested() -> None:
    names = {path.name for path in EXAMPLES.glob("*.py")}
    assert names == TESTED  # a new example needs a test here
    for name in names:
        source = (EXAMPLES / name).read_text()
        tree = ast.parse(source)
        doc = ast.get_docstring(tree)
        assert doc and "What it shows" in doc and "Run it" in doc, name
        assert 'if __name__ == "__main__":' in source, name  # spawned workers re-import it


# -- custom_extract.py ---------------------------------------------------------------------
def test_custom_extract_writes_structured_data(tmp_path: Path) -> None:
    pages = {
        "/": '<html><head><title>Home</title><meta name="description" content="The home page">'
        '</head><body><h1>Welcome</h1><h2>News</h2><h2>Links</h2><img src="/logo.png">'
        '<a href="/a">A</a><a href="/b">B</a><a href="/doc.pdf">pdf</a></body></html>',
        "/a": '<title>A</title><meta name="description" content="About A"><h1>Page A</h1>'
        '<p>one two three</p><a href="/">home</a><a href="/b">b</a>',
        "/b": '<title>B</title><h2>Only h2</h2><a name="no-href">anchor</a><img src="/x.png">'
        '<img src="/y.png">',
    }

    async def pdf(request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"%PDF-1.4 fake", content_type="application/pdf")

    out = tmp_path / "pages.jsonl"
    with SiteServer() as server:
        server.routes = {path: html_handler(body) for path, body in pages.items()}
        server.routes["/doc.pdf"] = pdf
        done = run_example("custom_extract.py", server.url + "/", "--out", str(out),
                           "--db", str(tmp_path / "c.db"), *FAST, cwd=tmp_path)  # fmt: skip
    records = {
        r["url"].removeprefix(server.url): r for r in map(json.loads, out.read_text().splitlines())
    }
    assert records == {
        "/": {"url": server.url + "/", "title": "Home", "h1": ["Welcome"],
              "h2": ["News", "Links"], "description": "The home page", "links": 3,
              "images": 1, "words": 6},
        "/a": {"url": server.url + "/a", "title": "A", "h1": ["Page A"], "h2": [],
               "description": "About A", "links": 2, "images": 0, "words": 7},
        "/b": {"url": server.url + "/b", "title": "B", "h1": [], "h2": ["Only h2"],
               "description": None, "links": 0, "images": 2, "words": 3},
    }  # fmt: skip
    assert "3 pages with an extract written" in done.stdout
    assert "crawl finished (done): 4 ok" in done.stdout  # the PDF too, without an extract
    stored = dict(rows(tmp_path / "c.db", "SELECT url, extract FROM pages"))
    assert stored[server.url + "/doc.pdf"] is None
    assert json.loads(stored[server.url + "/a"])["description"] == "About A"


# -- stream_to_sink.py ---------------------------------------------------------------------
def test_stream_to_sink_writes_batches(tmp_path: Path, page_site: tuple[SiteServer, PageSite]) -> None:  # fmt: skip
    server, site = page_site
    sink = tmp_path / "sink.db"
    done = run_example("stream_to_sink.py", server.url + "/", "--sink", str(sink),
                       "--db", str(tmp_path / "crawl.db"), "--batch", "8", "--buffer", "2",
                       "--sink-delay", "0.05", *FAST, cwd=tmp_path)  # fmt: skip
    stored = rows(sink, "SELECT url, status, title, depth, links, words, batch FROM pages")
    assert {r[0] for r in stored} == site.urls()
    for url, status, title, depth, links, words, batch in stored:
        i = site.index_of_url(url)
        assert i is not None
        assert (status, title, links) == (200, f"Page {i}", len(site.outlinks[i]))
        assert words > 20 and (depth == 0) == (i == 0) and 1 <= batch <= 4
    assert [n for (n,) in rows(sink, "SELECT count(*) FROM pages GROUP BY batch")] == [8, 8, 8, 6]
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"batch {k}" for k in (1, 2, 3, 4)] + ["done"]
    assert "30 in the sink" in lines[3]
    assert lines[-1].startswith("done: 30 rows in 4 batches; crawl finished (done), 30 pages")
    # the crawl's own database has the same pages
    assert {url for (url,) in rows(tmp_path / "crawl.db", "SELECT url FROM pages")} == site.urls()


# -- sync_script.py ------------------------------------------------------------------------
def test_sync_script_with_a_config_file(
    tmp_path: Path, page_site: tuple[SiteServer, PageSite]
) -> None:
    server, site = page_site
    config = tmp_path / "crawl.toml"
    config.write_text('db = "from-config.db"\ndelay = 0\nworkers = 1\nmax-pages = 100\n')
    done = run_example("sync_script.py", server.url + "/", "--config", str(config),
                       "--max-pages", "12", "--top", "3", cwd=tmp_path)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0].startswith("finished (max-pages): 12 ok, 0 failed, ")
    assert lines[0].endswith("-> from-config.db")  # the file's db, the flag's max-pages
    assert rows(tmp_path / "from-config.db", "SELECT count(*) FROM pages") == [(12,)]
    top = [line.split() for line in lines[1:]]
    assert len(top) == 3
    counts = [int(t[0]) for t in top]
    assert counts == sorted(counts, reverse=True)
    for count, url, *title in top:
        i = site.index_of_url(url)
        assert i is not None and int(count) == len(site.outlinks[i]) and title == ["Page", str(i)]
    bad = subprocess.run([sys.executable, str(EXAMPLES / "sync_script.py"), "not-a-url"],
                         capture_output=True, text=True, env=_env(), cwd=tmp_path,
                         timeout=60)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


# -- embed_in_asyncio_app.py ---------------------------------------------------------------
def _read_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the example printed nothing"
    return proc.stdout.readline()


def _get_json(url: str, method: str = "GET") -> dict[str, Any] | None:
    """The JSON the app answers, or ``None`` if it did not answer (it may be shutting down:
    a connection accepted while it closes is never answered)."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=3) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result
    except OSError:  # refused, reset, timed out (urllib.error.URLError is an OSError)
        return None


def _start_app(tmp_path: Path, seed: str, db: Path, *args: str) -> tuple[subprocess.Popen[str], str]:  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(EXAMPLES / "embed_in_asyncio_app.py"), seed,
                             "--db", str(db), "--port", "0", *FAST, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=tmp_path)  # fmt: skip
    first = _read_line(proc)
    assert first.startswith("status: http://127.0.0.1:"), first
    return proc, first.split(" ", 1)[1].strip()


def test_embedded_crawl_serves_progress_and_ends_by_itself(tmp_path: Path) -> None:
    site = PageSite(40, links=4)
    db = tmp_path / "app.db"
    with SiteServer(latency_s=0.05) as server:
        site.serve(server)
        proc, status_url = _start_app(tmp_path, server.url + "/", db, "--linger", "1")
        seen: list[dict[str, Any]] = []
        try:
            deadline = time.monotonic() + 90
            while proc.poll() is None and time.monotonic() < deadline:  # until it ends itself
                answer = _get_json(status_url)
                if answer is not None:
                    seen.append(answer)
                time.sleep(0.05)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    states = [s["state"] for s in seen]
    assert "running" in states and states[-1] == "finished"
    assert states.index("finished") > states.index("running")
    stored = [s["stored"] for s in seen]
    assert stored == sorted(stored) and stored[-1] == site.n  # counted by on_page, live
    assert any(0 < n < site.n for n in stored)  # seen while it grew
    last = seen[-1]
    assert last["report"]["pages_ok"] == site.n and last["by_status"] == {"200": site.n}
    lines = stdout.splitlines()
    progress = [
        json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("progress: ")
    ]
    assert progress and {"done", "queued", "in_flight"} <= set(progress[-1])
    report = json.loads(lines[-1].removeprefix("report: "))
    assert (report["status"], report["reason"], report["pages_ok"]) == ("finished", "done", site.n)
    assert rows(db, "SELECT count(*) FROM pages") == [(site.n,)]


def test_embedded_crawl_stops_from_the_web_app(tmp_path: Path) -> None:
    site = PageSite(200, links=4)
    db = tmp_path / "app.db"
    with SiteServer(latency_s=0.1) as server:
        site.serve(server)
        proc, status_url = _start_app(tmp_path, server.url + "/", db)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                answer = _get_json(status_url)
                if answer is not None and answer["stored"] >= 5:
                    break
                time.sleep(0.05)
            stop_url = status_url.replace("/status", "/stop")
            answers = (_get_json(stop_url, method="POST") for _ in range(5))
            assert next((a for a in answers if a is not None), None) == {"stopping": True}
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    report = json.loads(stdout.splitlines()[-1].removeprefix("report: "))
    assert (report["status"], report["reason"]) == ("interrupted", "stopped from the web app")
    stored = rows(db, "SELECT count(*) FROM pages")[0][0]
    assert 5 <= stored < site.n and report["pages_ok"] == stored
    assert rows(db, "SELECT count(*) FROM urls WHERE lease IS NOT NULL") == [(0,)]


# -- typing --------------------------------------------------------------------------------
def test_examples_type_check_strictly_against_the_public_api(tmp_path: Path) -> None:
    """The examples are the API's first users: ``mypy --strict`` on them (the package's own
    modules are analysed but not reported: ``--follow-imports=silent``)."""
    pytest.importorskip("mypy")
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--no-incremental", "--cache-dir", str(tmp_path / "mypy"),
                           *sorted(str(p) for p in EXAMPLES.glob("*.py"))],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**_env(), "MYPYPATH": str(ROOT)}, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
