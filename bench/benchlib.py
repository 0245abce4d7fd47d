"""Shared helpers for the crawl benchmarks: measured child runs, venvs, machine facts, markdown.

`run_measured` starts one peer as a subprocess and reports its wall time, CPU seconds (user +
sys: the larger of the `RUSAGE_CHILDREN` delta, exact for descendants the child reaped, and
the sum over the tree's processes of their CPU as last sampled, which also sees processes
reaped by others, like fork-server workers) and memory: `pss_tree_mb` is the largest
sampled sum of PSS (shared pages counted once, split between sharers; read every 0.5 s).
`rss_main_mb` is the top process's own peak (VmHWM), `rss_tree_mb` the largest sampled sum of
VmRSS over the whole process tree (our crawler parses in a process pool, so its workers count).
`cpu_roles` splits the sampled CPU by where it ran (`CPU_ROLES`): Amdahl's serial part of our
crawl is its main thread (the event loop), which the other roles do not slow down.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / "work"
SCRAPY_VENV = BENCH_DIR / ".venv-scrapy"
SAMPLE_INTERVAL_S = 0.1
CPU_ROLES = ("main thread", "other threads", "child processes", "grandchildren")
"""Where a run's CPU went, as sampled: the command's main thread, its other threads, its
children, and theirs. For our crawl: the event loop; the SQLite writer (and the pool's
helper threads); the fork server and multiprocessing's resource tracker; the parse workers
(the fork server's children)."""


@dataclass
class RunResult:
    """What one measured child run cost."""

    name: str
    returncode: int
    wall_s: float
    cpu_s: float
    rss_main_mb: float
    rss_tree_mb: float
    max_procs: int
    pss_tree_mb: float = 0.0
    pages: int = 0
    server_cpu_s: float = 0.0
    discovered: int | None = None
    notes: list[str] = field(default_factory=list)
    cpu_roles: dict[str, float] = field(default_factory=dict)
    """CPU seconds by ``CPU_ROLES``, as last sampled (each may miss its last 0.1 s)."""

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s if self.wall_s > 0 else 0.0


# ---------------------------------------------------------------- /proc sampling


def _children_map() -> dict[int, list[int]]:
    """Map each pid to its direct children, from /proc/*/stat."""
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def process_tree(root: int) -> list[int]:
    """The pid `root` and all its live descendants."""
    return list(process_depths(root))


def process_depths(root: int) -> dict[int, int]:
    """The pid `root` (depth 0) and all its live descendants, with their depth below it."""
    kids = _children_map()
    depths, todo = {}, [(root, 0)]
    while todo:
        pid, depth = todo.pop()
        depths[pid] = depth
        todo.extend((kid, depth + 1) for kid in kids.get(pid, ()))
    return depths


def _cpu_and_start(stat_path: str) -> tuple[float, int] | None:
    """(CPU seconds, start time in ticks since boot) of a process or thread; None if gone.
    The start time tells a reused pid or thread id from the one seen before."""
    try:
        with open(stat_path, "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[19])


def _threads_cpu_s(pid: int) -> dict[tuple[int, int], float]:
    """CPU seconds of each live thread of `pid`, by (thread id, start time)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        seen = _cpu_and_start(f"/proc/{pid}/task/{tid}/stat")
        if seen is not None:
            out[(int(tid), seen[1])] = seen[0]
    return out


def _status_kb(pid: int, keys: Sequence[str]) -> dict[str, int]:
    """Read a few `kB` fields (VmRSS, VmHWM) of /proc/PID/status; empty when the pid is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                if name in keys:
                    out[name] = int(rest.split()[0])
    except (OSError, ValueError):
        return {}
    return out


def tree_cpu_s(root: int) -> float:
    """User + system CPU seconds of a live process tree (for a long-running server)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


PSS_EVERY = 5
"""Read PSS on every 5th memory sample (every 0.5 s)."""


def _pss_kb(pid: int) -> int:
    """Proportional set size of a process (/proc/PID/smaps_rollup): its private pages plus
    its share of pages shared with others. Summed over a tree, shared pages (a fork
    server's preloaded libraries in each forked worker) count once, not once per process
    as in the RSS sum. 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class MemorySampler(threading.Thread):
    """Polls a process tree's memory until stopped."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.main_hwm_kb = 0
        self.tree_peak_kb = 0
        self.tree_pss_peak_kb = 0
        self.max_procs = 0
        self.cpu_by_pid: dict[tuple[int, int], float] = {}
        """Last CPU seconds seen of each process of the tree: processes that are never
        reaped by the measured command (a fork server's workers, reaped by it, and the fork
        server itself, orphaned at exit) are missing from ``RUSAGE_CHILDREN``."""
        self._role_of: dict[tuple[str, int, int], str] = {}
        self._cpu_of: dict[tuple[str, int, int], float] = {}
        self._samples = 0
        self._stop_event = threading.Event()

    def sample(self) -> None:
        depths = process_depths(self.root)
        tree = list(depths)
        rss_sum = 0
        pss_sum = 0
        with_pss = self._samples % PSS_EVERY == 0  # smaps_rollup walks page tables: costly
        self._samples += 1
        for pid in tree:
            fields = _status_kb(pid, ("VmRSS", "VmHWM"))
            rss_sum += fields.get("VmRSS", 0)
            if with_pss:
                pss_sum += _pss_kb(pid)
            seen = _cpu_and_start(f"/proc/{pid}/stat")
            if seen is not None:
                self.cpu_by_pid[(pid, seen[1])] = seen[0]
                if depths[pid] > 0:
                    key = ("pid", pid, seen[1])
                    self._role_of[key] = CPU_ROLES[min(depths[pid] + 1, 3)]
                    self._cpu_of[key] = seen[0]
            if pid == self.root:
                for (tid, start), thread_cpu in _threads_cpu_s(pid).items():
                    key = ("tid", tid, start)
                    self._role_of[key] = CPU_ROLES[0 if tid == pid else 1]
                    self._cpu_of[key] = thread_cpu
                self.main_hwm_kb = max(self.main_hwm_kb, fields.get("VmHWM", 0))
        self.tree_peak_kb = max(self.tree_peak_kb, rss_sum)
        self.tree_pss_peak_kb = max(self.tree_pss_peak_kb, pss_sum)
        self.max_procs = max(self.max_procs, len(tree))

    def run(self) -> None:
        while not self._stop_event.wait(SAMPLE_INTERVAL_S):
            self.sample()

    def cpu_roles(self) -> dict[str, float]:
        """CPU seconds by ``CPU_ROLES`` (roles never seen left out)."""
        roles: dict[str, float] = {}
        for key, cpu in self._cpu_of.items():
            role = self._role_of[key]
            roles[role] = roles.get(role, 0.0) + cpu
        return {role: roles[role] for role in CPU_ROLES if role in roles}

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(
    name: str,
    cmd: Sequence[str],
    *,
    log_path: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> RunResult:
    """Run `cmd` to completion, its output going to `log_path`, and measure it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cpu0 = _children_cpu()
    start = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        sampler = MemorySampler(proc.pid)
        sampler.sample()
        sampler.start()
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            returncode = proc.wait()
        finally:
            sampler.stop()
    wall = time.perf_counter() - start
    result = RunResult(
        name=name,
        returncode=returncode,
        wall_s=wall,
        # the larger of: what the command and the children it reaped used (exact, but blind
        # to processes reaped by others), and the tree's CPU as last sampled (every 0.1 s)
        cpu_s=max(_children_cpu() - cpu0, sum(sampler.cpu_by_pid.values())),
        rss_main_mb=sampler.main_hwm_kb / 1024,
        rss_tree_mb=sampler.tree_peak_kb / 1024,
        max_procs=sampler.max_procs,
        pss_tree_mb=sampler.tree_pss_peak_kb / 1024,
        cpu_roles=sampler.cpu_roles(),
    )
    if wall >= timeout_s:
        result.notes.append(f"killed after the {timeout_s:.0f} s timeout")
    return result


def wait_for_background(
    patterns: Sequence[str] = ("crawler.relevance.warmer",), timeout_s: float = 120.0
) -> float:
    """Wait until no process whose command line holds one of ``patterns`` runs (our crawl's
    detached search-index warmer, which outlives the measured process): the next run, ours
    or a peer's, must not share the CPU with it. Returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        busy = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            if any(p in cmdline for p in patterns):
                busy = True
                break
        if not busy:
            break
        time.sleep(0.1)
    return time.monotonic() - start


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------- ports, venvs, tools


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(preferred: int = 0) -> int:
    """`preferred` when it is free, else any free loopback port."""
    if preferred and port_is_free(preferred):
        return preferred
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout_s: float = 15.0) -> None:
    """Block until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def ensure_scrapy_venv(venv: Path = SCRAPY_VENV) -> Path:
    """Create the Scrapy venv (python -m venv + pip install scrapy) if missing; its python."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import scrapy"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"[setup] creating {venv} and installing scrapy into it", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "scrapy"], check=True)
    return python


def venv_package_version(python: Path | str, package: str) -> str:
    """A package's version as seen by another interpreter ('-' when absent)."""
    code = f"from importlib import metadata; print(metadata.version({package!r}))"
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "-"


def local_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def find_crawl_command(explicit: str | None = None) -> list[str] | None:
    """The `crawl` command: `explicit` (a command line, e.g. "python -m crawler"), else the
    console script next to this python, in /work/venv, or on PATH."""
    if explicit:
        return shlex.split(explicit)
    for candidate in (Path(sys.executable).parent / "crawl", Path("/work/venv/bin/crawl")):
        if candidate.exists():
            return [str(candidate)]
    found = shutil.which("crawl")
    return [found] if found else None


def crawl_help(crawl: list[str] | None) -> str | None:
    """`crawl --help` output, or None when it fails (the crawler isn't usable yet)."""
    if not crawl:
        return None
    try:
        proc = subprocess.run(
            [*crawl, "--help"], capture_output=True, text=True, timeout=120, env=repo_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def repo_env() -> dict[str, str]:
    """The environment with the repository first on PYTHONPATH (for `python -m crawler`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_DIR), env.get("PYTHONPATH")]))
    return env


def supported_flags(help_text: str, wanted: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split `wanted` flags into those `crawl --help` mentions and those it doesn't."""
    flags = set(re.findall(r"(?<![\w-])--[\w][\w-]*", help_text))
    wanted = list(wanted)
    return [f for f in wanted if f in flags], [f for f in wanted if f not in flags]


# ---------------------------------------------------------------- reporting


def machine_info() -> dict[str, str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "memory": f"{mem_gib:.0f} GiB",
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def median(values: Iterable[float]) -> float:
    vals = list(values)
    return statistics.median(vals) if vals else 0.0


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub markdown table; the first column left-aligned, the rest right-aligned."""
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|---|" + "---:|" * (len(header) - 1))
    lines.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def write_section(path: Path, key: str, body: str) -> None:
    """Replace (or append) the section between `<!-- key:begin -->` and `<!-- key:end -->`."""
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + block
    path.write_text(text)


_INCLUDE_AND_SUFFIX = """
import sysconfig
print(sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX"))
"""

EXTENSIONS = {
    "parsers/_walk": ("parsers/_walk.c", "parsers/_resolve.c", "parsers/_scan.c"),
    "crawler/frontier/_seen": ("crawler/frontier/_seen.c",),
}
"""The C extensions setup.py lists (a module's path without its suffix -> its sources): a
tree is built with those of them it has."""


def build_extensions(python: str, tree: Path) -> None:
    """Compile ``tree``'s C extensions in place (``EXTENSIONS``, those of their sources the
    tree has), as `pip install` would; a warning for one that does not build (that version
    then runs on its Python form). Not through setup.py: a venv's setuptools may be older
    than the one pip builds with, and refuse the project's metadata."""
    include, suffix = subprocess.run(
        [python, "-c", _INCLUDE_AND_SUFFIX], capture_output=True, text=True, check=True
    ).stdout.split()
    compiler = os.environ.get("CC", "cc")
    for module, names in EXTENSIONS.items():
        sources = [str(tree / name) for name in names if (tree / name).exists()]
        if not sources:
            continue
        out = tree / f"{module}{suffix}"
        cmd = [compiler, "-shared", "-fPIC", "-O2", f"-I{include}", *sources, "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            print(f"[ours] WARNING: {out.name} did not build: {done.stderr.strip()[-300:]}")


def prepare_ours(python: str, tree: Path | None = None) -> None:
    """Leave the repository's crawler as `pip install .` and a first crawl would: bytecode
    compiled, the dataclasses' methods in their memo (`parsers.dataclass_cache`), numba
    kernels in their cache, the parse kernels compiled ahead of time (what the first
    crawl's background warmer does, `parsers.aot`). Run from a fresh clone, it would
    otherwise compile its ~60 modules from source in every run where
    `PYTHONDONTWRITEBYTECODE` is set (~0.1 s a crawl), and the first run would also compile
    the kernels (~15 s); Scrapy's venv is installed, so compiled, already. ``tree``: another
    checkout (``ab_bench``'s version A), prepared from its own directory, its C extensions
    (``parsers/_walk.c``...) built there first as `pip install` builds them: without them
    that version would run on their Python forms."""
    env = repo_env()
    if tree is not None:  # its own modules, from its working directory
        env.pop("PYTHONPATH", None)
    root = tree or REPO_DIR
    packages = [str(root / name) for name in ("crawler", "parsers", "storage")]
    memo = (
        "import parsers.dataclass_cache as m, crawler.cli.crawl, crawler.cli.runner; m.save(True)"
    )
    if tree is not None:
        build_extensions(python, tree)
    steps = [
        [python, "-m", "compileall", "-q", *packages],
        [python, "-c", memo],
        [python, "-c", "import parsers.preload"],
        [python, "-m", "parsers.aot_build"],
    ]
    for step in steps:
        done = subprocess.run(step, env=env, cwd=root, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        if done.returncode != 0:
            print(f"[ours] WARNING: {' '.join(step[1:3])} failed: {done.stderr.strip()[-300:]}")
    print(
        "[ours] prepared: bytecode compiled, kernels cached and compiled (as a first crawl would)"
    )
