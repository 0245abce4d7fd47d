"""Run lock (one crawl per database), time budget, and runs left behind by dead processes."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import crawler
from crawler import Settings
from crawler.cli import main
from crawler.errors import ConfigError
from crawler.lock import DatabaseLocked, RunLock, crawl_running
from crawler.settings import parse_duration
from tests.proc import ROOT as ROOT_DIR
from tests.sites import SiteServer, html_handler

FAST = ["--concurrency", "4", "--per-host", "4", "--delay", "0", "--workers", "1", "--no-sitemaps"]


def seeds(tmp_path: Path, url: str) -> str:
    path = tmp_path / "seeds.txt"
    path.write_text(url + "\n")
    return str(path)


def hold(db: str) -> subprocess.Popen[str]:
    """Another process holding ``db``'s run lock (for 60 s, or until killed)."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; sys.path.insert(0, sys.argv[2]); from crawler.lock import RunLock\n"
         "with RunLock(sys.argv[1]):\n print('locked', flush=True); time.sleep(60)",
         db, str(ROOT_DIR)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_crawl_on_a_locked_database_exits_75(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    with SiteServer() as site, RunLock(db):
        site.fallback = html_handler("<p>x</p>")
        result = CliRunner().invoke(main, [seeds(tmp_path, site.url), "--db", db, *FAST])
        assert site.hits == []
    assert result.exit_code == 75
    assert "in use by another crawl (pid" in result.stderr
    with pytest.raises(DatabaseLocked), RunLock(db), RunLock(db):
        pass


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    holder = hold(db)
    with pytest.raises(DatabaseLocked):
        RunLock(db).__enter__()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(10)
    assert holder.stdout is not None
    holder.stdout.close()
    with RunLock(db):  # the OS released the dead holder's lock
        pass


def test_a_running_crawl_is_seen_without_taking_its_lock(tmp_path: Path) -> None:
    """``crawl_running`` reads the kernel's list of locks, and sees a crawl in another
    process, also while a second process waits for the same lock."""
    db = str(tmp_path / "x.db")
    assert crawl_running(db) is False  # no lock file yet
    holder = hold(db)
    waiter = subprocess.Popen(  # a blocking flock: a "->" line in /proc/locks
        [sys.executable, "-c", "import fcntl, sys; fcntl.flock(open(sys.argv[1]), fcntl.LOCK_EX)",
         db + ".lock"])  # fmt: skip
    try:
        for _ in range(50):
            assert crawl_running(db)
            time.sleep(0.01)
        with pytest.raises(DatabaseLocked):
            RunLock(db).__enter__()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        assert holder.stdout is not None
        holder.stdout.close()
        waiter.wait(10)
    assert crawl_running(db) is False
    assert crawl_running(str(tmp_path / "other.db")) is False


def test_max_time_ends_the_run_cleanly(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(500))
    with SiteServer(latency_s=0.05) as site:
        site.routes = {"/": html_handler(links)}
        site.fallback = html_handler("<p>leaf</p>")
        started = time.monotonic()
        report = crawler.run([site.url + "/"], Settings(db=db, concurrency=2, per_host=2,
                             delay=0, workers=1, progress=False, sitemaps=False,
                             max_time="1s"))  # fmt: skip
        elapsed = time.monotonic() - started
    assert (report.status, report.reason) == ("finished", "max-time")
    assert 0 < report.pages < 500 and elapsed < 10
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        assert connection.execute("SELECT status, reason FROM runs").fetchone() == (
            "finished", "max-time")  # fmt: skip


def test_runs_of_dead_processes_are_closed_as_interrupted(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    with SiteServer() as site:
        site.fallback = html_handler("<p>x</p>")
        crawler.run([site.url + "/"], Settings(db=db, workers=1, progress=False, sitemaps=False))
        with (
            contextlib.closing(sqlite3.connect(db)) as connection,
            connection,
        ):  # as if a run had been killed mid-way, before it could count what it stored
            connection.execute("UPDATE runs SET status = 'running', ended_at = NULL, "
                               "pages_ok = 0, pages_failed = 0, bytes = 0")  # fmt: skip
            stored = connection.execute("SELECT count(*), sum(body_bytes) FROM pages").fetchone()
        crawler.run([site.url + "/"], Settings(db=db, workers=1, progress=False, sitemaps=False))
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        rows = connection.execute("SELECT id, status, reason FROM runs ORDER BY id").fetchall()
        counted = connection.execute(
            "SELECT pages_ok + pages_failed, bytes FROM runs WHERE id = 1"
        ).fetchone()
    assert rows == [(1, "interrupted", "process died"), (2, "finished", "done")]
    assert counted == stored and stored[0] > 0  # counted from the pages it stored


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("50m", 3000),
        ("1h30m", 5400),
        ("2d", 172800),
        ("0.5h", 1800),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "10x", "1h-5m", "ten"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ConfigError, match="not a duration"):
        parse_duration(text, "--max-time")


def test_every_runs_on_a_schedule_and_picks_up_new_seeds(tmp_path: Path) -> None:
    db = str(tmp_path / "e.db")
    with SiteServer() as first, SiteServer() as second:
        for site in (first, second):
            site.fallback = html_handler("<title>t</title><p>page</p>")
        seeds_file = seeds(tmp_path, first.url + "/")
        crawl = subprocess.Popen(
            [sys.executable, "-m", "crawler", seeds_file, "--db", db, *FAST, "--every", "1s",
             "--max-interval", "0", "--no-progress"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(first.paths()) < 2:
            time.sleep(0.1)
        with open(seeds_file, "a") as handle:  # a seed added between runs is crawled next
            handle.write(second.url + "/\n")
        while time.monotonic() < deadline and not (second.paths() and finished_runs(db) >= 3):
            time.sleep(0.1)
        crawl.send_signal(signal.SIGTERM)
        _, err = crawl.communicate(timeout=30)
    assert crawl.returncode == 143, err
    assert first.paths().count("/") >= 2  # every run refetches (all due: --max-interval 0)
    assert "/" in second.paths()
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        runs = connection.execute("SELECT status FROM runs ORDER BY id").fetchall()
    assert len(runs) >= 3 and all(status == "finished" for (status,) in runs[:3])


def finished_runs(db: str) -> int:
    try:
        with (
            contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection,
            connection,
        ):
            return int(
                connection.execute(
                    "SELECT count(*) FROM runs WHERE status = 'finished'"
                ).fetchone()[0]
            )
    except sqlite3.Error:
        return 0
