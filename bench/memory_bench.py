"""Peak memory with ~1,000,000 discovered URLs: a dynamic site where every page links to new URLs.

    python bench/memory_bench.py [--pages 10000] [--links 100] [--page-bytes 0] [--only ours,scrapy,single]
        [--out bench/CRAWL_RESULTS.draft.md]

Serves bench/memsite.py (aiohttp, 127.0.0.1, a subprocess) whose every page links to `--links`
never-seen URLs, then runs each crawler until it has fetched `--pages` pages (ours:
`crawl ... --max-pages N`; Scrapy: `CLOSESPIDER_PAGECOUNT=N`; the single-file crawler:
`--max-pages N`), so about pages x links URLs have been discovered and mostly wait in the
frontier. Reports wall time, CPU and peak RSS (main process and process tree) per crawler,
into a section of `--out`. A crawler that is unavailable (ours before `crawl --help` works, or
without `--max-pages`) is skipped with a note.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import benchlib
from benchlib import BENCH_DIR, WORK_DIR, RunResult
from crawl_bench import LABELS, Peer, ours_peer, scrapy_peer, single_peer, tool_python

PEERS = ("ours", "scrapy", "single")
DEFAULT_PORT = 18090


def start_site(port: int, links: int, page_bytes: int = 0) -> subprocess.Popen[bytes]:
    script = str(BENCH_DIR / "memsite.py")
    cmd = [tool_python(), script, "--port", str(port), "--links", str(links)]
    cmd += ["--page-bytes", str(page_bytes)] if page_bytes else []
    proc = subprocess.Popen(cmd)
    try:
        benchlib.wait_for_port(port)
    except RuntimeError:
        proc.kill()
        raise
    print(f"[memsite] http://127.0.0.1:{port}/ with {links} new links a page")
    return proc


def build_peers(names: list[str], seed: str, args: argparse.Namespace) -> list[Peer]:
    peers: list[Peer | None] = []
    if "ours" in names:
        values: dict[str, str | None] = {
            "--max-pages": str(args.pages),
            "--concurrency": str(args.concurrency),
            "--per-host": str(args.concurrency),
            "--delay": "0",
            "--no-progress": None,
            # memsite is one endless URL template whose pages say the same: the default
            # template budget closes it after a few hundred pages, and then nothing is found.
            "--template-budget": "0",
        }
        ours = ours_peer(seed, args.crawl, values)
        if ours and any("--max-pages" in note for note in ours.notes):
            print("[ours] skipped: without --max-pages the crawl would never end")
            ours = None
        peers.append(ours)
    if "scrapy" in names:
        peers.append(scrapy_peer(seed, {"CLOSESPIDER_PAGECOUNT": str(args.pages)}))
    if "single" in names:
        peers.append(single_peer(seed, args.concurrency, args.pages))
    return [p for p in peers if p is not None]


DISCOVERED_PATTERNS = {  # how each crawler's log says how many URLs it had found
    "scrapy": r"'scheduler/enqueued': (\d+)",
    "single": r'"seen": (\d+)',
    "ours": r"left in the queue: (\d+)",  # plus the pages fetched
}


def discovered(result: RunResult, log: Path) -> int | None:
    """URLs the crawler discovered, read from its log; None when the log doesn't say."""
    match = re.search(DISCOVERED_PATTERNS.get(result.name, "$^"), benchlib.tail(log, 200))
    if not match:
        return None
    return int(match.group(1)) + (result.pages if result.name == "ours" else 0)


def run_one(peer: Peer, server: subprocess.Popen[bytes], timeout_s: float) -> RunResult:
    run_dir = WORK_DIR / "memruns" / peer.name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    log = run_dir / "output.log"
    cpu0 = benchlib.tree_cpu_s(server.pid)
    result = benchlib.run_measured(
        peer.name,
        peer.command(run_dir),
        log_path=log,
        timeout_s=timeout_s,
        cwd=run_dir,
        env=peer.env,
    )
    result.server_cpu_s = benchlib.tree_cpu_s(server.pid) - cpu0
    try:
        result.pages = peer.count(run_dir)
    except Exception as exc:  # report it, do not abort the other peers
        result.notes.append(f"could not count pages: {exc}")
    result.discovered = discovered(result, log)
    if result.returncode != 0:
        result.notes.append(f"exit status {result.returncode}; log tail:\n{benchlib.tail(log)}")
    print(
        f"[{peer.name}] {result.pages} pages in {result.wall_s:.1f} s, CPU {result.cpu_s:.1f} s, "
        f"peak RSS main {result.rss_main_mb:.0f} MB, tree {result.rss_tree_mb:.0f} MB "
        f"(PSS {result.pss_tree_mb:.0f} MB)",
        flush=True,
    )
    for note in result.notes:
        print(f"    {note}")
    return result


def markdown(args: argparse.Namespace, results: list[RunResult], peers: list[Peer]) -> str:
    header = (
        "crawler",
        "pages",
        "URLs discovered",
        "wall s",
        "CPU s",
        "peak RSS MB (main)",
        "peak RSS MB (tree)",
        "peak PSS MB (tree)",
    )
    rows = [
        (
            LABELS[r.name],
            r.pages,
            f"{r.discovered:,}" if r.discovered else f"≈{r.pages * args.links:,}",
            f"{r.wall_s:.1f}",
            f"{r.cpu_s:.1f}",
            f"{r.rss_main_mb:.0f}",
            f"{r.rss_tree_mb:.0f}",
            f"{r.pss_tree_mb:.0f}",
        )
        for r in results
    ]
    info = benchlib.machine_info()
    notes = [f"- {p.name}: {n}" for p in peers for n in p.notes]
    notes += [f"- {r.name}: {n.splitlines()[0]}" for r in results for n in r.notes]
    return "\n".join(
        [
            "## Memory with a large frontier (dynamic aiohttp site, 127.0.0.1)",
            "",
            f"Command: `python bench/memory_bench.py --pages {args.pages} --links {args.links}"
            + (f" --page-bytes {args.page_bytes}" if args.page_bytes else "")
            + f" --only {args.only}"
            + (f" --crawl '{args.crawl}'" if args.crawl else "")
            + "`",
            "",
            f"Every page links to {args.links} never-seen URLs; each crawler stops after {args.pages} pages, "
            f"so about {args.pages * args.links:,} URLs have been discovered. One run each "
            f"(concurrency {args.concurrency}); {info['nproc']} CPUs, Python {info['python']}.",
            "",
            benchlib.markdown_table(header, rows),
            *(["", *notes] if notes else []),
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--links", type=int, default=100)
    parser.add_argument("--page-bytes", type=int, default=0, help="text added to each page")
    parser.add_argument(
        "--only", default=",".join(PEERS), help="comma-separated: " + ",".join(PEERS)
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
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
    seed = f"http://127.0.0.1:{port}/index.html"
    names = [n for n in PEERS if n in args.only.split(",")]
    server = start_site(port, args.links, args.page_bytes)
    try:
        peers = build_peers(names, seed, args)
        results = [run_one(peer, server, args.timeout) for peer in peers]
    finally:
        server.terminate()
        server.wait()
    text = markdown(args, results, peers)
    print("\n" + text)
    benchlib.write_section(args.out, "memory-bench", text)
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
