"""Whole crawls of two versions of the crawler, alternated: an A/B test of a change.

    python bench/ab_bench.py REV [--pairs 10] [--site-dir DIR [--start index.html]]
        [--pages 10000] [--query WORDS]

REV (a commit, a branch, ``HEAD~2``) is checked out as a git worktree under bench/work/ab-*
(its bytecode compiled and its numba kernels cached, as ``crawl_bench`` prepares ours); the
working tree of this repository is B. Each pair runs A and B (``python -m crawler`` with the
benchmark's flags, each from its own tree, a fresh database each), in turn AB, BA, AB... so
that a drift of the machine's speed falls on both. Reports each run's pages (status 200), per
version the median wall time and machine CPU (``/proc/stat`` busy time over the run: every
process of the crawl, nginx and the kernel's share), and over the pairs how often B was faster
and the median of B/A.

On this project's 2-core machines one crawl's wall time moves by ±10 % run to run: ten pairs
resolve a few per cent where three runs of each do not. Served by nginx (bench/nginx.py): an
existing directory with ``--site-dir`` (the Python docs, say), else the synthetic site of
``--pages`` pages (bench/sitegen.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib
from benchlib import REPO_DIR, WORK_DIR
from nginx import Nginx
from sitegen import ensure_site

DEFAULT_QUERY = "python asyncio event loop"


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all but idle and iowait)."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def worktree(rev: str) -> Path:
    """A prepared checkout of ``rev`` (made once per commit, reused after)."""
    commit = subprocess.run(
        ["git", "-C", str(REPO_DIR), "rev-parse", "--short", rev],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    tree = WORK_DIR / f"ab-{commit}"
    if not tree.exists():
        subprocess.run(
            ["git", "-C", str(REPO_DIR), "worktree", "add", "--detach", str(tree), commit],
            check=True, capture_output=True,
        )  # fmt: skip
    prepare(tree)
    return tree


def prepare(tree: Path) -> None:
    """Leave ``tree`` as ``benchlib.prepare_ours`` leaves the repository (bytecode, the
    dataclass memo, numba's cache, the kernels compiled ahead of time): both versions start
    from what an installed crawler has (with ``PYTHONDONTWRITEBYTECODE`` set, a tree never
    prepared would compile every module at every start)."""
    benchlib.prepare_ours(sys.executable, tree)


def tree_env() -> dict[str, str]:
    """No PYTHONPATH: ``python -m crawler`` imports the tree it runs in (its working directory)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def crawl_once(tree: Path, seed: str, query: str) -> tuple[float, float, int]:
    """(wall s, machine busy s, pages stored with status 200) of one crawl of ``seed`` by the
    crawler in ``tree``."""
    run_dir = Path(tempfile.mkdtemp(dir=WORK_DIR, prefix="ab-run-"))
    try:
        (run_dir / "seeds.txt").write_text(seed + "\n")
        cmd = [sys.executable, "-m", "crawler", str(run_dir / "seeds.txt"),
               "--db", str(run_dir / "crawl.db"), "--concurrency", "64", "--per-host", "64",
               "--delay", "0", "--no-progress", "-q", "--query", query]  # fmt: skip
        busy, start = machine_busy_s(), time.perf_counter()
        done = subprocess.run(cmd, cwd=tree, env=tree_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
        wall, cpu = time.perf_counter() - start, machine_busy_s() - busy
        if done.returncode != 0:  # which version, why, and its database kept to look into
            kept = WORK_DIR / f"ab-failed-{run_dir.name}"
            shutil.copytree(run_dir, kept, dirs_exist_ok=True)
            raise SystemExit(f"the crawl of {tree} exited {done.returncode} (its run: {kept}):\n"
                             f"{done.stderr[-4000:]}")  # fmt: skip
        benchlib.wait_for_background()  # its detached warmer: not during the next crawl
        with sqlite3.connect(run_dir / "crawl.db") as db:
            (pages,) = db.execute("SELECT count(*) FROM pages WHERE status = 200").fetchone()
        return wall, cpu, pages
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def report(name: str, runs: list[tuple[float, float, int]]) -> str:
    walls = [run[0] for run in runs]
    cpus = [run[1] for run in runs]
    return (
        f"{name}: wall median {statistics.median(walls):.3f} s (min {min(walls):.3f}), "
        f"machine CPU median {statistics.median(cpus):.2f} s; runs "
        + " ".join(f"{w:.2f}" for w in walls)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="version A: a commit or branch (B: the working tree)")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--site-dir", type=Path, help="serve this directory as is")
    parser.add_argument("--start", default="index.html", help="with --site-dir: the seed page")
    parser.add_argument("--pages", type=int, default=10_000, help="else: the synthetic site")
    parser.add_argument("--query", default=DEFAULT_QUERY)
    args = parser.parse_args(argv)
    trees = {"A": worktree(args.rev), "B": REPO_DIR}
    prepare(REPO_DIR)
    port = benchlib.free_port(18400)
    if args.site_dir is not None:
        root, seed = args.site_dir, f"http://127.0.0.1:{port}/{args.start}"
    else:
        root = WORK_DIR / f"site-{args.pages}-s1-p{port}"
        seed = str(ensure_site(root, args.pages, f"http://127.0.0.1:{port}", 1)["seed_url"])
    runs: dict[str, list[tuple[float, float, int]]] = {"A": [], "B": []}
    with Nginx(root, port):
        for pair in range(args.pairs):
            for name in ("A", "B") if pair % 2 == 0 else ("B", "A"):
                runs[name].append(crawl_once(trees[name], seed, args.query))
            (a_wall, _, a_pages), (b_wall, _, b_pages) = runs["A"][-1], runs["B"][-1]
            print(f"[pair {pair + 1}] A {a_wall:.2f} s ({a_pages} pages), "
                  f"B {b_wall:.2f} s ({b_pages} pages)", flush=True)  # fmt: skip
    print(report(f"A ({args.rev})", runs["A"]))
    print(report("B (working tree)", runs["B"]))
    for what, index in (("wall", 0), ("machine CPU", 1)):
        pairs = list(zip(runs["A"], runs["B"], strict=True))
        faster = sum(b[index] < a[index] for a, b in pairs)
        ratio = statistics.median(b[index] / a[index] for a, b in pairs)
        print(f"{what}: B lower in {faster} of {len(pairs)} pairs, median B/A {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
