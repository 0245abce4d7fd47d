"""bench/single_file_crawler.py, the crawl benchmark's simplest peer: it crawls a small site
to its end and exits 0 with its summary (a failing exit made every benchmark run of it a
warning, its pages counted from the output all the same)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.proc import ROOT as ROOT_DIR
from tests.sites import SiteServer, html_handler


def test_the_single_file_peer_crawls_a_site_and_exits_0(tmp_path: Path) -> None:
    pages = {
        "/": html_handler(
            '<a href="/a">a</a> <a href="/b">b</a> <a href="http://x.invalid/">out</a>'
        ),
        "/a": html_handler('<title>a</title><a href="/b">b</a>'),
        "/b": html_handler("<title>b</title>"),
    }
    out = tmp_path / "pages.jsonl"
    with SiteServer(pages) as site:
        done = subprocess.run(
            [sys.executable, str(ROOT_DIR / "bench" / "single_file_crawler.py"), site.url + "/",
             "--out", str(out), "--concurrency", "4"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["pages"] == 3 and summary["errors"] == 0
    assert len(out.read_text().splitlines()) == 3
