"""Start-up cost: `crawl --help`, and a whole one-page crawl with the numba cache warm.

    python bench/startup_bench.py [--repeat 7] [--out bench/RESULTS.md]

Serves one small HTML page (and a robots.txt) from a thread on 127.0.0.1, then times, as
subprocesses, medians of `--repeat` runs after one unmeasured warm-up run each (which fills
the numba cache if it is cold):
- `crawl --help`;
- `crawl seeds.txt --max-pages 1 --delay 0` (a fresh database each run: schema, robots.txt,
  one page, the parse pool started and stopped), without and with `--query` (numba in the
  main process). `--delay 0`: by default the page would wait the politeness delay (1 s)
  after the robots.txt request to the same host, which is not start-up cost.
The crawl figure is the whole process, from exec to exit: what cron or a shell waits for.
Before each run the bench waits for the last run's search-index warmer (a detached process a
crawl's end starts, ``crawler.relevance.warm``), which would take a core from it, except in
the last case, which runs them back to back as a script's loop would; the
bytecode is compiled and the numba cache filled first (``benchlib.prepare_ours``).
"""

from __future__ import annotations

import argparse
import http.server
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchlib

PAGE = b"<html><head><title>t</title></head><body><p>fast python crawler</p></body></html>"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"User-agent: *\nAllow: /\n" if self.path == "/robots.txt" else PAGE
        kind = "text/plain" if self.path == "/robots.txt" else "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def warmer_running() -> bool:
    """Whether a search-index warmer (``python -m crawler.relevance.warmer``) is running."""
    for proc in Path("/proc").iterdir():
        try:
            if b"crawler.relevance.warmer" in (proc / "cmdline").read_bytes():
                return True
        except OSError:  # not a process, or gone
            continue
    return False


def timed(
    cmd: list[str], repeat: int, cwd: Path, fresh_db: Path | None = None, wait: bool = True
) -> list[float]:
    """Wall seconds of `repeat` runs of `cmd` after one unmeasured run; ``wait``: each run
    after the last one's warmer has ended (else back to back, as a user's loop runs them)."""
    times = []
    for i in range(repeat + 1):
        if fresh_db is not None:
            for suffix in ("", "-wal", "-shm", ".lock"):
                Path(f"{fresh_db}{suffix}").unlink(missing_ok=True)
        while wait and warmer_running():  # the last run's warmer (detached, after its exit)
            time.sleep(0.05)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=benchlib.repo_env(), capture_output=True)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.decode()}")
        if i:
            times.append(elapsed)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--crawl", help='our crawler\'s command, e.g. "python -m crawler"')
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    crawl = benchlib.find_crawl_command(args.crawl)
    if crawl is None:
        raise SystemExit("no crawl command found")
    benchlib.prepare_ours(sys.executable)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "seeds.txt").write_text(url + "\n")
        db = work / "crawl.db"
        base = [*crawl, "seeds.txt", "--db", str(db), "--max-pages", "1", "--delay", "0", "-q"]
        cases = [
            ("`crawl --help`", [*crawl, "--help"], None, True),
            ("one-page crawl", base, db, True),
            ("one-page crawl with `--query`", [*base, "--query", "fast python"], db, True),
            ("one-page crawls back to back (warmer not waited for)", base, db, False),
        ]
        for label, cmd, fresh, wait in cases:
            times = timed(cmd, args.repeat, work, fresh, wait)
            rows.append((label, f"{statistics.median(times):.2f}", f"{min(times):.2f}",
                         f"{max(times):.2f}"))  # fmt: skip
            print(f"{label}: median {statistics.median(times):.3f} s ({len(times)} runs)")
    server.shutdown()
    info = benchlib.machine_info()
    text = "\n".join(
        [
            "## Start-up (warm numba cache)",
            "",
            f"Command: `python bench/startup_bench.py --repeat {args.repeat}`; whole process "
            "wall time, exec to exit, after one unmeasured run.",
            "",
            benchlib.markdown_table(("command", "median s", "min s", "max s"), rows),
            "",
            f"- machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory']}, Python {info['python']}",
        ]
    )
    print(text)
    if args.out is not None:
        benchlib.write_section(args.out, "startup-bench", text)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
