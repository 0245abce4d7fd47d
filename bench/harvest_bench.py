"""Harvest rate of focused crawling: on-topic pages per page fetched, `--query` vs plain BFS.

    python bench/harvest_bench.py [--budgets 250,500,1000] [--repeat 3] [--pages 5000]
        [--seed 1] [--query "astronomy telescope ..."] [--out bench/HARVEST_RESULTS.draft.md]

Starts bench/topicsite.py (aiohttp, 127.0.0.1) as a subprocess: `--pages` pages, ~10 % about
astronomy, linked mostly within their topic, the seed `/` a hub over all eight topics. Then,
for each repeat and each budget B, runs the `crawl` console script twice, one after the other:

- bfs:     crawl seeds.txt --db X --max-pages B --concurrency 8 --per-host 8 --delay 0
                 --no-progress --no-sitemaps
- focused: the same plus --query QUERY (BM25 `pages.score`, best-first frontier); skipped with
           a note while `crawl --help` has no `--query`.

A run's harvest is the number of pages it stored with status 200 whose path the ground truth
(`topicsite.TopicSite(pages, seed).on_topic_paths()`, checked against the server's
`/truth.json`) calls on-topic; the harvest rate is that over B. The markdown table reports
medians over the repeats, the focused / BFS ratio (target: >= 2x) and the best possible
harvest (min(B - 1, on-topic pages): the hub `/` is off-topic). Per run it also records the
wall time, the on-topic share of the first and second half of the stored pages (by row id,
about fetch order: a focused crawl that wanders off-topic late shows a falling share) and,
where `pages.score` exists, the median score of on-topic and off-topic pages. Written into a
section of `--out`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import benchlib
from benchlib import BENCH_DIR, WORK_DIR, RunResult, median
from topicsite import QUERY, TARGET, TopicSite

MODES = ("bfs", "focused")
DEFAULT_PORT = 18091
TARGET_RATIO = 2.0


@dataclass
class HarvestRun:
    """One crawl and what it harvested."""

    mode: str
    budget: int
    rep: int
    measured: RunResult
    rows: int = 0  # pages rows (any status)
    ok: int = 0  # status 200
    on_topic: int = 0  # status 200 and on-topic
    first_half: float = 0.0  # on-topic share of the first half of the 200 rows, by id
    second_half: float = 0.0
    score_on: float | None = None  # median pages.score of on-topic / off-topic 200 rows
    score_off: float | None = None
    max_depth: int = 0

    @property
    def harvest(self) -> float:
        return self.on_topic / self.budget


# ---------------------------------------------------------------- the site


class SiteServer:
    """bench/topicsite.py in a subprocess, on 127.0.0.1:port, for a `with` block."""

    def __init__(self, port: int, pages: int, seed: int, log: Path) -> None:
        self.port, self.pages, self.seed, self.log = port, pages, seed, log
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> SiteServer:
        script = str(BENCH_DIR / "topicsite.py")
        cmd = [sys.executable, script, "--port", str(self.port)]
        cmd += ["--pages", str(self.pages), "--seed", str(self.seed)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            benchlib.wait_for_port(self.port, timeout_s=30)
        except RuntimeError:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cpu_s(self) -> float:
        return benchlib.tree_cpu_s(self.proc.pid) if self.proc else 0.0

    def truth(self) -> set[str]:
        """The on-topic paths, rebuilt here and checked against the server's /truth.json."""
        local = TopicSite(self.pages, self.seed).on_topic_paths()
        url = f"http://127.0.0.1:{self.port}/truth.json"
        with urllib.request.urlopen(url, timeout=30) as resp:
            served = set(json.load(resp)["on_topic"])
        if served != local:
            raise RuntimeError("topicsite's /truth.json differs from the locally built site")
        return local


# ---------------------------------------------------------------- the crawler


def crawl_flags(budget: int, concurrency: int) -> list[str]:
    return [
        "--max-pages",
        str(budget),
        "--concurrency",
        str(concurrency),
        "--per-host",
        str(concurrency),
        "--delay",
        "0",
        "--no-progress",
        "--no-sitemaps",
    ]


def crawl_command(
    crawl: list[str], run_dir: Path, seed: str, budget: int, args: argparse.Namespace, mode: str
) -> list[str]:
    seeds = run_dir / "seeds.txt"
    seeds.write_text(seed + "\n")
    cmd = [*crawl, str(seeds), "--db", str(run_dir / "crawl.db")]
    cmd += crawl_flags(budget, args.concurrency)
    return cmd + (["--query", args.query] if mode == "focused" else [])


def count_harvest(run: HarvestRun, db: Path, truth: set[str]) -> None:
    """Fill `run` from the crawl's database."""
    if not db.exists():
        run.measured.notes.append("no database written")
        return
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(pages)")}
        score = "score" if "score" in columns else "NULL"
        rows = conn.execute(f"SELECT url, status, depth, {score} FROM pages ORDER BY id").fetchall()
    run.rows = len(rows)
    ok = [
        (urlsplit(url).path in truth, depth, s) for url, status, depth, s in rows if status == 200
    ]
    run.ok = len(ok)
    run.on_topic = sum(on for on, _, _ in ok)
    run.max_depth = max((depth for _, depth, _ in ok), default=0)
    half = len(ok) // 2
    if half:
        run.first_half = sum(on for on, _, _ in ok[:half]) / half
        run.second_half = sum(on for on, _, _ in ok[half:]) / (len(ok) - half)
    if score != "NULL":
        on_scores = [s for on, _, s in ok if on and s is not None]
        off_scores = [s for on, _, s in ok if not on and s is not None]
        run.score_on = median(on_scores) if on_scores else None
        run.score_off = median(off_scores) if off_scores else None


def run_one(
    crawl: list[str],
    mode: str,
    budget: int,
    rep: int,
    seed: str,
    truth: set[str],
    args: argparse.Namespace,
) -> HarvestRun:
    run_dir = WORK_DIR / "harvest" / f"{mode}-{budget}-{rep}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    log = run_dir / "output.log"
    measured = benchlib.run_measured(
        mode,
        crawl_command(crawl, run_dir, seed, budget, args, mode),
        log_path=log,
        timeout_s=args.timeout,
        env=benchlib.repo_env(),
        cwd=run_dir,
    )
    run = HarvestRun(mode, budget, rep, measured)
    try:
        count_harvest(run, run_dir / "crawl.db", truth)
    except sqlite3.Error as exc:
        measured.notes.append(f"could not read the database: {exc}")
    measured.pages = run.ok
    if measured.returncode != 0:
        measured.notes.append(f"exit status {measured.returncode}; log tail:\n{benchlib.tail(log)}")
    if run.ok < budget:
        measured.notes.append(f"WARNING: {run.ok} pages with status 200, budget {budget}")
    return run


def report_line(run: HarvestRun) -> str:
    scores = ""
    if run.score_on is not None or run.score_off is not None:
        scores = f", median score on/off-topic {fmt_score(run.score_on)}/{fmt_score(run.score_off)}"
    return (
        f"[{run.mode} B={run.budget} #{run.rep + 1}] {run.on_topic} on-topic of {run.ok} pages "
        f"(harvest {run.harvest:.1%}; halves {run.first_half:.0%} -> {run.second_half:.0%}, "
        f"max depth {run.max_depth}) in {run.measured.wall_s:.2f} s{scores}"
    )


def fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


# ---------------------------------------------------------------- reporting


def summary_table(runs: list[HarvestRun], budgets: list[int], n_on_topic: int) -> str:
    header = (
        "budget B",
        "BFS on-topic",
        "BFS harvest",
        "focused on-topic",
        "focused harvest",
        "focused / BFS",
        "best possible",
        "BFS wall s",
        "focused wall s",
    )
    rows = []
    for budget in budgets:
        by_mode = {
            mode: [r for r in runs if r.mode == mode and r.budget == budget] for mode in MODES
        }
        cells: dict[str, tuple[str, str, str]] = {}
        on_topic: dict[str, float] = {}
        for mode, mode_runs in by_mode.items():
            if not mode_runs:
                cells[mode] = ("-", "-", "-")
                continue
            on_topic[mode] = median(r.on_topic for r in mode_runs)
            cells[mode] = (
                f"{on_topic[mode]:.0f}",
                f"{on_topic[mode] / budget:.1%}",
                f"{median(r.measured.wall_s for r in mode_runs):.2f}",
            )
        ratio = "-"
        if "bfs" in on_topic and "focused" in on_topic:
            ratio = f"{on_topic['focused'] / on_topic['bfs']:.2f}x" if on_topic["bfs"] else "inf"
        best = min(budget - 1, n_on_topic)
        rows.append(
            (
                budget,
                cells["bfs"][0],
                cells["bfs"][1],
                cells["focused"][0],
                cells["focused"][1],
                ratio,
                f"{best} ({best / budget:.1%})",
                cells["bfs"][2],
                cells["focused"][2],
            )
        )
    return benchlib.markdown_table(header, rows)


def verdict(runs: list[HarvestRun], budgets: list[int]) -> str:
    if not any(r.mode == "focused" for r in runs):
        return "- target (focused >= 2x BFS): not measured, the focused crawl did not run."
    met, missed = [], []
    for budget in budgets:
        bfs = median(r.on_topic for r in runs if r.mode == "bfs" and r.budget == budget)
        foc = median(r.on_topic for r in runs if r.mode == "focused" and r.budget == budget)
        (met if bfs and foc / bfs >= TARGET_RATIO else missed).append(str(budget))
    if not missed:
        return f"- target (focused >= {TARGET_RATIO:g}x BFS): **met** at every budget."
    return f"- target (focused >= {TARGET_RATIO:g}x BFS): **missed** at B = {', '.join(missed)}" + (
        f"; met at B = {', '.join(met)}." if met else "."
    )


def per_run_table(runs: list[HarvestRun]) -> str:
    rows = [
        (
            r.mode,
            r.budget,
            r.rep + 1,
            r.ok,
            r.on_topic,
            f"{r.harvest:.1%}",
            f"{r.first_half:.0%} / {r.second_half:.0%}",
            r.max_depth,
            f"{fmt_score(r.score_on)} / {fmt_score(r.score_off)}",
            f"{r.measured.wall_s:.2f}",
            f"{r.measured.cpu_s:.2f}",
        )
        for r in sorted(runs, key=lambda r: (r.mode, r.budget, r.rep))
    ]
    header = (
        "mode",
        "B",
        "run",
        "pages 200",
        "on-topic",
        "harvest",
        "on-topic share 1st / 2nd half",
        "max depth",
        "median score on / off",
        "wall s",
        "CPU s",
    )
    return benchlib.markdown_table(header, rows)


def command_line(args: argparse.Namespace) -> str:
    parts = ["python bench/harvest_bench.py", f"--budgets {args.budgets}"]
    parts += [f"--repeat {args.repeat}", f"--pages {args.pages}", f"--seed {args.seed}"]
    if args.query != QUERY:
        parts.append(f"--query {shlex.quote(args.query)}")
    if args.crawl:
        parts.append(f"--crawl {shlex.quote(args.crawl)}")
    return " ".join(parts)


def markdown(
    args: argparse.Namespace,
    crawl: list[str],
    runs: list[HarvestRun],
    n_on_topic: int,
    notes: list[str],
    total_s: float,
) -> str:
    budgets = parse_budgets(args.budgets)
    info = benchlib.machine_info()
    crawl_py = command_python(crawl)
    versions = {
        "crawler": benchlib.venv_package_version(crawl_py, "crawler"),
        "aiohttp": benchlib.local_version("aiohttp"),
    }
    revision = git_revision()
    flags = " ".join(crawl_flags(budgets[0], args.concurrency)).replace(
        f"--max-pages {budgets[0]}", "--max-pages B"
    )
    warnings = [
        f"- {r.mode} B={r.budget} run {r.rep + 1}: {n.splitlines()[0]}"
        for r in runs
        for n in r.measured.notes
    ]
    parts = [
        "## Harvest rate: focused (`--query`) vs BFS crawl (topical site on 127.0.0.1)",
        "",
        f"Command: `{command_line(args)}` ({total_s:.0f} s in all)",
        "",
        f"Crawls: `crawl seeds.txt --db X {flags}`, focused runs adding "
        f"`--query {shlex.quote(args.query)}`; seed `/`.",
        "",
        f"Site: bench/topicsite.py, {args.pages} pages (seed {args.seed}), {n_on_topic} of them "
        f"on-topic ({TARGET}); 10-30 links a page, 80-85 % within the page's own topic. "
        f"Harvest = on-topic pages stored with status 200 / B; medians of {args.repeat} "
        "run(s), BFS and focused alternating.",
        "",
        summary_table(runs, budgets, n_on_topic),
        "",
        verdict(runs, budgets),
        f"- machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory']}, "
        f"Linux {info['kernel']}",
        f"- Python {info['python']}; "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f" (git {revision})",
        *[f"- {note}" for note in notes],
        *warnings,
        "",
        "<details><summary>every run</summary>",
        "",
        per_run_table(runs),
        "",
        "</details>",
    ]
    return "\n".join(parts)


def git_revision() -> str:
    """The repository's commit, noting uncommitted changes ("?" outside a git checkout)."""
    cmd = ["git", "-C", str(benchlib.REPO_DIR), "describe", "--always", "--dirty=+uncommitted"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return proc.stdout.strip() if proc.returncode == 0 else "?"


def command_python(cmd: list[str]) -> str:
    """The interpreter behind a command: itself, or the one in a console script's shebang."""
    if Path(cmd[0]).name.startswith("python"):
        return cmd[0]
    first = Path(cmd[0]).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


# ---------------------------------------------------------------- main


def parse_budgets(text: str) -> list[int]:
    return [int(b) for b in text.split(",") if b.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="250,500,1000", help="comma-separated --max-pages")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pages", type=int, default=5000, help="site size")
    parser.add_argument("--seed", type=int, default=1, help="site seed")
    parser.add_argument("--concurrency", type=int, default=8, help="--concurrency and --per-host")
    parser.add_argument("--query", default=QUERY, help="the focused runs' --query")
    parser.add_argument("--only", default=",".join(MODES), help="comma-separated: bfs,focused")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="preferred site port")
    parser.add_argument("--crawl", help='our crawler\'s command, e.g. "python -m crawler"')
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "HARVEST_RESULTS.draft.md")
    args = parser.parse_args(argv)
    try:
        budgets = parse_budgets(args.budgets)
    except ValueError:
        parser.error("--budgets: comma-separated integers, please")
    if not budgets or min(budgets) < 2:
        parser.error("--budgets: at least one budget, each >= 2")
    unknown = set(args.only.split(",")) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the site on SIGTERM
    crawl = benchlib.find_crawl_command(args.crawl)
    help_text = benchlib.crawl_help(crawl)
    if crawl is None or help_text is None:
        print("`crawl --help` fails: is the project installed?", file=sys.stderr)
        return 1
    wanted = [f for f in crawl_flags(1, 1) if f.startswith("--")] + ["--db", "--query"]
    _, missing = benchlib.supported_flags(help_text, wanted)
    modes = [m for m in MODES if m in args.only.split(",")]
    notes = []
    if "--query" in missing and "focused" in modes:
        modes.remove("focused")
        notes.append("`crawl --help` has no `--query` yet: focused runs skipped, BFS only")
        missing.remove("--query")
    if missing:
        print(f"`crawl --help` lacks {', '.join(missing)}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"[harvest] {note}", flush=True)
    budgets = parse_budgets(args.budgets)
    port = benchlib.free_port(args.port)
    seed_url = f"http://127.0.0.1:{port}/"
    runs: list[HarvestRun] = []
    start = time.perf_counter()
    with SiteServer(port, args.pages, args.seed, WORK_DIR / "harvest" / "site.log") as site:
        truth = site.truth()
        print(f"[site] {seed_url}: {args.pages} pages, {len(truth)} on-topic ({TARGET})")
        for rep in range(args.repeat):
            for budget in budgets:
                for mode in modes:
                    run = run_one(crawl, mode, budget, rep, seed_url, truth, args)
                    runs.append(run)
                    print(report_line(run), flush=True)
                    for note in run.measured.notes:
                        print(f"    {note}", flush=True)
    text = markdown(args, crawl, runs, len(truth), notes, time.perf_counter() - start)
    print("\n" + text)
    benchlib.write_section(args.out, "harvest-bench", text)
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
