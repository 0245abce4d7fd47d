"""Side-by-side crawl benchmark against a local nginx serving a synthetic static site.

    python bench/crawl_bench.py [--pages 10000] [--repeat 3]
        [--only ours,wget2,crawlee,scrapy,single,fetch]
        [--out bench/CRAWL_RESULTS.draft.md]
    python bench/crawl_bench.py --site-dir /usr/share/doc/python3.11/html [--start index.html]
        [--repeat 3] [--only ...] [--out ...]

Generates (or reuses) the site from bench/sitegen.py under bench/work/, starts a private nginx
on 127.0.0.1 (bench/nginx.py; installs it with apt-get when missing), then runs each peer as a
subprocess, alternating peers within each repeat (ours, scrapy, single, fetch, ours, ...):

- ours:   the `crawl` console script (the venv where the project is installed); counted from
          its SQLite DB (`pages` rows with status 200). Skipped when `crawl --help` fails;
          flags that `crawl --help` does not mention are dropped with a note.
- wget2:  GNU Wget2 (Debian's `wget2`, installed when missing): `wget2 --recursive --level=inf
          --no-parent --robots=off --max-threads=64`, mirroring to disk; its HTML files.
- crawlee: Crawlee for JavaScript (bench/crawlee_cheerio.mjs: CheerioCrawler, same-origin
          links, in-memory storage), npm-installed under bench/work/crawlee-js when missing.
- scrapy: bench/scrapy_spider.py in bench/.venv-scrapy (created when missing); distinct URLs
          in its JSON-lines feed.
- single: bench/single_file_crawler.py (aiohttp + uvloop + selectolax, one process).
- fetch:  bench/fetch_only.py over urls.txt: the HTTP limit, no parsing.

Each run is timed from outside: wall seconds, CPU seconds (user + sys of the child and its
reaped descendants), nginx's CPU seconds over the run, the main process's peak RSS and the
largest sampled RSS sum over its process tree. The markdown table reports medians of the
repeats and the throughput ratios, and is written into a section of `--out`.

With `--site-dir DIR` nginx serves an existing directory as is (a real documentation site)
instead of the synthetic one, and the crawlers start at `--start` (a path relative to DIR).
There is no manifest, so no page count is expected: the report gives each peer's distinct
pages, says where the peers disagree, and which of DIR's `*.html` files a crawler did not
reach (or which URLs it fetched that are none of them). The fetch-only peer fetches every
`*.html` file under DIR (a urls.txt written under bench/work/static-NAME-pPORT/, where the
runs go too). The report goes to its own section of `--out` (`crawl-bench-site`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import benchlib
from benchlib import BENCH_DIR, WORK_DIR, RunResult, median
from nginx import Nginx, nginx_version
from sitegen import ensure_site

PEERS = ("ours", "wget2", "crawlee", "scrapy", "single", "fetch")
LABELS = {
    "ours": "ours (`crawl`)",
    "wget2": "GNU Wget2 (C, 64 threads)",
    "crawlee": "Crawlee JS (CheerioCrawler)",
    "scrapy": "Scrapy CrawlSpider",
    "single": "single-file aiohttp+selectolax",
    "fetch": "fetch-only (HTTP limit)",
}
SHORT_LABELS = {"ours": "ours", "wget2": "Wget2", "crawlee": "Crawlee JS", "scrapy": "Scrapy",
                "single": "single-file", "fetch": "fetch-only"}  # fmt: skip
CRAWLERS = ("ours", "wget2", "crawlee", "scrapy", "single")
CRAWLEE_DIR = WORK_DIR / "crawlee-js"
"""Where the bench installs Crawlee for JavaScript and cheerio with npm."""
"""The peers that discover pages by following links (fetch-only reads a URL list)."""
SITE_SECTION = "crawl-bench-site"
EXAMPLES = 5
"""How many example paths a `--site-dir` report lists per difference."""
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
    urls: Callable[[Path], set[str]] | None = None
    """The distinct URLs a run fetched (for `--site-dir` reports); None: not known."""


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


def jsonl_urls(path: Path) -> set[str]:
    """The distinct `url` values in a JSON-lines file."""
    if not path.exists():
        return set()
    with open(path) as fh:
        return {json.loads(line)["url"] for line in fh if line.strip()}


def db_urls(db: Path) -> set[str]:
    """The URLs of our crawler's database's `pages` rows with status 200."""
    if not db.exists():
        return set()
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, conn:
        return {row[0] for row in conn.execute("SELECT url FROM pages WHERE status = 200")}


def count_db_pages(db: Path) -> int:
    """`SELECT count(*) FROM pages WHERE status = 200` on our crawler's database."""
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, conn:
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

    benchlib.prepare_ours(command_python(crawl))
    peer = Peer("ours", command, lambda d: count_db_pages(d / "crawl.db"), env=benchlib.repo_env())
    peer.urls = lambda d: db_urls(d / "crawl.db")
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
    peer.urls = lambda d: jsonl_urls(d / "pages.jsonl")
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

    peer = Peer("single", command, lambda d: count_jsonl_urls(d / "pages.jsonl"))
    peer.urls = lambda d: jsonl_urls(d / "pages.jsonl")
    return peer


def ensure_wget2() -> str:
    """The wget2 binary; installs Debian's package when it is missing."""
    found = shutil.which("wget2")
    if found:
        return found
    print("[setup] wget2 is missing: running apt-get update && apt-get install -y wget2")
    subprocess.run(["apt-get", "update"], check=True)
    subprocess.run(["apt-get", "install", "-y", "wget2"], check=True)
    found = shutil.which("wget2")
    if found is None:
        raise RuntimeError("apt-get install wget2 did not produce a wget2 binary")
    return found


def wget2_peer(seed: str, concurrency: int) -> Peer:
    """GNU Wget2 mirroring the site to disk (what a user who only wants the pages runs): its
    own C HTML scanner for links, no robots.txt (the sites have none), ``concurrency``
    threads. Counted as the HTML files it wrote."""
    binary = ensure_wget2()
    root = seed.rsplit("/", 1)[0] + "/"

    def command(run_dir: Path) -> list[str]:
        return [binary, "--recursive", "--level=inf", "--no-parent", "--robots=off",
                f"--max-threads={concurrency}", "--no-verbose", "--no-host-directories",
                "--directory-prefix", str(run_dir / "mirror"), seed]  # fmt: skip

    def html_files(run_dir: Path) -> list[Path]:
        mirror = run_dir / "mirror"
        return [p for p in mirror.rglob("*") if p.is_file() and p.suffix in (".html", ".htm")]

    def urls(run_dir: Path) -> set[str]:
        mirror = run_dir / "mirror"
        return {root + quote(p.relative_to(mirror).as_posix()) for p in html_files(run_dir)}

    peer = Peer("wget2", command, lambda d: len(html_files(d)))
    peer.urls = urls
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    peer.versions["wget2"] = version.split(" - ")[0].removeprefix("GNU Wget2 ").strip()
    return peer


def ensure_crawlee() -> tuple[str, Path]:
    """(node, the peer's script beside its node_modules): Debian's nodejs and npm when missing,
    then crawlee 3 and cheerio from npm into ``CRAWLEE_DIR`` (an ES module resolves its imports
    from its own directory, so the script is copied there)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("[setup] node or npm is missing: running apt-get install -y nodejs npm")
        subprocess.run(["apt-get", "update"], check=True)
        subprocess.run(["apt-get", "install", "-y", "nodejs", "npm"], check=True)
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise RuntimeError("apt-get install nodejs npm did not produce node and npm")
    CRAWLEE_DIR.mkdir(parents=True, exist_ok=True)
    if not (CRAWLEE_DIR / "node_modules" / "crawlee").is_dir():
        print(f"[setup] npm install crawlee@3 cheerio@1 into {CRAWLEE_DIR}")
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "crawlee@3", "cheerio@1"],
                       cwd=CRAWLEE_DIR, check=True)  # fmt: skip
    script = CRAWLEE_DIR / "crawlee_cheerio.mjs"
    shutil.copyfile(BENCH_DIR / "crawlee_cheerio.mjs", script)
    return node, script


def crawlee_peer(seed: str, concurrency: int) -> Peer:
    """Crawlee for JavaScript: bench/crawlee_cheerio.mjs (CheerioCrawler, same-origin links,
    in-memory storage); its page count is the JSON line it prints last."""
    node, script = ensure_crawlee()

    def command(run_dir: Path) -> list[str]:
        return [node, str(script), seed, str(concurrency)]

    peer = Peer("crawlee", command, lambda d: count_summary_pages(d / "output.log"))
    package = CRAWLEE_DIR / "node_modules" / "crawlee" / "package.json"
    with contextlib.suppress(OSError, ValueError, KeyError):
        peer.versions["crawlee"] = json.loads(package.read_text())["version"]
    peer.versions["node"] = subprocess.run([node, "--version"], capture_output=True,
                                           text=True).stdout.strip()  # fmt: skip
    return peer


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
        elif name == "wget2":
            peers.append(wget2_peer(seed, args.concurrency))
        elif name == "crawlee":
            peers.append(crawlee_peer(seed, args.concurrency))
        elif name == "scrapy":
            peers.append(scrapy_peer(seed))
        elif name == "single":
            peers.append(single_peer(seed, args.concurrency))
        elif name == "fetch":
            peers.append(fetch_peer(site / "urls.txt", args.concurrency))
    return [p for p in peers if p is not None]


# ---------------------------------------------------------------- running


def run_peer(
    peer: Peer,
    rep: int,
    server: Nginx,
    expected: int | None,
    timeout_s: float,
    runs_dir: Path = WORK_DIR / "runs",
) -> RunResult:
    """One measured run in `runs_dir`/NAME-REP; `expected`: the page count to check (or None)."""
    run_dir = runs_dir / f"{peer.name}-{rep}"
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
    waited_s = benchlib.wait_for_background()  # our warmer: not during the next run
    if waited_s > 0.05:
        result.notes.append(f"background warmer ran {waited_s:.1f} s after the run (not timed)")
    try:
        result.pages = peer.count(run_dir)
    except (OSError, sqlite3.Error, ValueError) as exc:
        result.notes.append(f"could not count pages: {exc}")
    if result.returncode != 0:
        result.notes.append(f"exit status {result.returncode}; log tail:\n{benchlib.tail(log)}")
    if expected is not None and result.pages != expected:
        result.notes.append(f"WARNING: {result.pages} pages, expected {expected}")
    return result


def report_line(r: RunResult, rep: int) -> str:
    return (
        f"[{r.name} #{rep + 1}] {r.pages} pages in {r.wall_s:.2f} s = {r.pages_per_s:,.0f} pages/s, "
        f"CPU {r.cpu_s:.2f} s, nginx CPU {r.server_cpu_s:.2f} s, RSS main {r.rss_main_mb:.0f} MB, "
        f"tree {r.rss_tree_mb:.0f} MB, PSS tree {r.pss_tree_mb:.0f} MB ({r.max_procs} procs)"
        + (f"; CPU by role: {roles_text(r.cpu_roles)}" if len(r.cpu_roles) > 1 else "")
    )


def roles_text(roles: dict[str, float]) -> str:
    return ", ".join(f"{role} {cpu:.2f} s" for role, cpu in roles.items())


def run_all(
    peers: list[Peer],
    server: Nginx,
    expected: int | None,
    args: argparse.Namespace,
    runs_dir: Path = WORK_DIR / "runs",
) -> dict[str, list[RunResult]]:
    results: dict[str, list[RunResult]] = {p.name: [] for p in peers}
    for rep in range(args.repeat):
        for peer in peers:
            result = run_peer(peer, rep, server, expected, args.timeout, runs_dir)
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
        **{
            f"cpu:{role}": median(r.cpu_roles.get(role, 0.0) for r in runs)
            for role in benchlib.CPU_ROLES
            if any(role in r.cpu_roles for r in runs)
        },
    }


def role_lines(summaries: dict[str, dict[str, float]]) -> list[str]:
    """Where each multi-threaded or multi-process peer's CPU went (medians of the sampled
    CPU by role): for ours, the event loop is the main thread."""
    lines = []
    for name, s in summaries.items():
        roles = {k.removeprefix("cpu:"): v for k, v in s.items() if k.startswith("cpu:")}
        if len(roles) > 1:
            lines.append(f"- {LABELS[name]}, CPU by role (medians, sampled): {roles_text(roles)}")
    return lines


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
    for other in ("wget2", "crawlee", "scrapy", "fetch", "single"):
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


def report_tail(
    summaries: dict[str, dict[str, float]],
    peers: list[Peer],
    server: Nginx,
    results: dict[str, list[RunResult]],
    extra: list[str] | None = None,
) -> list[str]:
    """The table, `extra` lines, the ratios, machine, notes and warnings, and every run."""
    notes = [f"- {peer.name}: {note}" for peer in peers for note in peer.notes]
    warnings = [
        f"- {r.name} run: {n.splitlines()[0]}"
        for runs in results.values()
        for r in runs
        for n in r.notes
    ]
    return [
        results_table(summaries),
        "",
        *(extra or []),
        *ratio_lines(summaries),
        *role_lines(summaries),
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


def markdown(
    args, site: dict, peers: list[Peer], server: Nginx, results: dict[str, list[RunResult]]
) -> str:
    summaries = {name: summarize(runs) for name, runs in results.items() if runs}
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
        *report_tail(summaries, peers, server, results),
    ]
    return "\n".join(parts)


# ---------------------------------------------------------------- --site-dir: a directory as is


@dataclass
class StaticSite:
    """An existing directory served as is: no manifest, only the list of its `*.html` files."""

    root: Path
    start: str
    base_url: str
    work: Path
    """Where urls.txt and the runs go."""
    html_paths: list[str]
    """The `*.html` files under `root`, as sorted POSIX paths relative to it."""
    html_bytes: int

    @property
    def seed_url(self) -> str:
        return self.url(self.start)

    def url(self, path: str) -> str:
        return f"{self.base_url}/{quote(path)}"

    def path_of(self, url: str) -> str | None:
        """The path relative to the served root of one of its URLs (None: another origin)."""
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" != self.base_url:
            return None
        path = unquote(parts.path).lstrip("/")
        return f"{path}?{parts.query}" if parts.query else path


def prepare_static_site(root: Path, start: str, base_url: str, work: Path) -> StaticSite:
    """List `root`'s `*.html` files and write their URLs (the start page first) to
    `work`/urls.txt for the fetch-only peer."""
    files = sorted(p for p in root.rglob("*.html") if p.is_file())
    site = StaticSite(
        root=root,
        start=start.lstrip("/"),
        base_url=base_url,
        work=work,
        html_paths=[p.relative_to(root).as_posix() for p in files],
        html_bytes=sum(p.stat().st_size for p in files),
    )
    ordered = sorted(site.html_paths, key=lambda path: path != site.start)
    work.mkdir(parents=True, exist_ok=True)
    (work / "urls.txt").write_text("".join(site.url(path) + "\n" for path in ordered))
    return site


def examples(paths: set[str]) -> str:
    shown = ", ".join(f"`{path}`" for path in sorted(paths)[:EXAMPLES])
    return shown + (f" and {len(paths) - EXAMPLES} more" if len(paths) > EXAMPLES else "")


def page_lines(
    site: StaticSite, peers: list[Peer], results: dict[str, list[RunResult]], runs_dir: Path
) -> list[str]:
    """Each peer's distinct pages, where the peers disagree, and how a crawler's pages differ
    from the directory's `*.html` files (from its last run)."""
    n_files = len(site.html_paths)
    crawled = {name: runs for name, runs in results.items() if runs and name in CRAWLERS}
    medians = {name: median(r.pages for r in runs) for name, runs in crawled.items()}
    lines = []
    if len(set(medians.values())) == 1:
        (count,) = set(medians.values())
        who = "every crawler" if len(medians) > 1 else SHORT_LABELS[next(iter(medians))]
        lines.append(f"- distinct pages: {who} fetched {count:.0f} (of {n_files} .html files)")
    elif medians:
        counts = ", ".join(f"{SHORT_LABELS[name]} {count:.0f}" for name, count in medians.items())
        lines.append(f"- distinct pages differ (medians): {counts} (of {n_files} .html files)")
    for name, runs in crawled.items():
        if len({r.pages for r in runs}) > 1:
            counts = ", ".join(str(r.pages) for r in runs)
            lines.append(f"- {SHORT_LABELS[name]}: pages varied across runs: {counts}")
    files = set(site.html_paths)
    for peer in peers:
        if peer.urls is None or not results.get(peer.name):
            continue
        last = len(results[peer.name]) - 1
        try:
            urls = peer.urls(runs_dir / f"{peer.name}-{last}")
        except (OSError, sqlite3.Error, ValueError, KeyError) as exc:
            lines.append(f"- {SHORT_LABELS[peer.name]}: could not read its URLs: {exc}")
            continue
        paths = {site.path_of(url) or url for url in urls}
        missed, extra = files - paths, paths - files
        if missed or extra:
            parts = []
            if missed:
                parts.append(f"{len(missed)} of the .html files not fetched ({examples(missed)})")
            if extra:
                urls_word = "URL that is" if len(extra) == 1 else "URLs that are"
                parts.append(f"{len(extra)} {urls_word} none of them ({examples(extra)})")
            lines.append(f"- {SHORT_LABELS[peer.name]} (run {last + 1}): " + "; ".join(parts))
    if results.get("fetch"):
        count = median(r.pages for r in results["fetch"])
        lines.append(f"- fetch-only fetched {count:.0f} of the {n_files} listed .html files")
    return lines


def static_markdown(
    args: argparse.Namespace,
    site: StaticSite,
    peers: list[Peer],
    server: Nginx,
    results: dict[str, list[RunResult]],
    runs_dir: Path,
) -> str:
    summaries = {name: summarize(runs) for name, runs in results.items() if runs}
    n_files = len(site.html_paths)
    parts = [
        f"## Side-by-side crawl (static directory `{site.root}`, {n_files} .html files, "
        "nginx on 127.0.0.1)",
        "",
        f"Command: `python bench/crawl_bench.py --site-dir {site.root} --start {site.start} "
        f"--repeat {args.repeat} --only {args.only}"
        + (f" --crawl '{args.crawl}'" if args.crawl else "")
        + "`",
        "",
        f"Site: `{site.root}` served as is: {n_files} .html files "
        f"({site.html_bytes / 2**20:.0f} MiB of HTML), start page `{site.start}`. No manifest: "
        "each peer's distinct pages are reported and compared, not checked against an "
        "expected count; fetch-only fetches every .html file under the directory, linked or "
        f"not. Concurrency {args.concurrency}; medians of {args.repeat} runs, alternating peers.",
        "",
        *report_tail(summaries, peers, server, results, page_lines(site, peers, results, runs_dir)),
    ]
    return "\n".join(parts)


def main_static(args: argparse.Namespace) -> int:
    """`--site-dir`: serve the directory as is and compare the peers on it."""
    root = args.site_dir.resolve()
    if not root.is_dir():
        print(f"--site-dir {root}: not a directory", file=sys.stderr)
        return 2
    port = benchlib.free_port(args.port)
    work = WORK_DIR / f"static-{root.name}-p{port}"
    site = prepare_static_site(root, args.start, f"http://127.0.0.1:{port}", work)
    if not site.html_paths:
        print(f"--site-dir {root}: no .html files", file=sys.stderr)
        return 2
    if not (root / site.start).is_file():
        print(f"[site] WARNING: the start page {root / site.start} is not a file")
    print(f"[site] {root} as is: {len(site.html_paths)} .html files, seed {site.seed_url}")
    names = [n for n in PEERS if n in args.only.split(",")]
    runs_dir = work / "runs"
    with Nginx(root, port) as server:
        peers = build_peers(names, site.seed_url, work, args)
        results = run_all(peers, server, None, args, runs_dir)
        text = static_markdown(args, site, peers, server, results, runs_dir)
    save_json(args.json, "docs" if "python3" in str(args.site_dir) else "dir", results, args)
    print("\n" + text)
    benchlib.write_section(args.out, SITE_SECTION, text)
    print(f"\nwritten to {args.out}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument(
        "--site-dir",
        type=Path,
        help="serve this directory as is instead of generating the synthetic site",
    )
    parser.add_argument(
        "--start",
        default="index.html",
        help="with --site-dir: the seed page, a path relative to the directory",
    )
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
    parser.add_argument("--json", type=Path, help="also write the medians here (results_chart.py)")
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers: {', '.join(sorted(unknown))}")
    return args


def save_json(
    path: Path | None, corpus: str, results: dict[str, list[RunResult]], args: argparse.Namespace
) -> None:
    """Write this run's medians to ``path`` (for ``results_chart.py``), keeping the peers of an
    earlier run of the same corpus that this one did not run; each peer says when and by
    which command it ran, so that a chart of two runs says so."""
    if path is None:
        return
    data = json.loads(path.read_text()) if path.is_file() else {}
    if data.get("corpus") != corpus:
        data = {"corpus": corpus, "peers": {}}
    when = time.strftime("%Y-%m-%d %H:%M")
    command = "python bench/crawl_bench.py " + " ".join(sys.argv[1:])
    for name, runs in results.items():
        if runs:
            summary = summarize(runs)
            data["peers"][name] = {
                "label": SHORT_LABELS[name], "pages_per_s": summary["pages_per_s"],
                "wall_s": summary["wall_s"], "pages": summary["pages"],
                "pss_tree_mb": summary["pss_tree_mb"], "rss_tree_mb": summary["rss_tree_mb"],
                "runs_pages_per_s": [r.pages_per_s for r in runs], "when": when,
                "command": command, "repeat": args.repeat,
            }  # fmt: skip
    data["caption"] = CAPTIONS.get(corpus, str(getattr(args, "site_dir", "")))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"medians written to {path}")


CAPTIONS = {
    "site": "10,040 pages of 22 KB from nginx on loopback, concurrency 64",
    "docs": "the 527 reachable pages of Debian's python3.11-doc, nginx on loopback",
}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up servers on SIGTERM
    if args.site_dir is not None:
        return main_static(args)
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
    save_json(args.json, "site", results, args)
    print("\n" + text)
    benchlib.write_section(args.out, "crawl-bench", text)
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
