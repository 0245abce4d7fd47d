"""The acceptance check of crash safety and incremental recrawl, against nginx.

    python bench/resume_check.py [--pages 3000] [--kills 5] [--seed 1]

1. Generates a static site (bench/sitegen.py) and serves it with nginx on 127.0.0.1, the
   access log on (`STATUS METHOD URI` per request).
2. Starts `crawl` on it and kills it with SIGKILL at a random moment, `--kills` times, then
   runs it to the end. Checks: every page of the site's urls.txt stored exactly once,
   nothing else stored, `PRAGMA integrity_check` = ok, the killed runs recorded as
   interrupted; reports how many page requests the whole thing took (pages + refetches).
3. Runs it again with every page due (`--max-interval 0`): counts, from nginx's log, how many
   page requests were answered 304, and checks that no page got a new version.
4. Starts two crawls on one database at once: the second must exit 75.
Prints a markdown section (and writes it into bench/RESULTS.md with `--write`).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import benchlib
from benchlib import WORK_DIR, free_port
from nginx import Nginx
from sitegen import ensure_site

FLAGS = ["--concurrency", "16", "--per-host", "16", "--delay", "0", "--no-progress", "-q"]


def crawl(seeds: Path, db: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), *FLAGS, *extra],
        env=benchlib.repo_env(),
    )


def stored_pages(db: Path) -> int:
    try:
        with (
            contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection,
            connection,
        ):
            return int(connection.execute("SELECT count(*) FROM pages").fetchone()[0])
    except sqlite3.Error:
        return 0


def page_requests(log: Path) -> collections.Counter[str]:
    """Status -> count of GET requests for pages (robots.txt and sitemaps left out)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines():
        status, _, uri = line.split(" ", 2)
        if not uri.startswith(("/robots.txt", "/sitemap")):
            counts[status] += 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    port = free_port(18092)
    base = f"http://127.0.0.1:{port}"
    site = WORK_DIR / f"site-{args.pages}-s{args.seed}-p{port}"
    ensure_site(site, args.pages, base, args.seed)
    expected = set((site / "urls.txt").read_text().split())
    run_dir = WORK_DIR / "resume-check"
    run_dir.mkdir(parents=True, exist_ok=True)
    db, seeds, log = run_dir / "r.db", run_dir / "seeds.txt", run_dir / "access.log"
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), log):
        path.unlink(missing_ok=True)
    seeds.write_text(base + "/index.html\n")
    lines = []
    with Nginx(site, port, access_log=log):
        # -- kill -9, N times, then finish ------------------------------------------------
        kills = []
        # each kill when the stored pages reach a random target, spread over the crawl, so
        # that every kill lands while work is left (polled every 20 ms)
        for _ in range(args.kills):
            before = stored_pages(db)
            target = before + rng.randint(50, max(60, (len(expected) - before) // (args.kills)))
            proc = crawl(seeds, db)
            started_kill = time.monotonic()
            while proc.poll() is None and stored_pages(db) < target:
                time.sleep(0.02)
            wait_s = time.monotonic() - started_kill
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills.append((round(wait_s, 2), before, stored_pages(db)))
        started = time.monotonic()
        final = crawl(seeds, db)
        code = final.wait()
        with contextlib.closing(sqlite3.connect(db)) as connection, connection:
            urls = [u for (u,) in connection.execute("SELECT url FROM pages")]
            integrity = connection.execute("PRAGMA integrity_check").fetchone()[0]
            runs = connection.execute("SELECT status, reason FROM runs ORDER BY id").fetchall()
            hashes = dict(connection.execute("SELECT url, content_hash FROM pages"))
        requests = page_requests(log)
        crash_ok = (
            code == 0
            and len(urls) == len(set(urls))
            and set(urls) == expected
            and integrity == "ok"
            and runs[: args.kills] == [("interrupted", "process died")] * args.kills
            and runs[-1] == ("finished", "done")
        )
        lines += [
            f"Site: {len(expected)} pages (bench/sitegen.py, nginx). {args.kills} x SIGKILL, each "
            f"when the stored pages reach a random target, then a run to the end (exit {code}, "
            f"{time.monotonic() - started:.1f} s).",
            "",
            "| kill | after s | pages stored before | pages stored after |",
            "|---:|---:|---:|---:|",
            *(f"| {i + 1} | {w} | {b} | {a} |" for i, (w, b, a) in enumerate(kills)),
            "",
            f"- pages stored: {len(urls)} (distinct {len(set(urls))}); expected "
            f"{len(expected)}; missing {len(expected - set(urls))}, extra "
            f"{len(set(urls) - expected)}",
            f"- `PRAGMA integrity_check`: {integrity}; runs: "
            f"{', '.join(f'{s} ({r})' for s, r in runs)}",
            f"- page requests served by nginx over all {args.kills + 1} runs: "
            f"{sum(requests.values())} for {len(expected)} pages "
            f"({sum(requests.values()) - len(expected)} refetched: in flight or not yet "
            "committed at a kill)",
            f"- **{'PASS' if crash_ok else 'FAIL'}**",
            "",
        ]
        # -- a second run on the unchanged site -------------------------------------------
        log.write_text("")
        os.kill(nginx_pid(port), signal.SIGUSR1)  # reopen the log file
        time.sleep(0.5)
        second = crawl(seeds, db, "--max-interval", "0")
        code2 = second.wait()
        requests = page_requests(log)
        total = sum(requests.values())
        with contextlib.closing(sqlite3.connect(db)) as connection, connection:
            changed = sum(
                1
                for url, h in connection.execute("SELECT url, content_hash FROM pages")
                if hashes.get(url) != h
            )
            versions = connection.execute(
                "SELECT count(*) FROM pages WHERE previous_hash IS NOT NULL"
            ).fetchone()[0]
            unchanged = connection.execute(
                "SELECT pages_unchanged FROM runs ORDER BY id DESC LIMIT 1"
            ).fetchone()[0]
        ratio = requests["304"] / total if total else 0.0
        recrawl_ok = code2 == 0 and ratio >= 0.95 and changed == 0 and versions == 0
        lines += [
            "Second run, every page due (`--max-interval 0`), site unchanged: "
            f"{total} page requests, {requests['304']} answered 304 (**{ratio:.1%}**), "
            f"statuses {dict(requests)}; pages_unchanged {unchanged}; content hashes "
            f"changed {changed}, new versions {versions}. "
            f"**{'PASS' if recrawl_ok else 'FAIL'}**",
            "",
        ]
        # -- overlapping runs -------------------------------------------------------------
        first = crawl(seeds, db, "--max-interval", "0")
        time.sleep(1.0)
        overlap = crawl(seeds, db)
        code_overlap = overlap.wait()
        first.wait()
        lines.append(
            f"Two overlapping runs: the second exited {code_overlap} "
            f"(**{'PASS' if code_overlap == 75 else 'FAIL'}**)."
        )
    body = "\n".join(lines)
    print(body)
    if args.write:
        benchlib.write_section(
            benchlib.BENCH_DIR / "RESULTS.md",
            "resume-check",
            "## Crash safety and incremental recrawl against nginx\n\n"
            f"Command: `python bench/resume_check.py --pages {args.pages} --kills {args.kills}`"
            "\n\n" + body,
        )
    return 0 if crash_ok and recrawl_ok and code_overlap == 75 else 1


def nginx_pid(port: int) -> int:
    return int((WORK_DIR / f"nginx-{port}" / "nginx.pid").read_text())


if __name__ == "__main__":
    sys.exit(main())
