"""Observability of a running crawl: Prometheus metrics, --stats-json, JSON logs."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.sites import LinkGraph, SiteServer

FAST = ["--concurrency", "8", "--per-host", "4", "--delay", "0", "--workers", "1", "--no-sitemaps"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    """``name{labels}`` -> value of every sample on the metrics page."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_metrics_stats_json_and_json_logs(tmp_path: Path) -> None:
    graph = LinkGraph(300)
    port = free_port()
    db, stats, log = tmp_path / "c.db", tmp_path / "stats.json", tmp_path / "log.jsonl"
    with SiteServer(latency_s=0.02) as site:
        graph.serve(site)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(site.url + "/index.html\n")
        crawl = subprocess.Popen(
            [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), *FAST,
             "--metrics-port", str(port), "--stats-json", str(stats),
             "--log-format", "json", "--log-file", str(log)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        during: dict[str, float] = {}
        deadline = time.monotonic() + 30
        while crawl.poll() is None and time.monotonic() < deadline:
            try:
                during = scrape(port)
            except OSError:
                time.sleep(0.1)  # not listening yet
                continue
            if during.get('crawl_pages_total{outcome="ok"}', 0) > 20:
                break
            time.sleep(0.1)
        out, err = crawl.communicate(timeout=60)
    assert crawl.returncode == 0, err
    assert during['crawl_pages_total{outcome="ok"}'] > 20
    assert during["crawl_bytes_total"] > 0
    assert during['crawl_responses_total{status="200"}'] > 20
    for gauge in ("crawl_queued", "crawl_in_flight", "crawl_parse_busy", "crawl_backlog"):
        assert gauge in during
    assert during["crawl_parse_workers"] == 1
    try:  # the endpoint goes away with the crawl
        scrape(port)
        raise AssertionError("metrics endpoint still up after the crawl")
    except OSError:
        pass

    report = json.loads(stats.read_text())
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        run = connection.execute(
            "SELECT id, status, reason, pages_ok, pages_failed FROM runs"
        ).fetchone()
        stored = connection.execute("SELECT count(*) FROM pages").fetchone()[0]
    assert (report["run_id"], report["status"], report["reason"]) == run[:3]
    assert (report["pages_ok"], report["pages_failed"]) == run[3:]
    assert report["pages"] == stored >= len(graph.expected_paths() - {"/"})

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries, "nothing logged"
    assert all({"ts", "level", "logger", "msg"} <= entry.keys() for entry in entries)
    assert any("metrics on" in entry["msg"] for entry in entries)
    assert "\x1b[" not in out + err  # no ANSI on a non-terminal


def test_a_taken_metrics_port_is_a_usage_error(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "crawler", str(seeds), "--db", str(tmp_path / "c.db"),
             "--metrics-port", str(port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("crawl: error: --metrics-port") and str(port) in lines[-1]


def test_verbose_logs_every_request_but_no_library_internals(tmp_path: Path) -> None:
    """``--verbose`` is the crawler's own detail: a line per request. Libraries stay at INFO
    (aiosqlite's debug lines would print every statement's rows, page text included)."""
    graph = LinkGraph(40)
    db, log = tmp_path / "c.db", tmp_path / "log.jsonl"
    with SiteServer() as site:
        graph.serve(site)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(site.url + "/index.html\n")
        done = subprocess.run(
            [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), *FAST, "--verbose",
             "--log-format", "json", "--log-file", str(log)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    requests = [
        e for e in entries if e["logger"] == "crawler.engine.pages" and e["msg"][:3].isdigit()
    ]
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        pages = connection.execute("SELECT count(*) FROM pages WHERE status > 0").fetchone()[0]
    assert len(requests) == pages >= len(graph.expected_paths() - {"/"})
    loggers = {e["logger"].split(".")[0] for e in entries}
    assert loggers <= {"crawler", "parsers", "storage"}, loggers
    assert all(e["level"] != "debug" or e["logger"].startswith("crawler") for e in entries)


def test_library_info_lines_stay_out_of_the_log() -> None:
    """numba.cuda logs a line at INFO for every device buffer it frees: dozens a batch when a
    crawl scores on a GPU. The crawl's INFO log keeps its own lines, not those."""
    from crawler.cli.logs import setup_logging

    root, names = logging.getLogger(), ("numba", "asyncio", "crawler")
    saved = root.handlers[:], root.level, [logging.getLogger(n).level for n in names]
    try:
        setup_logging(quiet=False, verbose=True)
        assert not logging.getLogger("numba.cuda.cudadrv.driver").isEnabledFor(logging.INFO)
        assert logging.getLogger("numba.cuda.cudadrv.driver").isEnabledFor(logging.WARNING)
        assert logging.getLogger("crawler.engine.engine").isEnabledFor(logging.DEBUG)
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        for name, level in zip(names, saved[2], strict=True):
            logging.getLogger(name).setLevel(level)
