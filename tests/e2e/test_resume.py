"""Crash-safe, resumable, incremental crawls, checked black-box through the ``crawl`` command.

Every crawl here is a real subprocess (``python -m crawler``) on a real SQLite file, against
local aiohttp servers (``tests.sites.PageSite``) whose request records count every fetch:
- resume: after ``kill -9`` (five times), SIGTERM or SIGINT, re-running the same command
  continues, committed pages are never fetched again, and the database ends complete;
- incremental recrawl: a later run fetches only due pages, with ``If-None-Match`` /
  ``If-Modified-Since``; unchanged pages double their interval, changed ones halve it and
  keep the old hash in ``previous_hash``;
- cron: nothing due means no requests, new seeds are picked up, ``--max-time`` ends cleanly,
  a second crawl on a busy database exits 75; ``crawl stats`` / ``crawl runs`` report.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.proc import ROOT as ROOT_DIR
from tests.proc import child_env
from tests.sites import Hit, PageSite, SiteServer

ROOT = ROOT_DIR
FAST = ["--delay", "0", "--workers", "1", "--no-sitemaps"]
EXIT_LOCKED, EXIT_SIGINT, EXIT_SIGTERM = 75, 130, 143


# -- helpers: the crawl as a subprocess, the database read-only ------------------------------
def _env() -> dict[str, str]:
    return child_env()


def seeds_file(tmp_path: Path, *urls: str) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_text("".join(url + "\n" for url in urls))
    return path


def crawl_args(seeds: Path, db: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), *FAST, *flags]


def crawl(
    seeds: Path, db: Path, *flags: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run one crawl to its end; returns the finished process (stdout, stderr, returncode)."""
    return subprocess.run(crawl_args(seeds, db, *flags), capture_output=True, text=True,
                          env=_env(), timeout=timeout)  # fmt: skip


def crawl_ok(seeds: Path, db: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    done = crawl(seeds, db, *flags)
    assert done.returncode == 0, f"crawl exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


class Crawl:
    """A crawl subprocess in its own session (so its parse workers can be cleaned up after a
    ``kill -9`` of the crawl process itself); output goes to files, never a full pipe."""

    def __init__(self, tmp_path: Path, seeds: Path, db: Path, *flags: str) -> None:
        self.out = tmp_path / f"crawl-{time.monotonic_ns()}.out"
        self.err = self.out.with_suffix(".err")
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(crawl_args(seeds, db, *flags), stdout=out, stderr=err,
                                         env=_env(), start_new_session=True)  # fmt: skip

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.reap_group()

    def reap_group(self) -> None:
        """End what is left of the crawl's session (orphaned parse workers), by its id."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stderr(self) -> str:
        return self.err.read_text()[-3000:]

    def stdout(self) -> str:
        return self.out.read_text()


def rows(db: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run a query on a read-only connection (never a writer next to the crawl)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def count_pages(db: Path) -> int:
    """Pages committed so far; 0 while the database or its tables do not exist yet."""
    try:
        return rows(db, "SELECT count(*) FROM pages")[0][0]
    except sqlite3.OperationalError:
        return 0


def stored_urls(db: Path) -> set[str]:
    return {url for (url,) in rows(db, "SELECT url FROM pages")}


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def page_paths(site: PageSite, hits: list[Hit]) -> Counter[str]:
    """How many times each page of ``site`` was requested in ``hits``."""
    return Counter(h.path for h in site.page_hits(hits))


def run_rows(db: Path) -> list[tuple[Any, ...]]:
    return rows(db, "SELECT id, status, reason FROM runs ORDER BY id")


def last_run(db: Path, *columns: str) -> tuple[Any, ...]:
    return rows(db, f"SELECT {', '.join(columns)} FROM runs ORDER BY id DESC LIMIT 1")[0]


def page_column(db: Path, site: PageSite, column: str) -> dict[int, Any]:
    """``column`` of every stored page of ``site``, by page index."""
    return _by_page(site, rows(db, f"SELECT url, {column} FROM pages"))


def url_column(db: Path, site: PageSite, column: str) -> dict[int, Any]:
    """``column`` of the ``urls`` table for every URL of ``site``, by page index."""
    return _by_page(site, rows(db, f"SELECT url, {column} FROM urls"))


def every_page(site: PageSite, value: Any) -> dict[int, Any]:
    return dict.fromkeys(range(site.n), value)


def _by_page(site: PageSite, pairs: list[tuple[Any, ...]]) -> dict[int, Any]:
    out = {}
    for url, value in pairs:
        index = site.index_of_url(url)
        if index is not None:
            out[index] = value
    return out


def assert_complete(db: Path, site: PageSite) -> None:
    """Every page of the site stored exactly once, 200 with its title; the db intact."""
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert rows(db, "SELECT url, count(*) FROM pages GROUP BY url HAVING count(*) > 1") == []
    stored = rows(db, "SELECT url, status, title FROM pages")
    urls = [url for url, _, _ in stored]
    assert len(urls) == len(set(urls))
    missing, extra = site.urls() - set(urls), set(urls) - site.urls()
    assert not missing and not extra, (sorted(missing)[:5], sorted(extra)[:5])
    titles = {url: site.title(site.index_of_url(url) or 0) for url in urls}
    assert [(u, s, t) for u, s, t in stored if s != 200 or t != titles[u]] == []


# -- resume after kill -9, SIGTERM, SIGINT ---------------------------------------------------
KILLS = 5
BIG_SITE_PAGES = 2400
CONCURRENCY = 16
WRITE_BATCH = 256  # pages the engine may hold before one committing transaction


def kill_9_at_random(
    run: Crawl, server: SiteServer, site: PageSite, db: Path, rng: random.Random
) -> None:
    """``kill -9`` the crawl at a random moment once it has committed pages of its own."""
    committed, mark = count_pages(db), len(server.hits)
    requests = rng.randint(150, 400)  # the run's page requests before the kill, at least

    def ready() -> bool:
        if not run.alive():
            return True
        return count_pages(db) > committed and len(site.page_hits(server.hits[mark:])) >= requests

    try:
        wait_for(ready, "the run to store pages")
        assert run.alive(), (
            f"the run ended (exit {run.proc.returncode}) before its kill -9: {run.stderr()}"
        )
        time.sleep(rng.uniform(0, 0.05))
        run.proc.kill()
        assert run.proc.wait(30) == -signal.SIGKILL
    finally:
        run.reap_group()


def test_five_kill_9s_then_a_clean_run_store_every_page_once(tmp_path: Path) -> None:
    site = PageSite(BIG_SITE_PAGES, links=4, seed=11)
    db = tmp_path / "kill.db"
    flags = ["--concurrency", str(CONCURRENCY), "--per-host", str(CONCURRENCY)]
    rng = random.Random(20251129)
    with SiteServer(latency_s=0.003) as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        snapshots: list[tuple[int, set[str]]] = []  # (hits so far, URLs committed) at each kill
        for kill in range(1, KILLS + 1):
            before = count_pages(db)
            kill_9_at_random(Crawl(tmp_path, seeds, db, *flags), server, site, db, rng)
            time.sleep(0.05)  # a request cut off by the kill lands in server.hits now
            snapshots.append((len(server.hits), stored_urls(db)))
            assert len(snapshots[-1][1]) > before, f"run {kill} committed nothing"
        assert len(snapshots[-1][1]) < site.n, "the crawl was complete before the last kill"
        crawl_ok(seeds, db, *flags)
        hits = list(server.hits)

    assert_complete(db, site)
    # committed pages are never fetched again: after each kill, no later request for them
    for kill, (mark, committed) in enumerate(snapshots, start=1):
        later = {site.origin + h.path for h in site.page_hits(hits[mark:])}
        again = later & committed
        assert not again, f"{len(again)} pages committed before kill {kill} fetched again"
    # so the kills cost at most what was in flight or not yet written at each kill
    requests = len(site.page_hits(hits))
    assert requests <= site.n + KILLS * (4 * CONCURRENCY + WRITE_BATCH), requests
    assert run_rows(db) == [
        *[(k, "interrupted", "process died") for k in range(1, KILLS + 1)],
        (KILLS + 1, "finished", "done"),
    ]
    # each killed run counted by the next from what it stored: together, every page once
    counted = rows(db, "SELECT pages_ok + pages_failed FROM runs ORDER BY id")
    assert all(n > 0 for (n,) in counted[:KILLS]) and sum(n for (n,) in counted) == site.n
    # the queue is drained and no URL is left leased to a dead run
    states = url_column(db, site, "state")
    assert set(states) == set(range(site.n)) and set(states.values()) == {"done"}
    assert rows(db, "SELECT count(*) FROM urls WHERE lease IS NOT NULL") == [(0,)]
    assert rows(db, "SELECT count(*) FROM urls WHERE state = 'queued'") == [(0,)]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, EXIT_SIGTERM),
                         (signal.SIGINT, EXIT_SIGINT)], ids=["SIGTERM", "SIGINT"])  # fmt: skip
def test_a_signal_stops_cleanly_and_the_rerun_fetches_each_page_once(
    tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    site = PageSite(300, links=5, seed=3)
    db = tmp_path / "sig.db"
    flags = ["--concurrency", "8", "--per-host", "8"]
    with SiteServer(latency_s=0.03) as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        first = Crawl(tmp_path, seeds, db, *flags)
        try:
            wait_for(lambda: len(site.page_hits(server.hits)) >= 60 or not first.alive(),
                     "60 page requests")  # fmt: skip
            assert first.alive(), first.stderr()
            first.signal(signum)
            assert first.wait(60) == code, first.stderr()
        finally:
            first.reap_group()
        interrupted_hits = len(site.page_hits(server.hits))
        assert run_rows(db) == [(1, "interrupted", f"signal {signum.name}")]
        stored = count_pages(db)
        assert 60 <= stored == interrupted_hits < site.n  # in-flight requests were stored
        crawl_ok(seeds, db, *flags)
        fetched = page_paths(site, server.hits)

    assert fetched == Counter({path: 1 for path in site.paths()})
    assert_complete(db, site)
    assert run_rows(db) == [(1, "interrupted", f"signal {signum.name}"), (2, "finished", "done")]


# -- incremental recrawl: conditional GET, intervals -----------------------------------------
def test_conditional_get_unchanged_then_changed_pages(tmp_path: Path) -> None:
    site = PageSite(60, links=4, seed=5, etag=True, last_modified=True)
    db = tmp_path / "cond.db"
    flags = ["--concurrency", "8", "--per-host", "8", "--recrawl-after", "1s"]
    changed = {7, 23, 41}
    with SiteServer() as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")

        crawl_ok(seeds, db, *flags)
        assert page_paths(site, server.hits) == Counter({path: 1 for path in site.paths()})
        assert_complete(db, site)
        hashes_1 = page_column(db, site, "content_hash")
        etags = page_column(db, site, "etag")
        assert all(etags[i] and site.etag_of(i).strip('"') in etags[i] for i in range(site.n))
        assert all(page_column(db, site, "last_modified").values())
        assert url_column(db, site, "interval_s") == every_page(site, pytest.approx(1.0))

        time.sleep(1.3)  # every page is due again
        mark = len(server.hits)
        started = time.time()
        crawl_ok(seeds, db, *flags)
        run_2 = site.page_hits(server.hits[mark:])
        assert Counter(h.path for h in run_2) == Counter({path: 1 for path in site.paths()})
        not_modified = sum(h.status == 304 for h in run_2)
        assert not_modified >= 0.95 * len(run_2), Counter(h.status for h in run_2)
        for hit in run_2:
            assert hit.header("If-None-Match") == site.etag_of(site.index(hit.path)), hit
        assert last_run(db, "status", "pages_unchanged") == ("finished", site.n)
        assert page_column(db, site, "content_hash") == hashes_1
        assert set(page_column(db, site, "previous_hash").values()) == {None}
        assert url_column(db, site, "interval_s") == every_page(site, pytest.approx(2.0))
        due = url_column(db, site, "next_fetch_at")
        # due again one interval (2 s) after its fetch in run 2 (a second of rounding allowed)
        assert all(started + 1 <= due[i] <= time.time() + 2 for i in range(site.n)), due

        site.change(*changed)
        time.sleep(2.3)  # past the doubled interval
        mark = len(server.hits)
        crawl_ok(seeds, db, *flags)
        run_3 = site.page_hits(server.hits[mark:])
        assert Counter(h.path for h in run_3) == Counter({path: 1 for path in site.paths()})
        assert {site.index(h.path) for h in run_3 if h.status == 200} == changed
        assert {h.status for h in run_3} == {200, 304}

    assert last_run(db, "status", "pages_unchanged") == ("finished", site.n - len(changed))
    previous = page_column(db, site, "previous_hash")
    hashes_3 = page_column(db, site, "content_hash")
    texts = page_column(db, site, "text")
    for i in range(site.n):
        if i in changed:
            assert previous[i] == hashes_1[i] and hashes_3[i] != hashes_1[i]
            assert "edition 1 of page" in texts[i] and "edition 0" not in texts[i]
        else:
            assert previous[i] is None and hashes_3[i] == hashes_1[i]
            assert "edition 0 of page" in texts[i]
    changed_at = page_column(db, site, "changed_at")
    assert all(changed_at[i] is not None for i in changed)
    intervals = url_column(db, site, "interval_s")
    expected = {i: pytest.approx(1.0 if i in changed else 4.0) for i in range(site.n)}
    assert intervals == expected  # halved on change (2 -> 1), doubled again if not (2 -> 4)


def test_last_modified_alone_gives_if_modified_since(tmp_path: Path) -> None:
    site = PageSite(30, links=3, seed=6, last_modified=True)
    db = tmp_path / "ims.db"
    flags = ["--concurrency", "8", "--per-host", "8", "--recrawl-after", "1s"]
    with SiteServer() as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        crawl_ok(seeds, db, *flags)
        time.sleep(1.3)
        mark = len(server.hits)
        crawl_ok(seeds, db, *flags)
        run_2 = site.page_hits(server.hits[mark:])

    assert len(run_2) == site.n
    for hit in run_2:
        assert hit.header("If-Modified-Since") == site.last_modified_of(site.index(hit.path)), hit
        assert hit.header("If-None-Match") is None  # no ETag was ever sent
    assert sum(h.status == 304 for h in run_2) >= 0.95 * len(run_2)
    assert last_run(db, "pages_unchanged") == (site.n,)
    assert set(page_column(db, site, "previous_hash").values()) == {None}


def test_without_validators_an_identical_200_counts_as_unchanged(tmp_path: Path) -> None:
    site = PageSite(40, links=4, seed=8)  # no ETag, no Last-Modified
    db = tmp_path / "plain.db"
    flags = ["--concurrency", "8", "--per-host", "8", "--recrawl-after", "1s"]
    with SiteServer() as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        crawl_ok(seeds, db, *flags)
        hashes_1 = page_column(db, site, "content_hash")
        time.sleep(1.3)
        mark = len(server.hits)
        crawl_ok(seeds, db, *flags)
        run_2 = site.page_hits(server.hits[mark:])

    assert Counter(h.path for h in run_2) == Counter({path: 1 for path in site.paths()})
    assert {h.status for h in run_2} == {200}
    assert all(h.header("If-None-Match") is None and h.header("If-Modified-Since") is None
               for h in run_2)  # fmt: skip
    assert last_run(db, "status", "pages_unchanged") == ("finished", site.n)
    assert set(page_column(db, site, "previous_hash").values()) == {None}
    assert page_column(db, site, "content_hash") == hashes_1
    assert url_column(db, site, "interval_s") == every_page(site, pytest.approx(2.0))
    assert_complete(db, site)


def test_hashes_of_an_older_version_still_tell_unchanged_pages(tmp_path: Path) -> None:
    """A database whose pages carry the unprefixed BLAKE2b-128 digests that versions before
    BLAKE3 stored: a recrawl recognises the unchanged bodies by them, keeps them, and gives
    a page that changed a ``b3:`` hash (the old one kept as ``previous_hash``)."""
    site = PageSite(30, links=3, seed=10)  # no validators: only the hash tells
    db = tmp_path / "old.db"
    flags = ["--concurrency", "8", "--per-host", "8", "--recrawl-after", "1s", "--store-body"]
    with SiteServer() as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        crawl_ok(seeds, db, *flags)
        assert all(h.startswith("b3:") for h in page_column(db, site, "content_hash").values())
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            for url, body in conn.execute("SELECT url, body FROM pages").fetchall():
                old = hashlib.blake2b(zlib.decompress(body), digest_size=16).hexdigest()
                conn.execute("UPDATE pages SET content_hash = ? WHERE url = ?", (old, url))
        old_hashes = page_column(db, site, "content_hash")
        site.change(3, 11)
        time.sleep(1.3)
        crawl_ok(seeds, db, *flags)

    assert last_run(db, "status", "pages_unchanged") == ("finished", site.n - 2)
    hashes, previous = page_column(db, site, "content_hash"), page_column(db, site, "previous_hash")
    for i in range(site.n):
        if i in (3, 11):
            assert hashes[i].startswith("b3:") and previous[i] == old_hashes[i]
        else:
            assert hashes[i] == old_hashes[i] and previous[i] is None


def test_max_interval_caps_the_doubling(tmp_path: Path) -> None:
    site = PageSite(20, links=3, seed=9, etag=True)
    db = tmp_path / "cap.db"
    flags = ["--concurrency", "8", "--per-host", "8", "--recrawl-after", "1s",
             "--max-interval", "1s"]  # fmt: skip
    with SiteServer() as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        crawl_ok(seeds, db, *flags)
        time.sleep(1.3)
        mark = len(server.hits)
        crawl_ok(seeds, db, *flags)
        run_2 = site.page_hits(server.hits[mark:])

    assert len(run_2) == site.n and {h.status for h in run_2} == {304}
    assert last_run(db, "pages_unchanged") == (site.n,)
    assert url_column(db, site, "interval_s") == every_page(site, pytest.approx(1.0))


# -- cron: nothing due, new seeds, --max-time, a busy database -------------------------------
def test_a_rerun_with_nothing_due_makes_no_requests(tmp_path: Path) -> None:
    site = PageSite(30, links=3, seed=10, etag=True)
    db = tmp_path / "due.db"
    flags = ["--concurrency", "8", "--per-host", "8"]  # default --recrawl-after: 1d
    with SiteServer() as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        crawl_ok(seeds, db, *flags)
        assert len(site.page_hits(server.hits)) == site.n
        mark = len(server.hits)
        crawl_ok(seeds, db, *flags)
        run_2 = server.hits[mark:]

    assert site.page_hits(run_2) == [], [h.path for h in run_2]
    assert run_2 == [], "robots.txt is cached in the database for a day"
    assert run_rows(db) == [(1, "finished", "done"), (2, "finished", "done")]
    due = url_column(db, site, "next_fetch_at")
    assert all(due[i] > time.time() + 86_400 - 600 for i in range(site.n))  # a day from now
    assert_complete(db, site)


def test_new_seeds_are_crawled_and_old_pages_are_not_refetched(tmp_path: Path) -> None:
    one = PageSite(30, links=3, seed=12)
    two = PageSite(25, links=3, seed=13)
    db = tmp_path / "seeds.db"
    flags = ["--concurrency", "8", "--per-host", "8"]
    with SiteServer() as server_1, SiteServer() as server_2:
        one.serve(server_1)
        two.serve(server_2)
        seeds = seeds_file(tmp_path, server_1.url + "/")
        crawl_ok(seeds, db, *flags)
        assert page_paths(one, server_1.hits) == Counter({p: 1 for p in one.paths()})
        assert server_2.hits == []
        with open(seeds, "a") as handle:
            handle.write(server_2.url + "/\n")
        mark = len(server_1.hits)
        crawl_ok(seeds, db, *flags)
        again = one.page_hits(server_1.hits[mark:])
        fetched_2 = page_paths(two, server_2.hits)

    assert again == [], [h.path for h in again]
    assert fetched_2 == Counter({p: 1 for p in two.paths()})
    assert stored_urls(db) == one.urls() | two.urls()
    assert rows(db, "SELECT url, count(*) FROM pages GROUP BY url HAVING count(*) > 1") == []


def test_max_time_ends_with_exit_0_and_the_next_run_completes(tmp_path: Path) -> None:
    site = PageSite(40, links=3, seed=14)
    db = tmp_path / "time.db"
    flags = ["--concurrency", "2", "--per-host", "2"]
    with SiteServer(latency_s=0.2) as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        started = time.monotonic()
        first = Crawl(tmp_path, seeds, db, *flags, "--max-time", "2s")
        try:
            wait_for(lambda: len(site.page_hits(server.hits)) >= 2 or not first.alive(),
                     "the first requests")  # fmt: skip
            # a second crawl on the busy database (an overlapping cron run) exits 75 at once
            busy = crawl(seeds, db, *flags)
            assert busy.returncode == EXIT_LOCKED, busy.stderr
            assert first.alive(), "the first run should still be going"
            assert first.wait(30) == 0, first.stderr()
        finally:
            first.reap_group()
        elapsed = time.monotonic() - started
        first_pages = count_pages(db)
        assert 2 <= first_pages < site.n
        assert last_run(db, "status", "reason") == ("finished", "max-time")
        crawl_ok(seeds, db, *flags)
        fetched = page_paths(site, server.hits)

    assert 2 <= elapsed < 2 + 6, elapsed
    assert fetched == Counter({path: 1 for path in site.paths()})
    assert_complete(db, site)
    assert run_rows(db)[-1] == (2, "finished", "done")


# -- reports -----------------------------------------------------------------------------------
def test_stats_and_runs_commands(tmp_path: Path) -> None:
    site = PageSite(37, links=3, seed=15)
    db = tmp_path / "stats.db"
    with SiteServer() as server:
        site.serve(server)
        seeds = seeds_file(tmp_path, server.url + "/")
        crawl_ok(seeds, db, "--concurrency", "8", "--per-host", "8")
        crawl_ok(seeds, db, "--concurrency", "8", "--per-host", "8")

    stats = subprocess.run([sys.executable, "-m", "crawler", "stats", str(db)],
                           capture_output=True, text=True, env=_env(), timeout=60)  # fmt: skip
    assert stats.returncode == 0, stats.stderr
    lines = stats.stdout.lower().splitlines()
    # tolerant of layout: the URL states with their counts, the pages, the runs
    assert any(re.search(r"done\D{0,20}\b37\b|\b37\b\D{0,20}done", line) for line in lines), lines
    assert any("page" in line and re.search(r"\b37\b", line) for line in lines), lines
    assert any(re.search(r"\bruns?\b\D{0,20}\b2\b", line) for line in lines), lines

    history = subprocess.run([sys.executable, "-m", "crawler", "runs", str(db)],
                             capture_output=True, text=True, env=_env(), timeout=60)  # fmt: skip
    assert history.returncode == 0, history.stderr
    finished = [line for line in history.stdout.splitlines() if "finished" in line]
    assert len(finished) == 2 and re.search(r"\b37\b", finished[0]), history.stdout
