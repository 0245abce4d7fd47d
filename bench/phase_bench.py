"""Where a crawl's time goes: its phases from exec to exit, and its CPU a page by role.

    python bench/phase_bench.py [--repeat 3] [--site-dir DIR --start index.html]
                                [--max-pages N] [--out bench/RESULTS.md]

Runs our crawl (the full feature set, as ``crawl_bench.py`` runs it: ``--concurrency 64
--per-host 64 --delay 0 --query ...``) on the synthetic site, or on ``--site-dir`` served
as is (the Python docs: ``--site-dir /usr/share/doc/python3.11/html``), from nginx on
loopback, ``--repeat`` times after one unmeasured run, each after the last one's search-index
warmer has ended. Each run is ``bench/phase_probe.py``: the ``crawl`` command with marks
inside its process (start-up: imports and options, the store's opening, the first fetch;
the steady state up to the last fetch's start; the tail of the last pages' parses; the
shutdown: the last write, the run's end, the exit), its main thread's and store thread's
CPU, the store's CPU in its transactions (and the kernel's share), and, sampled from ``/proc``
(``benchlib.run_measured``), the CPU of the fork server and the parse workers.
``--max-pages 1`` gives the phases of a one-page crawl (``startup_bench.py`` times it whole).
Medians of the runs; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
from pathlib import Path

import benchlib
from benchlib import BENCH_DIR, WORK_DIR
from nginx import Nginx
from sitegen import ensure_site

DEFAULT_QUERY = "fast python crawler"
PROBE = BENCH_DIR / "phase_probe.py"
PHASES = (
    ("interpreter", None, "interpreter_s", "exec to the probe (Python's start, `site`)"),
    ("imports and options", "interpreter_s", "engine_run", "the crawler's imports, the CLI"),
    ("store open", "engine_run", "store_open", "lock, database opened and migrated"),
    ("to the first fetch", "store_open", "first_fetch", "run row, frontier, pool, robots.txt"),
    ("steady state", "first_fetch", "last_fetch_start", "every fetch but the last starts"),
    ("tail", "last_fetch_start", "last_page", "the last pages fetched and parsed"),
    ("last write", "last_page", "last_write", "the writer's last batch committed"),
    ("run's end", "last_write", "finished", "run row, pool and store closed"),
    ("exit", "finished", "exit", "the warmer started, the command returns"),
)


def probe_command(args: argparse.Namespace, seed_url: str, run_dir: Path) -> list[str]:
    seeds = run_dir / "seeds.txt"
    seeds.write_text(seed_url + "\n")
    cmd = [sys.executable, str(PROBE), str(run_dir / "phases.json"), str(seeds)]
    cmd += ["--db", str(run_dir / "crawl.db"), "--concurrency", str(args.concurrency)]
    cmd += ["--per-host", str(args.concurrency), "--delay", "0", "--no-progress"]
    cmd += ["--query", args.query]
    if args.max_pages is not None:
        cmd += ["--max-pages", str(args.max_pages)]
    return cmd


def run_once(args: argparse.Namespace, seed_url: str, run_dir: Path) -> dict[str, object]:
    """One probed crawl in a fresh ``run_dir``: the probe's report and the sampled roles."""
    if run_dir.exists():
        for path in run_dir.iterdir():
            path.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    benchlib.wait_for_background()
    result = benchlib.run_measured(
        "ours",
        probe_command(args, seed_url, run_dir),
        log_path=run_dir / "log",
        timeout_s=args.timeout,
        env=benchlib.repo_env(),
    )
    report_path = run_dir / "phases.json"
    if result.returncode != 0 or not report_path.is_file():
        raise SystemExit(
            f"probed crawl failed ({result.returncode}):\n{benchlib.tail(run_dir / 'log')}"
        )
    report: dict[str, object] = json.loads(report_path.read_text())
    report["wall_s"] = result.wall_s
    report["roles"] = result.cpu_roles
    return report


def phase_rows(reports: list[dict]) -> list[tuple[str, str, str, str]]:
    rows = []
    for label, start, end, what in PHASES:
        spans = []
        for report in reports:
            at = {"interpreter_s": report["interpreter_s"], **report["marks_s"]}
            if end in at and (start is None or start in at):
                spans.append(at[end] - (at[start] if start else 0.0))
        if spans:
            span = statistics.median(spans)
            rows.append(
                (label, what, f"{span * 1000:.0f}", ", ".join(f"{s * 1000:.0f}" for s in spans))
            )
    for label, what, values in (
        ("exec to exit", "the sum of the above", [r["marks_s"].get("exit", 0.0) for r in reports]),
        ("wall, as sampled", "plus the bench's start of the process and sampler",
         [r["wall_s"] for r in reports]),
    ):  # fmt: skip
        rows.append((label, what, f"{statistics.median(values) * 1000:.0f}",
                     ", ".join(f"{v * 1000:.0f}" for v in values)))  # fmt: skip
    return rows


def kernel_share(report: dict) -> float:
    """The kernel's share of the store's transactions, as ``getrusage`` split their time."""
    user, kernel = report["store_transactions_user_s"], report["store_transactions_sys_s"]
    return kernel / (user + kernel) if user + kernel > 0 else 0.0


def roles_of(report: dict) -> dict[str, float]:
    """One run's CPU seconds by role."""
    main, store = report["main_thread_cpu_s"], report["store_thread_cpu_s"]
    sampled = report["roles"]
    return {
        "event loop (main thread)": main,
        "store thread": store,
        "  of it in transactions": report["store_transactions_cpu_s"],
        "  of that in the kernel (its share as ticks sampled it)": kernel_share(report)
        * report["store_transactions_cpu_s"],
        "other threads": max(0.0, report["process_cpu_s"] - main - store),
        "fork server and parse workers (sampled)": sampled.get("child processes", 0.0)
        + sampled.get("grandchildren", 0.0),
    }


def cpu_rows(reports: list[dict]) -> list[tuple[str, str, str]]:
    """CPU by role: seconds a run and microseconds a page (medians)."""
    pages = statistics.median(r["pages"] for r in reports) or 1
    runs = [roles_of(r) for r in reports]
    rows = []
    for role in runs[0]:
        seconds = statistics.median(run[role] for run in runs)
        rows.append((role, f"{seconds:.2f}", f"{seconds / pages * 1e6:.0f}"))
    return rows


def markdown(args: argparse.Namespace, corpus: str, reports: list[dict]) -> str:
    info = benchlib.machine_info()
    pages = statistics.median(r["pages"] for r in reports)
    command = "python bench/phase_bench.py " + " ".join(sys.argv[1:])
    return "\n".join(
        [
            f"## Where a crawl's time goes ({corpus})",
            "",
            f"Command: `{command.strip()}`; medians of {len(reports)} runs (each run in brackets), "
            f"{pages:.0f} pages a run.",
            "",
            benchlib.markdown_table(("phase", "what", "ms", "runs"), phase_rows(reports)),
            "",
            benchlib.markdown_table(("CPU by role", "s a run", "us a page"), cpu_rows(reports)),
            "",
            f"- machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory']}, Python {info['python']}",
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--site-dir", type=Path, help="serve this directory instead of the synthetic site"
    )
    parser.add_argument("--start", default="index.html", help="with --site-dir: the seed page")
    parser.add_argument("--pages", type=int, default=10_000, help="the synthetic site's pages")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--query", default=DEFAULT_QUERY)
    parser.add_argument("--max-pages", type=int, help="stop after this many pages (1: start-up)")
    parser.add_argument("--port", type=int, default=18089, help="preferred nginx port")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--out", type=Path, help="also write the section into this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop nginx on SIGTERM
    port = benchlib.free_port(args.port)
    if args.site_dir is not None:
        root, start, corpus = args.site_dir, args.start.lstrip("/"), args.site_dir.name
    else:
        root = WORK_DIR / f"site-{args.pages}-s1-p{port}"
        site = ensure_site(root, args.pages, f"http://127.0.0.1:{port}")
        start, corpus = (
            str(site["seed_url"]).rsplit("/", 1)[1],
            f"synthetic site, {args.pages} pages",
        )
    if args.max_pages is not None:
        corpus += f", --max-pages {args.max_pages}"
    benchlib.prepare_ours(sys.executable)
    runs_dir = WORK_DIR / "phase-runs"
    with Nginx(root, port) as server:
        seed_url = f"{server.base_url}/{start}"
        run_once(args, seed_url, runs_dir / "warm-up")
        reports = []
        for i in range(args.repeat):
            reports.append(run_once(args, seed_url, runs_dir / f"run-{i}"))
            print(f"[run {i + 1}] {reports[-1]['pages']} pages, {reports[-1]['wall_s']:.2f} s")
    text = markdown(args, corpus, reports)
    print("\n" + text)
    if args.out is not None:
        benchlib.write_section(args.out, "phase-bench", text)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
