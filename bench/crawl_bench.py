"""Side-by-side crawl benchmark against a local nginx serving a synthetic static site.

    python bench/crawl_bench.py [--pages 10000] [--repeat 3] [--only ours,scrapy,single,fetch]
        [--out bench/CRAWL_RESULTS.draft.md]

Generates (or reuses) the site from bench/sitegen.py under bench/work/, starts a private nginx
on 127.0.0.1 (bench/nginx.py; installs it with apt-get when missing), then runs each peer as a
subprocess, alternating peers within each repeat (ours, scrapy, single, fetch, ours, ...):

- ours:   the `crawl` console script (the venv where the project is installed); counted from
          its SQLite DB (`pages` rows with status 200). Skipped when `crawl --help` fails;
          flags that `crawl --help` does not mention are dropped with a note.
- scrapy: bench/scrapy_spider.py in bench/.venv-scrapy (created when missing); distinct URLs
          in its JSON-lines feed.
- single: bench/single_file_crawler.py (aiohttp + uvloop + selectolax, one process).
- fetch:  bench/fetch_only.py over urls.txt: the HTTP limit, no parsing.

Each run is timed from outside: wall seconds, CPU seconds (user + sys of the child and its
reaped descendants), nginx's CPU seconds over the run, the main process's peak RSS and the
largest sampled RSS sum over its process tree. The markdown table reports medians of the
repeats and the throughput ratios, and is written into a section of `--out`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import benchlib
from benchlib import BENCH_DIR, WORK_DIR, RunResult, median
from nginx import Nginx, nginx_version
from sitegen import ensure_site

PEERS = ("ours", "scrapy", "single", "fetch")
LABELS = {
    "ours": "ours (`crawl`)",
    "scrapy": "Scrapy CrawlSpider",
    "single": "single-file aiohttp+selectolax",
    "fetch": "fetch-only (HTTP limit)",
}
DEFAULT_PORT = 18089
DEFAULT_QUERY = "fast python crawler"


@dataclass
class Peer:
    """How to run one crawler and count what it fetched."""

    name: str
    command: Callable[[Path], list[str]]
    count: Callable[[Path], int]
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None


# ---------------------------------------------------------------- counting


def count_jsonl_urls(path: Path) -> int:
    """Distinct `url` values in a JSON-lines file (Scrapy fetches its start URL twice)."""
    if not path.exists():
        return 0
    urls = set()
    with open(path) as fh:
        for line in fh:
            if line.strip():
                urls.add(json.loads(line)["url"])
    return len(urls)


def count_summary_pages(log: Path) -> int:
    """The `pages` field of the JSON summary line a script prints last."""
    for line in reversed(benchlib.tail(log, 5).splitlines()):
        if line.startswith("{"):
            return int(json.loads(line).get("pages", 0))
    return 0


def count_db_pages(db: Path) -> int:
    """`SELECT count(*) FROM pages WHERE status = 200` on our crawler's database."""
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM pages WHERE status = 200").fetchone()[0])


# ---------------------------------------------------------------- peers


def tool_python() -> str:
    """The interpreter for the single-file and fetch-only peers (needs aiohttp, uvloop)."""
    venv = Path("/work/venv/bin/python")
    return str(venv) if venv.exists() else sys.executable


def command_python(cmd: list[str]) -> str:
    """The interpreter behind a command: itself, or the one in a console script's shebang."""
    if Path(cmd[0]).name.startswith("python"):
        return cmd[0]
    first = Path(cmd[0]).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def ours_peer(seed: str, crawl_cmd: str | None, values: dict[str, str | None]) -> Peer | None:
    """Our `crawl` with the flags in `values` (None: a bare switch) that its --help mentions.

    `crawl` takes a SEEDS file (one URL a line), so each run writes one holding `seed`.
    """
    crawl = benchlib.find_crawl_command(crawl_cmd)
    help_text = benchlib.crawl_help(crawl)
    if crawl is None or help_text is None:
        shown = " ".join(crawl) if crawl else "crawl"
        print(f"[ours] skipped: `{shown} --help` fails (is the project installed?)")
        return None
    have, missing = benchlib.supported_flags(help_text, ["--db", *values])

    def command(run_dir: Path) -> list[str]:
        seeds = run_dir / "seeds.txt"
        seeds.write_text(seed + "\n")
        cmd = [*crawl, str(seeds)]
        for flag in have:
            value = str(run_dir / "crawl.db") if flag == "--db" else values[flag]
            cmd += [flag] if value is None else [flag, value]
        return cmd

    peer = Peer("ours", command, lambda d: count_db_pages(d / "crawl.db"), env=benchlib.repo_env())
    peer.versions = {"crawler": benchlib.venv_package_version(command_python(crawl), "crawler")}
    peer.notes = [f"`crawl --help` has no `{flag}`: dropped" for flag in missing]
    for note in peer.notes:
        print(f"[ours] {note}")
    return peer


def ours_values(args: argparse.Namespace) -> dict[str, str | None]:
    return {
        "--concurrency": str(args.concurrency),
        "--per-host": str(args.concurrency),
        "--delay": "0",
        "--no-progress": None,
        "--query": args.query,
    }


def scrapy_peer(seed: str, settings: dict[str, str] | None = None) -> Peer:
    """The Scrapy spider; `settings` become `-s NAME=VALUE` options."""
    python = benchlib.ensure_scrapy_venv()
    spider = str(BENCH_DIR / "scrapy_spider.py")
    options = [f"-s{name}={value}" for name, value in (settings or {}).items()]

    def command(run_dir: Path) -> list[str]:
        feed = f"{run_dir / 'pages.jsonl'}:jsonlines"
        runspider = [str(python), "-m", "scrapy", "runspider", spider]
        return [*runspider, "-a", f"start_url={seed}", "-O", feed, *options]

    peer = Peer("scrapy", command, lambda d: count_jsonl_urls(d / "pages.jsonl"))
    packages = ("scrapy", "twisted", "lxml")
    peer.versions = {p: benchlib.venv_package_version(python, p) for p in packages}
    return peer


def single_peer(seed: str, concurrency: int, max_pages: int | None = None) -> Peer:
    script = str(BENCH_DIR / "single_file_crawler.py")
    limit = [] if max_pages is None else ["--max-pages", str(max_pages)]

    def command(run_dir: Path) -> list[str]:
        out = str(run_dir / "pages.jsonl")
        cmd = [tool_python(), script, seed, "--out", out, "--concurrency", str(concurrency)]
        return cmd + limit

    return Peer("single", command, lambda d: count_jsonl_urls(d / "pages.jsonl"))


def fetch_peer(urls_txt: Path, concurrency: int) -> Peer:
    script = str(BENCH_DIR / "fetch_only.py")

    def command(run_dir: Path) -> list[str]:
        return [tool_python(), script, str(urls_txt), "--concurrency", str(concurrency)]

    return Peer("fetch", command, lambda d: count_summary_pages(d / "output.log"))


def build_peers(names: list[str], seed: str, site: Path, args: argparse.Namespace) -> list[Peer]:
    peers: list[Peer | None] = []
    for name in names:
        if name == "ours":
            peers.append(ours_peer(seed, args.crawl, ours_values(args)))
        elif name == "scrapy":
            peers.append(scrapy_peer(seed))
        elif name == "single":
            peers.append(single_peer(seed, args.concurrency))
        elif name == "fetch":
            peers.append(fetch_peer(site / "urls.txt", args.concurrency))
    return [p for p in peers if p is not None]


# ---------------------------------------------------------------- running


def run_peer(peer: Peer, rep: int, server: Nginx, expected: int, timeout_s: float) -> RunResult:
    run_dir = WORK_DIR / "runs" / f"{peer.name}-{rep}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    log = run_dir / "output.log"
    server_cpu0 = server.cpu_s()
    result = benchlib.run_measured(
        peer.name,
        peer.command(run_dir),
        log_path=log,
        timeout_s=timeout_s,
        cwd=run_dir,
        env=peer.env,
    )
    result.server_cpu_s = server.cpu_s() - server_cpu0
    try:
        result.pages = peer.count(run_dir)
    except (OSError, sqlite3.Error, ValueError) as exc:
        result.notes.append(f"could not count pages: {exc}")
    if result.returncode != 0:
        result.notes.append(f"exit status {result.returncode}; log tail:\n{benchlib.tail(log)}")
    if result.pages != expected:
        result.notes.append(f"WARNING: {result.pages} pages, expected {expected}")
    return result


def report_line(r: RunResult, rep: int) -> str:
    return (
        f"[{r.name} #{rep + 1}] {r.pages} pages in {r.wall_s:.2f} s = {r.pages_per_s:,.0f} pages/s, "
        f"CPU {r.cpu_s:.2f} s, nginx CPU {r.server_cpu_s:.2f} s, RSS main {r.rss_main_mb:.0f} MB, "
        f"tree {r.rss_tree_mb:.0f} MB, PSS tree {r.pss_tree_mb:.0f} MB ({r.max_procs} procs)"
    )


def run_all(
    peers: list[Peer], server: Nginx, expected: int, args: argparse.Namespace
) -> dict[str, list[RunResult]]:
    results: dict[str, list[RunResult]] = {p.name: [] for p in peers}
    for rep in range(args.repeat):
        for peer in peers:
            result = run_peer(peer, rep, server, expected, args.timeout)
            results[peer.name].append(result)
            print(report_line(result, rep), flush=True)
            for note in result.notes:
                print(f"    {note}", flush=True)
    return results


# ---------------------------------------------------------------- reporting


def summarize(runs: list[RunResult]) -> dict[str, float]:
    return {
        "pages": median(r.pages for r in runs),
        "wall_s": median(r.wall_s for r in runs),
        "pages_per_s": median(r.pages_per_s for r in runs),
        "cpu_s": median(r.cpu_s for r in runs),
        "server_cpu_s": median(r.server_cpu_s for r in runs),
        "rss_main_mb": median(r.rss_main_mb for r in runs),
        "rss_tree_mb": median(r.rss_tree_mb for r in runs),
        "pss_tree_mb": median(r.pss_tree_mb for r in runs),
        "procs": max(r.max_procs for r in runs),
    }


def results_table(summaries: dict[str, dict[str, float]]) -> str:
    header = (
        "crawler",
        "pages",
        "wall s",
        "pages/s",
        "CPU s",
        "nginx CPU s",
        "peak RSS MB (main)",
        "peak RSS MB (tree)",
        "peak PSS MB (tree)",
        "procs",
    )
    rows = [
        (
            LABELS[name],
            f"{s['pages']:.0f}",
            f"{s['wall_s']:.2f}",
            f"{s['pages_per_s']:,.0f}",
            f"{s['cpu_s']:.2f}",
            f"{s['server_cpu_s']:.2f}",
            f"{s['rss_main_mb']:.0f}",
            f"{s['rss_tree_mb']:.0f}",
            f"{s['pss_tree_mb']:.0f}",
            f"{s['procs']:.0f}",
        )
        for name, s in summaries.items()
    ]
    return benchlib.markdown_table(header, rows)


def ratio_lines(summaries: dict[str, dict[str, float]]) -> list[str]:
    if "ours" not in summaries:
        return ["- ratios: `ours` did not run."]
    ours = summaries["ours"]
    lines = []
    for other in ("scrapy", "fetch", "single"):
        if other in summaries and summaries[other]["pages_per_s"] > 0:
            speed = ours["pages_per_s"] / summaries[other]["pages_per_s"]
            cpu = ours["cpu_s"] / summaries[other]["cpu_s"] if summaries[other]["cpu_s"] else 0
            lines.append(f"- ours / {LABELS[other]}: {speed:.2f}x pages/s, {cpu:.2f}x CPU s")
    return lines


def per_run_table(results: dict[str, list[RunResult]]) -> str:
    rows = [
        (
            LABELS[name],
            i + 1,
            r.pages,
            f"{r.wall_s:.2f}",
            f"{r.pages_per_s:,.0f}",
            f"{r.cpu_s:.2f}",
            f"{r.rss_main_mb:.0f}",
            f"{r.rss_tree_mb:.0f}",
        )
        for name, runs in results.items()
        for i, r in enumerate(runs)
    ]
    return benchlib.markdown_table(
        ("crawler", "run", "pages", "wall s", "pages/s", "CPU s", "RSS main MB", "RSS tree MB"),
        rows,
    )


def machine_lines(peers: list[Peer], server: Nginx) -> list[str]:
    info = benchlib.machine_info()
    py = tool_python()
    versions = {
        p: benchlib.venv_package_version(py, p) for p in ("aiohttp", "uvloop", "selectolax")
    }
    versions["nginx"] = nginx_version(server.binary)
    for peer in peers:
        versions.update(peer.versions)
    return [
        f"- machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory']}, Linux {info['kernel']}",
        f"- Python {info['python']}; " + ", ".join(f"{k} {v}" for k, v in versions.items()),
    ]


def markdown(
    args, site: dict, peers: list[Peer], server: Nginx, results: dict[str, list[RunResult]]
) -> str:
    summaries = {name: summarize(runs) for name, runs in results.items() if runs}
    notes = [f"- {peer.name}: {note}" for peer in peers for note in peer.notes]
    warnings = [
        f"- {r.name} run: {n.splitlines()[0]}"
        for runs in results.values()
        for r in runs
        for n in r.notes
    ]
    parts = [
        "## Side-by-side crawl (synthetic static site, nginx on 127.0.0.1)",
        "",
        f"Command: `python bench/crawl_bench.py --pages {args.pages} --repeat {args.repeat} --only {args.only}"
        + (f" --crawl '{args.crawl}'" if args.crawl else "")
        + "`",
        "",
        f"Site: {site['pages']} pages ({site['total_bytes'] / 2**20:.0f} MiB of HTML, seed {site['seed']}), "
        f"{site['expected_urls']} distinct in-scope URLs a full crawl must fetch "
        f"({site['query_variant_urls']} of them `?ref=` query duplicates); concurrency {args.concurrency}; "
        f"medians of {args.repeat} runs, alternating peers.",
        "",
        results_table(summaries),
        "",
        *ratio_lines(summaries),
        *machine_lines(peers, server),
        *notes,
        *warnings,
        "",
        "<details><summary>every run</summary>",
        "",
        per_run_table(results),
        "",
        "</details>",
    ]
    return "\n".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--only", default=",".join(PEERS), help="comma-separated: " + ",".join(PEERS)
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="preferred nginx port")
    parser.add_argument("--query", default=DEFAULT_QUERY, help="ours: the --query words")
    parser.add_argument("--crawl", help='our crawler\'s command, e.g. "python -m crawler"')
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "CRAWL_RESULTS.draft.md")
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up servers on SIGTERM
    port = benchlib.free_port(args.port)
    base_url = f"http://127.0.0.1:{port}"
    site_dir = WORK_DIR / f"site-{args.pages}-s{args.seed}-p{port}"
    site = ensure_site(site_dir, args.pages, base_url, args.seed)
    print(f"[site] {site_dir}: {site['expected_urls']} distinct in-scope URLs expected")
    names = [n for n in PEERS if n in args.only.split(",")]
    with Nginx(site_dir, port) as server:
        peers = build_peers(names, str(site["seed_url"]), site_dir, args)
        results = run_all(peers, server, int(site["expected_urls"]), args)
        text = markdown(args, site, peers, server, results)
    print("\n" + text)
    benchlib.write_section(args.out, "crawl-bench", text)
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
