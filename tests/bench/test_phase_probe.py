"""bench/phase_probe.py on a real crawl: every mark it wraps is still reached, in order, and
its counts agree with what the crawl stored (a renamed method fails here, not in the bench)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.proc import ROOT, child_env
from tests.sites import LinkGraph, SiteServer

PROBE = ROOT / "bench" / "phase_probe.py"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_every_phase_is_marked_in_order_and_counted(tmp_path: Path) -> None:
    sys.path.insert(0, str(PROBE.parent))
    try:
        import phase_probe
    finally:
        sys.path.remove(str(PROBE.parent))
    graph = LinkGraph(60)
    db, out = tmp_path / "c.db", tmp_path / "phases.json"
    with SiteServer() as site:
        graph.serve(site)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(site.url + "/index.html\n")
        crawl = subprocess.run(
            [sys.executable, str(PROBE), str(out), str(seeds), "--db", str(db),
             "--concurrency", "8", "--delay", "0", "--workers", "1", "--no-sitemaps",
             "--query", "page words", "-q"],
            capture_output=True, text=True, timeout=120, env=child_env(),
        )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr
    report = json.loads(out.read_text())
    assert report["exit_code"] in (0, None)
    marks = report["marks_s"]
    assert list(marks) == list(phase_probe.MARKS)  # each reached, listed in order
    times = [report["interpreter_s"], *marks.values()]
    assert times == sorted(times), marks
    with sqlite3.connect(db) as connection:
        (pages,) = connection.execute("SELECT count(*) FROM pages").fetchone()
    assert report["pages"] == pages > 20
    assert report["writes"] >= 1
    assert report["transactions"] > report["writes"]  # the run's rows, the frontier too
    # exact clocks; the user/kernel split counts clock ticks, which may miss a short run
    assert 0 < report["store_transactions_cpu_s"] <= report["store_thread_cpu_s"]
    split = report["store_transactions_user_s"] + report["store_transactions_sys_s"]
    assert 0 <= split <= report["process_cpu_s"] + 0.01
    assert 0 < report["main_thread_cpu_s"] <= report["process_cpu_s"] + 0.01
