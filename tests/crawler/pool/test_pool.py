"""crawler.pool.parse_pool: real worker processes (forked by the fork server), batching, failures, restart."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.errors import ParseError
from crawler.pool import parse_pool
from crawler.pool.batch import Batch
from crawler.pool.parse_pool import ParsePool
from parsers.page import ParseJob
from tests.proc import ROOT as ROOT_DIR
from tests.sites import SiteServer, html_handler


def job(i: int, body: bytes | None = None) -> ParseJob:
    url = f"http://e.com/{i}"
    return ParseJob(url, url, 200, "text/html", None,
                    body if body is not None else f"<title>{i}</title>".encode())  # fmt: skip


def test_batches_and_results_in_order() -> None:
    async def go() -> tuple[list[str], int]:
        async with ParsePool(2, batch_max=8) as pool:
            pages = await asyncio.gather(*(pool.parse(job(i)) for i in range(40)))
            return [p.title for p in pages], pool.batches

    titles, batches = asyncio.run(go())
    assert titles == [str(i) for i in range(40)]
    assert batches == 5  # 40 pages in batches of 8: five round trips, not forty


def test_a_batch_goes_out_once_its_bodies_weigh_batch_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Big pages go a few to a batch (a worker holds a batch's trees and text at once)."""
    monkeypatch.setattr(parse_pool, "BATCH_BYTES", 1000)

    async def go() -> tuple[list[str], int]:
        async with ParsePool(2, batch_max=32) as pool:
            bodies = [f"<title>{i}</title><p>{'x' * 230}</p>".encode() for i in range(40)]
            pages = await asyncio.gather(*(pool.parse(job(i, b)) for i, b in enumerate(bodies)))
            return [p.title for p in pages], pool.batches

    titles, batches = asyncio.run(go())
    assert titles == [str(i) for i in range(40)]
    assert batches == 10  # ~250-byte bodies, 4 to 1,000 bytes: not the 2 of batch_max


async def _until_live(pool: ParsePool, workers: int) -> None:
    while len(pool._live) < workers:
        await asyncio.sleep(0.01)


def test_pages_for_idle_workers_go_at_once_shared_among_them() -> None:
    """Idle workers: the pages of one turn of the loop go without the flush delay, half to
    each worker, not all to one while the other idles."""

    async def go() -> tuple[list[str], int, float]:
        async with ParsePool(2, batch_max=32, flush_delay_s=30.0) as pool:
            await _until_live(pool, 2)
            start = time.monotonic()
            pages = await asyncio.gather(*(pool.parse(job(i)) for i in range(6)))
            return [p.title for p in pages], pool.batches, time.monotonic() - start

    titles, batches, elapsed = asyncio.run(go())
    assert titles == [str(i) for i in range(6)]
    assert batches == 2  # three pages each
    assert elapsed < 10.0  # not the 30 s flush delay


def test_requests_made_before_the_workers_are_up_are_shared_among_them() -> None:
    """The crawl's first pages wait for the workers' start; then each worker gets a share,
    not the first one up all of them, and none is left behind. ``ready`` says a worker was
    started, at once (the crawl parses its first pages itself until then)."""

    async def go() -> tuple[bool, list[int], bool, int]:
        async with ParsePool(2) as pool:
            before = pool.ready
            pids = await asyncio.gather(*(pool.call(os.getpid) for _ in range(40)))
            return before, pids, pool.ready, len(pool._waiting)

    before, pids, after, left = asyncio.run(go())
    assert not before and after
    assert len(pids) == 40 and left == 0
    assert sorted(pids.count(pid) for pid in set(pids)) == [20, 20]


def test_workers_collect_garbage_though_their_preload_did_not() -> None:
    """The fork server loads numba with the garbage collector off (``parsers.preload``);
    the workers forked from it collect as usual."""

    async def go() -> bool:
        async with ParsePool(1) as pool:
            return await pool.call(gc.isenabled)

    assert asyncio.run(go())


def test_pages_wait_for_a_batch_while_every_worker_is_busy() -> None:
    async def go() -> tuple[list[str], int]:
        async with ParsePool(1, batch_max=4, flush_delay_s=30.0) as pool:
            await _until_live(pool, 1)
            slow = b"<title>0</title><p>" + b"many words " * 1_000_000  # busy for a while
            first = asyncio.ensure_future(pool.parse(job(0, slow)))
            while pool.busy == 0:  # the first page goes alone: the worker was idle
                await asyncio.sleep(0)
            rest = [pool.parse(job(i)) for i in range(1, 5)]  # the worker is busy: batched
            pages = await asyncio.gather(first, *rest)
            return [p.title for p in pages], pool.batches

    titles, batches = asyncio.run(go())
    assert titles == [str(i) for i in range(5)]
    assert batches == 2  # one page, then four together (batch_max), not five round trips


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policy")
def test_workers_run_as_batch_work() -> None:
    """Parse workers are SCHED_BATCH: woken by a batch they do not preempt the event loop."""

    async def go() -> tuple[int, int]:
        async with ParsePool(1) as pool:
            return await pool.call(os.sched_getscheduler, 0), os.sched_getscheduler(0)

    worker, crawl = asyncio.run(go())
    assert worker == os.SCHED_BATCH
    assert crawl != os.SCHED_BATCH  # the crawl process itself keeps its policy


def test_workers_are_nicer_than_the_crawl() -> None:
    """Parse workers run ``WORKER_NICE`` steps nicer than the crawl process (capped at 19):
    the event loop and the store's thread run first when they wake on a worker's core."""
    from parsers.worker import WORKER_NICE

    async def go() -> tuple[int, int]:
        async with ParsePool(1) as pool:
            return await pool.call(os.nice, 0), os.nice(0)

    worker, crawl = asyncio.run(go())
    assert worker == min(crawl + WORKER_NICE, 19)


def test_a_failing_page_does_not_fail_its_batch() -> None:
    async def go() -> list[object]:
        async with ParsePool(1) as pool:
            broken = ParseJob("http://e.com/x", "http://e.com/x", 200, "text/html", None,
                              None)  # type: ignore[arg-type]  # fmt: skip
            return await asyncio.gather(pool.parse(broken), pool.parse(job(1)),
                                        return_exceptions=True)  # fmt: skip

    failed, ok = asyncio.run(go())
    assert isinstance(failed, ParseError) and failed.url == "http://e.com/x"
    assert getattr(ok, "title", None) == "1"


def test_pool_restarts_once_after_a_worker_dies_then_parses_in_process() -> None:
    """A worker that dies holding no page is replaced; when the replacement dies too, the
    pool goes on parsing in the crawl process instead of failing the crawl."""

    async def go() -> tuple[str, str, bool, bool]:
        async with ParsePool(1) as pool:
            await pool.parse(job(1))
            _kill_workers(pool)
            await asyncio.sleep(0.3)  # its death seen while it holds nothing
            page = await pool.parse(job(2))  # the broken pool is replaced
            replaced_in_process = pool.in_process
            _kill_workers(pool)
            await asyncio.sleep(0.3)
            here = await pool.parse(job(3))  # a second break: parsed here from now on
            return page.title, here.title, replaced_in_process, pool.in_process

    assert asyncio.run(go()) == ("2", "3", False, True)


def test_a_page_two_workers_die_on_fails_alone_and_the_pool_goes_on() -> None:
    """A page whose parse ends its worker (an extract hook calling os._exit, a parser
    fault): its batch is split to find it, it gets a second worker, then fails as
    ``parse-crash``; the other pages are parsed, by workers, never in the crawl process
    (which the page would end too)."""

    async def go() -> tuple[list[str], bool]:
        async with ParsePool(2, extract=_exit_on_poison) as pool:
            await pool.parse(job(9))  # the workers work
            jobs = [job(i) for i in range(6)]
            jobs[3] = job(3, body=b"<title>3</title><p>poison</p>")
            results = await asyncio.gather(*(pool.parse(j) for j in jobs), return_exceptions=True)
            after = await pool.parse(job(7))
            shown = [r.title if not isinstance(r, BaseException) else type(r).__name__
                     for r in results]  # fmt: skip
            return [*shown, after.title], pool.in_process

    shown, in_process = asyncio.run(go())
    assert shown == ["0", "1", "2", "ParseCrash", "4", "5", "7"] and not in_process


def test_a_parsed_batch_is_freed_by_reference_counting() -> None:
    """Once answered, a batch and what it holds (its pages' bodies, their message) are freed
    at once, not left to the cyclic collector, which a crawl runs seldom
    (``crawler.cli.tuning``): a cycle through each request kept every body of a crawl,
    ~270 MB of the bench site's 10,000 pages."""

    async def go() -> tuple[int, int]:
        async with ParsePool(2, batch_max=4) as pool:
            pages = await asyncio.gather(*(pool.parse(job(i)) for i in range(16)))
            del pages
            return pool.batches, sum(isinstance(o, Batch) for o in gc.get_objects())

    gc.collect()
    gc.disable()
    try:
        batches, alive = asyncio.run(go())
    finally:
        gc.enable()
    assert batches >= 4 and alive == 0


def test_a_request_outstanding_on_a_dying_worker_is_sent_again() -> None:
    """A worker killed mid-request (the OOM killer, say): its replacement gets the request."""

    async def go() -> tuple[object, list[int | None]]:
        async with ParsePool(1) as pool:
            await pool.parse(job(1))
            first = [worker.process.pid for worker in pool._live]
            sleeping = asyncio.ensure_future(pool.call(time.sleep, 0.5))
            await asyncio.sleep(0.2)  # the worker is inside the request now
            _kill_workers(pool)
            result = await sleeping
            return result, first + [worker.process.pid for worker in pool._live]

    result, pids = asyncio.run(go())
    assert result is None  # time.sleep's return value: the request ran to its end
    assert len(pids) == 2 and pids[0] != pids[1]


def test_call_raises_the_workers_exception_and_the_pool_lives_on() -> None:
    async def go() -> tuple[BaseException | None, int]:
        async with ParsePool(1) as pool:
            try:
                await pool.call(int, "not a number")
            except ValueError as exc:
                error: BaseException | None = exc
            else:
                error = None
            return error, await pool.call(len, "four")

    error, length = asyncio.run(go())
    assert isinstance(error, ValueError) and "not a number" in str(error)
    assert length == 4


def test_workers_exit_when_the_pool_closes() -> None:
    async def go() -> list[int | None]:
        async with ParsePool(2) as pool:
            await asyncio.gather(*(pool.parse(job(i)) for i in range(4)))
            # The four pages may all have gone to the first worker up: wait for the other.
            for _ in range(200):
                if not pool._coming:
                    break
                await asyncio.sleep(0.05)
            return [worker.process.pid for worker in pool._live]

    pids = asyncio.run(go())
    assert len(pids) == 2
    assert not [pid for pid in pids if pid is not None and _alive(pid)]


def test_a_pool_closed_while_its_workers_start_returns_at_once_and_leaves_none_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A short crawl does not wait out the fork server's preload at its close: a worker
    whose start ends after the close is undone then (its pipes closed, it exits, joined)."""
    spawn = ParsePool._spawn
    spawned: list[Any] = []

    def slow_spawn(self: ParsePool) -> Any:
        time.sleep(1.5)  # a fork server still preloading
        started = spawn(self)
        spawned.append(started[0])
        return started

    monkeypatch.setattr(ParsePool, "_spawn", slow_spawn)

    async def go() -> float:
        async with ParsePool(2):
            await asyncio.sleep(0)  # the starts are under way
            started = time.monotonic()
        return time.monotonic() - started

    assert asyncio.run(go()) < 1.0
    deadline = time.monotonic() + 30
    while len(spawned) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(spawned) == 2, "the workers' starts went on after the close"
    while any(p.exitcode is None for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(p.exitcode is not None for p in spawned), "a late worker was left running"


def _kill_workers(pool: ParsePool) -> None:
    assert pool._live
    for worker in pool._live:
        assert worker.process.pid is not None
        os.kill(worker.process.pid, signal.SIGKILL)


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (workers are grandchildren, forked by the fork server)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        children = _children(todo.pop())
        todo.extend(children - found)
        found |= children
    return found


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    stat = handle.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _crawl_command(site: SiteServer, tmp_path: Path, links: int) -> subprocess.Popen[bytes]:
    """The ``crawl`` command (``python -m crawler``, 2 workers) started on ``site``, whose
    every page links to ``links`` pages."""
    site.fallback = html_handler("".join(f'<a href="/p{i}">{i}</a>' for i in range(links)))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(site.url + "/\n")
    return subprocess.Popen(
        [sys.executable, "-m", "crawler", str(seeds), "--db", str(tmp_path / "c.db"),
         "--workers", "2", "--delay", "0", "--no-progress", "-q"],
    )  # fmt: skip


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_parse_workers_exit_when_the_crawl_is_killed(tmp_path: Path) -> None:
    """kill -9 of a crawl cannot stop its pool: the workers must notice and exit, not
    linger as orphans holding their memory (cron kills overrunning runs)."""
    with SiteServer(latency_s=0.05) as site:
        crawl = _crawl_command(site, tmp_path, links=50)
        deadline = time.monotonic() + 30
        workers: set[int] = set()  # the tracker's sink, 2 workers (and the fork server, if
        while time.monotonic() < deadline and (len(workers) < 3 or len(site.hits) < 5):
            workers |= _descendants(crawl.pid)  # seen before the workers were up)
            time.sleep(0.05)  # until the pool is up and parsing
        crawl.send_signal(signal.SIGKILL)
        crawl.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
            time.sleep(0.1)
    assert len(workers) >= 3
    assert not [pid for pid in workers if _alive(pid)]


def test_fork_server_preload_is_extended_not_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """An application's own fork-server preloads stay; ours is added once."""
    from multiprocessing import forkserver

    from crawler.pool.forkserver import context

    monkeypatch.setattr(forkserver._forkserver, "_preload_modules", ["__main__", "app.models"])
    context()
    context()
    assert forkserver._forkserver._preload_modules == ["__main__", "app.models", "parsers.preload"]


def test_the_crawl_command_leaves_its_script_out_of_the_preload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``crawl``'s workers need nothing of the console script: ``main=False`` drops
    ``__main__`` (importing it there only delays the preload), other preloads stay."""
    from multiprocessing import forkserver

    from crawler.pool.forkserver import context

    monkeypatch.setattr(forkserver._forkserver, "_preload_modules", ["__main__", "app.models"])
    context(main=False)
    context()  # the pool's later calls keep it so
    assert forkserver._forkserver._preload_modules == ["app.models", "parsers.preload"]


def test_the_preload_imports_the_parser_itself() -> None:
    """The fork server imports ``parsers.html`` (what every batch runs), so a worker's first
    batch does not import it again in each worker."""
    code = "import sys, parsers.preload; print('parsers.html' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork start: Linux only")
@pytest.mark.skipif(
    sys.version_info[:2] not in ((3, 11), (3, 12), (3, 13)), reason="CPython 3.11-3.13"
)
def test_the_crawl_commands_fork_server_is_a_fork_of_it_and_leaves_with_it(tmp_path: Path) -> None:
    """``crawl`` forks its fork server (no new interpreter to start): the server runs the
    command's own command line and forks the workers; once they are up it is ended (its
    memory is a fifth of the crawl's) and the workers live on as the crawl's own children;
    nothing of it outlives the crawl."""
    with SiteServer(latency_s=0.05) as site:
        crawl = _crawl_command(site, tmp_path, links=30)
        deadline = time.monotonic() + 30
        adopted: list[int] = []
        everything: set[int] = set()
        while time.monotonic() < deadline and crawl.poll() is None and len(adopted) < 2:
            everything |= _descendants(crawl.pid)
            kids = [pid for pid in _children(crawl.pid) if _cmdline(pid) != SINK_CMDLINE]
            if len(kids) >= 2 and all(
                _cmdline(pid) == _cmdline(crawl.pid) and not _children(pid) for pid in kids
            ):
                adopted = sorted(kids)  # 2 workers, no server (and the tracker's sink)
            time.sleep(0.05)
        assert crawl.wait(timeout=60) == 0
    # 2 workers, each running the command's own command line (a spawned fork server's
    # children would run multiprocessing's), none with children.
    assert len(adopted) >= 2, "no workers seen as the crawl's own children"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in everything):
        time.sleep(0.1)
    assert not [pid for pid in everything if _alive(pid)]


SINK_CMDLINE = b"cat\0"

_TRACKER_SINK = """
import os, signal, sys, time
from multiprocessing import resource_tracker, shared_memory
from crawler.pool.forkserver import _tracker_sink
assert _tracker_sink()
tracker = resource_tracker._resource_tracker
fd, pid = tracker._fd, tracker._pid
cmdline = b""
for _ in range(200):  # the parent resumes before exec has set up the arguments
    cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    if cmdline:
        break
    time.sleep(0.01)
assert cmdline == b"cat\\0", cmdline
assert not _tracker_sink()  # one is running: nothing started
resource_tracker.ensure_running()  # multiprocessing finds it alive and keeps it
assert (tracker._fd, tracker._pid) == (fd, pid)
os.kill(pid, signal.SIGINT)  # a Ctrl-C reaches the process group: the sink stays
os.kill(pid, signal.SIGTERM)
memory = shared_memory.SharedMemory(create=True, size=4096)  # registers: written, dropped
memory.close()
memory.unlink()
resource_tracker.ensure_running()
assert (tracker._fd, tracker._pid) == (fd, pid)
print(pid, flush=True)
os._exit(0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork start: Linux only")
def test_the_crawl_commands_resource_tracker_is_a_sink(tmp_path: Path) -> None:
    """``crawl`` hands its workers a pipe that ``cat`` drains in place of a resource tracker
    (its processes register nothing): multiprocessing takes it as its tracker and keeps it,
    registering still works, a Ctrl-C or SIGTERM does not end it, the end of its holders
    does."""
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    out = subprocess.run(
        [sys.executable, "-c", _TRACKER_SINK],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "resource_tracker" not in out.stderr  # no warning of a dead tracker
    pid = int(out.stdout)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the sink outlived its process"


_TRACKER_BY_FORK = """
import os, sys
from multiprocessing import resource_tracker, shared_memory
from crawler.pool.forkserver import _tracker_by_fork
assert _tracker_by_fork()
tracker = resource_tracker._resource_tracker
fd, pid = tracker._fd, tracker._pid
assert open(f"/proc/{pid}/cmdline", "rb").read() == open("/proc/self/cmdline", "rb").read()
assert not _tracker_by_fork()  # one is running: nothing started
resource_tracker.ensure_running()  # multiprocessing finds it alive and keeps it
assert (tracker._fd, tracker._pid) == (fd, pid)
memory = shared_memory.SharedMemory(create=True, size=4096)  # registered with the tracker
print(memory.name, pid, flush=True)
memory.close()
os._exit(0)  # killed, say: the segment is never unlinked here
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork start: Linux only")
@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="POSIX shared memory in /dev/shm")
def test_the_forked_resource_tracker_does_the_trackers_work(tmp_path: Path) -> None:
    """``crawl`` forks multiprocessing's resource tracker instead of starting an interpreter
    for it: multiprocessing uses the forked one as its own, and it still cleans up what a
    dead process leaked, then exits."""
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    out = subprocess.run(
        [sys.executable, "-c", _TRACKER_BY_FORK],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    name, pid = out.stdout.split()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
        _alive(int(pid)) or os.path.exists(f"/dev/shm/{name.lstrip('/')}")
    ):
        time.sleep(0.05)
    assert not os.path.exists(f"/dev/shm/{name.lstrip('/')}"), "the leaked segment was kept"
    assert not _alive(int(pid)), "the tracker outlived its process"


def test_no_fork_start_beside_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forking a process with other threads may copy a lock held by one of them: the
    fork start declines, and the usual start is used."""
    from multiprocessing import forkserver

    from crawler.pool.forkserver import _fork_server_by_fork

    monkeypatch.setattr(forkserver._forkserver, "_forkserver_pid", None)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert _fork_server_by_fork() is False
        assert forkserver._forkserver._forkserver_pid is None  # nothing was started
    finally:
        stop.set()
        other.join()


def test_a_worker_says_when_it_is_ready(caplog: pytest.LogCaptureFixture) -> None:
    """``--verbose`` shows when each parse worker came up: what a crawl's first page waits for."""

    async def go() -> None:
        async with ParsePool(1) as pool:
            await _until_live(pool, 1)

    with caplog.at_level(logging.DEBUG, logger="crawler.pool.parse_pool"):
        asyncio.run(go())
    ready = [r.getMessage() for r in caplog.records if "ready" in r.getMessage()]
    assert len(ready) == 1 and "s after the pool opened; queued requests: 0" in ready[0]


_FAULTS = """
import os, random, resource, sys
from multiprocessing import Pipe
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "keep":
    from parsers.worker import keep_batch_buffers
    assert keep_batch_buffers()
rng = random.Random(1)
sizes = [rng.randint(600_000, 1_200_000) for _ in range(40)]
requests, crawl = Pipe(duplex=False)
if os.fork() == 0:  # the crawl: batches of ~1 MB
    requests.close()
    for size in sizes:
        crawl.send_bytes(bytes(size))
    os._exit(0)
crawl.close()
requests.recv_bytes()  # the first batch
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in sizes[1:]:
    requests.recv_bytes()  # read as a worker reads a batch, then freed
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
os.wait()
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_workers_keep_their_batch_buffers() -> None:
    """A worker reads each batch (~1 MB) into memory the heap kept from the last one, not
    into fresh zeroed pages from the kernel, faulted in page by page."""
    root = str(ROOT_DIR)

    def page_faults(mode: str) -> int:
        run = subprocess.run(
            [sys.executable, "-c", _FAULTS, root, mode], capture_output=True, text=True, check=True
        )
        return int(run.stdout)

    default, kept = page_faults("default"), page_faults("keep")
    assert kept * 4 < default, (kept, default)


@pytest.mark.parametrize("buffered", [True, False], ids=["get_buffer", "data_received"])
def test_replies_are_read_whatever_the_pipe_cuts_them_into(
    buffered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frames (short and long headers, an empty one, one larger than the reader's buffer)
    arrive cut anywhere, read as uvloop reads (into the reader's buffer) or as asyncio's
    pipe transport does (``data_received``): each is answered whole, in order; a buffer
    grown for an outsized reply is let go after it."""
    import pickle
    import random

    from crawler.pool import workers as pool_module

    monkeypatch.setattr(pool_module, "_KEEP_BYTES", 2 << 20)

    answered: list[object] = []

    class Pool:
        def _answered(self, worker: object, payload: memoryview) -> None:
            answered.append(pickle.loads(payload))

    worker = pool_module.Worker.__new__(pool_module.Worker)
    worker.pool = Pool()  # type: ignore[assignment]
    reader = pool_module.ReplyReader(worker)
    values: list[object] = [b"", "x" * 10, b"y" * (3 << 20), list(range(1000)), "z"]
    stream = bytearray()
    for i, value in enumerate(values):
        payload = pickle.dumps(value)
        if i % 2:  # the long header (-1, then the size in 8 bytes)
            stream += pool_module._FRAME.pack(-1) + pool_module._LONG_FRAME.pack(len(payload))
        else:
            stream += pool_module._FRAME.pack(len(payload))
        stream += payload
    chance = random.Random(7)
    position = 0
    while position < len(stream):
        size = chance.choice([1, 3, 5, 11, 4096, 70_000, 1 << 20])
        if buffered:
            target = reader.get_buffer(-1)
            n = min(size, len(target), len(stream) - position)
            target[:n] = stream[position : position + n]
            target.release()
            reader.buffer_updated(n)
        else:
            n = min(size, len(stream) - position)
            reader.data_received(bytes(stream[position : position + n]))
        position += n
    assert answered == values
    assert len(reader._buffer) == pool_module._READ_BYTES  # the outsized one was let go


def _exit_on_poison(tree: Any, url: str) -> None:
    """An extract hook that ends its process on one page: a stand-in for a parser fault."""
    if "poison" in tree.text():
        os._exit(3)


def test_shares_for_idle_workers_are_of_about_equal_bytes() -> None:
    """A page of megabytes goes alone while the small ones share the other worker (equal
    counts would give one worker the big page and half the rest); each share keeps the
    pages' order, and every page is in exactly one."""
    from crawler.pool.batch import shares

    small = [job(i, b"x" * 20_000) for i in range(12)]
    jobs = [*small[:5], job(99, b"x" * 2_500_000), *small[5:]]
    assert shares(jobs, 2) == [[5], [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12]]
    assert shares(jobs[:3], 8) == [[0], [1], [2]]  # no more shares than pages
    assert shares([job(1)], 0) == [[0]]


@pytest.mark.parametrize("seed", range(20))
def test_shares_are_a_partition_within_lpt_bound(seed: int) -> None:
    """Any sizes: a partition of the pages into at most ``parts`` shares, each in order,
    whose heaviest is at most the ideal (the mean) plus the heaviest page: LPT's bound."""
    import random

    from crawler.pool.batch import PAGE_COST_BYTES, shares

    rng = random.Random(seed)
    jobs = [job(i, b"x" * rng.choice([0, 100, 30_000, 200_000, 3_000_000]))
            for i in range(rng.randint(1, 40))]  # fmt: skip
    parts = rng.randint(1, 6)
    got = shares(jobs, parts)
    assert sorted(i for share in got for i in share) == list(range(len(jobs)))
    assert len(got) <= parts and all(share == sorted(share) and share for share in got)
    weight = [len(j.body or b"") + PAGE_COST_BYTES for j in jobs]
    heaviest = max(sum(weight[i] for i in share) for share in got)
    assert heaviest <= sum(weight) / min(parts, len(jobs)) + max(weight)


def test_idle_workers_get_shares_of_about_equal_bytes() -> None:
    """In the pool: the turn's pages go as one big page alone and the rest together."""

    async def go() -> tuple[list[str], list[int]]:
        sizes: list[int] = []
        async with ParsePool(2, batch_max=32, flush_delay_s=30.0) as pool:
            await _until_live(pool, 2)
            send = pool.send_batch

            def counted(jobs: list[ParseJob], waiters: list[Any]) -> None:
                sizes.append(len(jobs))
                send(jobs, waiters)

            pool.send_batch = counted  # type: ignore[method-assign]
            bodies = [f"<title>{i}</title>".encode() + b"x" * (2_000_000 if i == 2 else 10)
                      for i in range(6)]  # fmt: skip
            pages = await asyncio.gather(*(pool.parse(job(i, b)) for i, b in enumerate(bodies)))
            return [p.title for p in pages], sizes

    titles, sizes = asyncio.run(go())
    assert titles == [str(i) for i in range(6)]
    assert sorted(sizes) == [1, 5]


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_worker_pipes_are_closed_once_under_either_loop(
    loop_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvloop's pipe transports close the descriptor in libuv and then the object handed
    to them (uvloop issue 763): a second close of a number that another thread may hold by
    then (the closing pool's pidfd was one). No pipe of a worker is closed when it is
    closed already, under uvloop (the ``crawl`` command's loop) or asyncio's."""
    import fcntl
    from multiprocessing.connection import Connection

    import uvloop

    stray: list[int] = []
    close = Connection._close  # type: ignore[attr-defined]

    def checked(self: Connection) -> None:
        try:
            fcntl.fcntl(self._handle, fcntl.F_GETFD)  # type: ignore[attr-defined]
        except OSError:
            stray.append(self._handle)  # type: ignore[attr-defined]
        close(self)

    monkeypatch.setattr(Connection, "_close", checked)

    async def go() -> list[str]:
        async with ParsePool(2) as pool:
            pages = await asyncio.gather(*(pool.parse(job(i)) for i in range(8)))
            await _until_live(pool, 2)
        gc.collect()
        return [p.title for p in pages]

    run = uvloop.run if loop_kind == "uvloop" else asyncio.run
    assert run(go()) == [str(i) for i in range(8)]
    assert stray == []
