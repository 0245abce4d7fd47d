"""Scale-out benchmark: pages/s with 1, 2 and 4 `crawl` processes sharing one PostgreSQL
database, and the cost of the shared store's main statements.

    python bench/scale_bench.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres]
                                [--procs 1 2 4] [--only static,remote,statements]

Three parts, each on a database of its own (created from the maintenance database `--dsn`,
dropped at the end):

- **static**: `--hosts` origins, each a private nginx serving its own `bench/sitegen.py` site
  (`--pages` pages of 15-40 KB), crawled with `--delay 0`: the CPU-bound case (parsing,
  storing), as in bench/RESULTS.md section 1, but over several hosts.
- **remote**: `--remote-hosts` origins served by an aiohttp process that answers every page
  after `--latency` seconds (small pages): the latency-bound case of crawling remote sites,
  where one process is limited by its `--concurrency`.
- **statements**: `PostgresStore.save` of a 256-page batch and `claim` against the local
  server, timed in-process (median of `--repeat`).

A run's time is from starting the processes to the moment every page of the site is
committed (the database is polled every 0.1 s); the processes are then stopped if they have
not ended by themselves. Alongside: the crawl processes' CPU seconds (process trees), the
PostgreSQL server's CPU seconds and the WAL it wrote.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from benchlib import (
    REPO_DIR,
    WORK_DIR,
    free_port,
    machine_info,
    markdown_table,
    repo_env,
    tree_cpu_s,
)

sys.path.insert(0, str(REPO_DIR))

import asyncpg

from storage.base import PageRecord, RunSummary, UrlRecord
from storage.postgres import PostgresStore

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


# ---------------------------------------------------------------- the database


def with_database(dsn: str, name: str) -> str:
    return urlsplit(dsn)._replace(path="/" + name).geturl()


async def _admin(dsn: str, sql: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@contextlib.contextmanager
def bench_database(admin_dsn: str):  # type: ignore[no-untyped-def]
    name = f"crawler_scale_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    asyncio.run(_admin(admin_dsn, f'CREATE DATABASE "{name}"'))
    try:
        yield with_database(admin_dsn, name)
    finally:
        asyncio.run(_admin(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def reset(dsn: str) -> None:
    """An empty database, and the previous run's writes flushed (a checkpoint), so that
    they are not counted in the next run's server CPU."""
    asyncio.run(_admin(dsn, "DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    with contextlib.suppress(asyncpg.PostgresError):  # CHECKPOINT needs a privileged role
        asyncio.run(_admin(dsn, "CHECKPOINT"))


async def _fetchval(dsn: str, sql: str) -> object:
    connection = await asyncpg.connect(dsn)
    try:
        return await connection.fetchval(sql)
    finally:
        await connection.close()


def fetchval(dsn: str, sql: str) -> object:
    return asyncio.run(_fetchval(dsn, sql))


class PageCounter:
    """Counts stored pages over one connection kept open (a new connection each poll would
    cost the server a backend start, counted in its CPU)."""

    def __init__(self, dsn: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._connection = self._loop.run_until_complete(asyncpg.connect(dsn))

    def __call__(self) -> int:
        try:
            count = self._loop.run_until_complete(
                self._connection.fetchval("SELECT count(*) FROM pages")
            )
        except asyncpg.exceptions.UndefinedTableError:
            return 0
        return int(count)

    def close(self) -> None:
        self._loop.run_until_complete(self._connection.close())
        self._loop.close()


async def _postmaster_pid(dsn: str) -> int | None:
    connection = await asyncpg.connect(dsn)
    try:
        backend = await connection.fetchval("SELECT pg_backend_pid()")
        try:  # (while the backend is alive)
            stat = Path(f"/proc/{backend}/stat").read_text()
        except OSError:
            return None  # a server on another machine
        return int(stat.rsplit(")", 1)[1].split()[1])
    finally:
        await connection.close()


def postmaster_pid(dsn: str) -> int | None:
    return asyncio.run(_postmaster_pid(dsn))


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL server: the postmaster, its live backends and the ones
    that have ended (reaped children's time counts in the postmaster's cutime/cstime)."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    reaped = int(fields[13]) + int(fields[14])
    return tree_cpu_s(postmaster) + reaped / tick


def wal_lsn(dsn: str) -> str:
    return str(fetchval(dsn, "SELECT pg_current_wal_lsn()::text"))


def wal_bytes(dsn: str, since: str) -> int:
    return int(fetchval(dsn, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{since}')"))  # type: ignore[arg-type]


# ---------------------------------------------------------------- sites


class StaticSites:
    """`hosts` nginx servers, each serving its own generated site."""

    def __init__(self, hosts: int, pages: int) -> None:
        from nginx import Nginx
        from sitegen import generate

        self.servers: list[Nginx] = []
        self.seeds: list[str] = []
        self.expected = 0
        ports: list[int] = []
        while len(ports) < hosts:  # distinct ports (each one free when picked)
            port = free_port()
            if port not in ports:
                ports.append(port)
        for h, port in enumerate(ports):
            root = WORK_DIR / f"scale-site-{pages}-h{h}-p{port}"
            generate(root, pages, f"http://127.0.0.1:{port}", seed=h + 1)
            urls = (root / "urls.txt").read_text().split()
            self.seeds.append(urls[0])
            self.expected += len(urls)
            self.servers.append(Nginx(root, port))

    def __enter__(self) -> StaticSites:
        for server in self.servers:
            server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers:
            server.stop()

    def cpu_s(self) -> float:
        return sum(server.cpu_s() for server in self.servers)


class RemoteSites:
    """`hosts` origins served by an aiohttp process (`serve` below), `latency` per page."""

    def __init__(self, hosts: int, pages: int, latency: float) -> None:
        cmd = [sys.executable, __file__, "serve", "--hosts", str(hosts), "--pages", str(pages),
               "--latency", str(latency)]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=repo_env())
        assert self.proc.stdout is not None
        ports = json.loads(self.proc.stdout.readline())
        self.seeds = [f"http://127.0.0.1:{port}/" for port in ports]
        self.expected = hosts * pages

    def __enter__(self) -> RemoteSites:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    def cpu_s(self) -> float:
        return tree_cpu_s(self.proc.pid)


def serve(hosts: int, pages: int, latency: float) -> None:
    """Serve `hosts` sites of `pages` small pages; print the ports (JSON) when ready."""
    from aiohttp import web

    rng = random.Random(1)
    plan = [
        [({(h, i + 1)} if i + 1 < pages else set())
         | {(h, rng.randrange(pages)) for _ in range(3)}
         | {(rng.randrange(hosts), rng.randrange(pages))}
         for i in range(pages)]
        for h in range(hosts)
    ]  # fmt: skip
    ports: list[int] = []  # bound below (port 0: the kernel's choice)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]

    def body(h: int, i: int) -> str:
        links = "".join(f'<a href="http://127.0.0.1:{ports[t]}/p{j}.html">{t}/{j}</a> '
                        for t, j in sorted(plan[h][i]))  # fmt: skip
        text = " ".join(words[(i * 7 + k) % len(words)] for k in range(300))
        return (f"<!DOCTYPE html><html><head><title>host {h} page {i}</title></head><body>"
                f"<p>{text}</p><p>{links}</p></body></html>")  # fmt: skip

    def handler(h: int):  # type: ignore[no-untyped-def]
        async def handle(request: web.Request) -> web.StreamResponse:
            path = request.path
            i = 0 if path == "/" else None
            if path.startswith("/p") and path.endswith(".html") and path[2:-5].isdigit():
                i = int(path[2:-5])
            if i is None or not 0 <= i < pages:
                return web.Response(status=404, text="missing")
            await asyncio.sleep(latency)
            return web.Response(text=body(h, i), content_type="text/html")

        return handle

    async def main() -> None:
        runners = []
        for h in range(hosts):
            app = web.Application()
            app.router.add_route("GET", "/{tail:.*}", handler(h))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
            runners.append(runner)
        print(json.dumps(ports), flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


# ---------------------------------------------------------------- crawl runs


@dataclass
class ScaleRun:
    procs: int
    pages: int
    wall_s: float
    steady_pages_s: float
    crawl_cpu_s: float
    db_cpu_s: float
    server_cpu_s: float
    wal_mb: float
    exited: str

    @property
    def pages_s(self) -> float:
        return self.pages / self.wall_s


def crawl_processes(
    n: int, sites: StaticSites | RemoteSites, dsn: str, flags: list[str], timeout_s: float
) -> ScaleRun:
    reset(dsn)
    pages_stored = PageCounter(dsn)
    seeds = WORK_DIR / "scale-seeds.txt"
    seeds.write_text("".join(url + "\n" for url in sites.seeds))
    postmaster = postmaster_pid(dsn)
    db_cpu0 = server_cpu_s(postmaster) if postmaster else 0.0
    server_cpu0 = sites.cpu_s()
    lsn = wal_lsn(dsn)
    logs = [WORK_DIR / f"scale-worker-{k}.log" for k in range(n)]
    start = time.perf_counter()
    procs = []
    for log in logs:
        with open(log, "wb") as out:
            cmd = [sys.executable, "-m", "crawler", str(seeds), "--db", dsn, *flags]
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                          env=repo_env(), start_new_session=True))  # fmt: skip
    marks: list[tuple[float, int]] = []
    cpu: dict[int, float] = {}
    try:
        while True:
            stored = pages_stored()
            now = time.perf_counter()
            marks.append((now - start, stored))
            for proc in procs:
                with contextlib.suppress(Exception):
                    cpu[proc.pid] = max(cpu.get(proc.pid, 0.0), tree_cpu_s(proc.pid))
            if stored >= sites.expected:
                break
            if now - start > timeout_s:
                raise RuntimeError(
                    f"{n} processes: {stored}/{sites.expected} pages after {timeout_s} s"
                )
            if all(proc.poll() is not None for proc in procs):
                raise RuntimeError(f"{n} processes ended with {stored}/{sites.expected} pages: "
                                   f"see {logs[0]}")  # fmt: skip
            time.sleep(0.1)
        wall = marks[-1][0]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            for proc in procs:
                with contextlib.suppress(Exception):
                    cpu[proc.pid] = max(cpu.get(proc.pid, 0.0), tree_cpu_s(proc.pid))
            time.sleep(0.1)
        exited = sum(p.poll() == 0 for p in procs)
    finally:
        pages_stored.close()
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    low, high = sites.expected * 0.1, sites.expected * 0.9
    t_low = next(t for t, c in marks if c >= low)
    t_high = next(t for t, c in marks if c >= high)
    c_low = next(c for t, c in marks if c >= low)
    c_high = next(c for t, c in marks if c >= high)
    steady = (c_high - c_low) / (t_high - t_low) if t_high > t_low else float("nan")
    return ScaleRun(
        procs=n,
        pages=sites.expected,
        wall_s=wall,
        steady_pages_s=steady,
        crawl_cpu_s=sum(cpu.values()),
        db_cpu_s=(server_cpu_s(postmaster) - db_cpu0) if postmaster else float("nan"),
        server_cpu_s=sites.cpu_s() - server_cpu0,
        wal_mb=wal_bytes(dsn, lsn) / 1e6,
        exited=f"{exited}/{n}",
    )


def scale_table(runs: list[ScaleRun]) -> str:
    base = runs[0].pages_s if runs else 1.0
    return markdown_table(
        ["processes", "pages", "time (s)", "pages/s", "vs 1", "steady pages/s",
         "crawl CPU s", "PostgreSQL CPU s", "site CPU s", "WAL MB", "exited by themselves"],
        [[r.procs, f"{r.pages:,}", f"{r.wall_s:.1f}", f"{r.pages_s:,.0f}", f"{r.pages_s / base:.2f}x",
          f"{r.steady_pages_s:,.0f}", f"{r.crawl_cpu_s:.1f}", f"{r.db_cpu_s:.1f}",
          f"{r.server_cpu_s:.1f}", f"{r.wal_mb:.0f}", r.exited] for r in runs],
    )  # fmt: skip


# ---------------------------------------------------------------- statement costs


def _page(url: str, links: list[str], rng: random.Random) -> PageRecord:
    text = " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "crawler")) for _ in range(800))
    return PageRecord(
        url=url, final_url=url, status=200, error=None, content_type="text/html", depth=2,
        body_bytes=25_000, fetched_at="2026-11-29T12:00:00+00:00", title=f"title {url}",
        text=text, lang="en", content_hash=uuid.uuid4().hex, links_json=json.dumps(links),
        tokens=rng.randbytes(1200), simhash=rng.getrandbits(64), next_fetch_at=time.time() + 86_400,
        interval_s=86_400.0,
    )  # fmt: skip


async def statement_costs(dsn: str, repeat: int) -> list[tuple[str, float, str]]:
    """(statement, median ms, what it did)."""
    await _admin(dsn, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    rng = random.Random(5)
    hosts = [f"http://h{k}.bench" for k in range(64)]
    store = PostgresStore(dsn, lease_ttl_s=30, claim_gap_s=0)
    other = PostgresStore(dsn, lease_ttl_s=30, claim_gap_s=0)
    await store.open()
    await other.open()
    out: list[tuple[str, float, str]] = []
    try:
        run_id = await store.start_run(64, "{}", "2026-11-29T12:00:00+00:00")
        other_run = await other.start_run(64, "{}", "2026-11-29T12:00:00+00:00")
        await store.open_frontier(run_id, [h + "/" for h in hosts], time.time(),
                                  "2026-11-29T12:00:00+00:00", 30 * 86_400)  # fmt: skip
        # a frontier of 64 hosts x 3,000 queued URLs
        for k in range(0, 3000, 500):
            await store.save([], [UrlRecord(f"{h}/q{k + j}", 2, 0.0, False, "t")
                                  for h in hosts for j in range(500)], [], run_id)  # fmt: skip
        timings: dict[str, list[float]] = {}

        def timed(name: str, seconds: float) -> None:
            timings.setdefault(name, []).append(seconds * 1000)

        counter = 0
        leased_per_claim: list[int] = []
        for _ in range(repeat):
            # claims until nothing new: each takes up to 16 hosts of its share (32 of 64) and
            # leases up to 200 URLs a host; the last one only renews
            rows = []
            while True:
                t = time.perf_counter()
                got = await store.claim(run_id, 10_000, time.time())
                if not got:
                    timed("claim_poll", time.perf_counter() - t)
                    break
                timed("claim_take", time.perf_counter() - t)
                leased_per_claim.append(len(got))
                rows += got
            t = time.perf_counter()
            await store.heartbeat(run_id, time.time())
            timed("heartbeat", time.perf_counter() - t)
            t = time.perf_counter()
            await store.outstanding()
            timed("outstanding", time.perf_counter() - t)
            # a 256-page batch of the leased URLs: each page with 50 links, 5 of them new
            batch = rows[:256]
            pages, found = [], []
            for q in batch:
                links = [f"{q.url.rsplit('/', 1)[0]}/q{rng.randrange(3000)}" for _ in range(45)]
                fresh = [f"{q.url.rsplit('/', 1)[0]}/n{counter}-{j}" for j in range(5)]
                counter += 1
                pages.append(_page(q.url, links + fresh, rng))
                found += [UrlRecord(u, 3, 0.0, False, "t") for u in fresh]
            t = time.perf_counter()
            await store.save(pages, found, [], run_id)
            timed("save_256", time.perf_counter() - t)
            # give everything back for the next round
            await store.finish_run(run_id, RunSummary("finished", "done", 0, 0, 0), "t")
            await asyncio.sleep(0)
            run_id = await store.start_run(64, "{}", "2026-11-29T12:00:00+00:00")
            await _admin(dsn, "UPDATE hosts SET lease_until = 0 WHERE owner IS NULL")
        del other_run
        leased = statistics.median(leased_per_claim)
        what = {
            "claim_take": f"2 live runs, 64 hosts with work: takes 16 hosts (the most a claim "
                          f"takes), leases {leased:.0f} URLs (200 a host) with their pages' "
                          f"validators",
            "claim_poll": "a claim with nothing new: renews 32 hosts, leases nothing",
            "heartbeat": "renews the run and its 32 host leases",
            "outstanding": "count of queued URLs (~190,000)",
            "save_256": "256 pages (~5 KB text, 1.2 KB tokens, 50 links each), 1,280 new URLs, "
                        "256 URL states, in one transaction",
        }  # fmt: skip
        for name, values in timings.items():
            out.append((name, statistics.median(values), what[name]))
    finally:
        await store.close()
        await other.close()
    return out


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    server = sub.add_parser("serve", help="(internal) serve the remote-like sites")
    server.add_argument("--hosts", type=int, required=True)
    server.add_argument("--pages", type=int, required=True)
    server.add_argument("--latency", type=float, required=True)
    parser.add_argument("--dsn", default=ADMIN_DSN, help="maintenance database to create from")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--only", default="static,remote,statements")
    parser.add_argument("--hosts", type=int, default=4, help="static: nginx hosts")
    parser.add_argument("--pages", type=int, default=2500, help="static: pages a host")
    parser.add_argument("--remote-hosts", type=int, default=32)
    parser.add_argument("--remote-pages", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.1, help="remote: seconds a page")
    parser.add_argument("--repeat", type=int, default=5, help="statements: rounds")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "serve":
        serve(args.hosts, args.pages, args.latency)
        return 0
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    parts = set(args.only.split(","))
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=REPO_DIR).stdout.strip()  # fmt: skip
    server_version = fetchval(args.dsn, "SHOW server_version")
    print(f"# scale bench on {revision}; PostgreSQL {server_version}; {machine_info()}")
    with bench_database(args.dsn) as dsn:
        if "static" in parts:
            flags = ["--delay", "0", "--per-host", "8", "--concurrency", "32", "--no-progress",
                     "--no-sitemaps", "--quiet", "--lease-ttl", "10"]  # fmt: skip
            with StaticSites(args.hosts, args.pages) as sites:
                runs = [crawl_processes(n, sites, dsn, flags, args.timeout) for n in args.procs]
            print(f"\n## static: {args.hosts} nginx hosts x {args.pages} pages; "
                  f"crawl {' '.join(flags)}\n")  # fmt: skip
            print(scale_table(runs))
        if "remote" in parts:
            flags = ["--delay", "0", "--per-host", "2", "--concurrency", "8", "--no-progress",
                     "--no-sitemaps", "--quiet", "--lease-ttl", "10", "--workers", "1"]  # fmt: skip
            with RemoteSites(args.remote_hosts, args.remote_pages, args.latency) as remote:
                runs = [crawl_processes(n, remote, dsn, flags, args.timeout) for n in args.procs]
            print(f"\n## remote: {args.remote_hosts} aiohttp hosts x {args.remote_pages} pages, "
                  f"{args.latency * 1000:.0f} ms a page; crawl {' '.join(flags)}\n")  # fmt: skip
            print(scale_table(runs))
        if "statements" in parts:
            costs = asyncio.run(statement_costs(dsn, args.repeat))
            print(f"\n## statements (median of {args.repeat})\n")
            print(markdown_table(["statement", "ms", "what"],
                                 [[n, f"{ms:.1f}", w] for n, ms, w in costs]))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
