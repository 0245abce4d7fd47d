"""One background warmer at a time (``crawler.relevance.warm``): a crawl that ends while one
runs starts none and queues its database, and the running warmer indexes it before it
ends. Real warmer processes, real SQLite files; the lock and the queue live in this test's
own folder (``XDG_RUNTIME_DIR``)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from crawler.lock import RunLock, crawl_running
from crawler.relevance import warm
from parsers.tokens import TokenCounts, query_ids
from tests.crawler.relevance.test_search import make_db, put
from tests.proc import ROOT, child_env


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's lock and queue folder, and an environment that starts warmers."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv(warm.NO_WARM_ENV, raising=False)
    monkeypatch.setenv("CRAWL_NO_AOT", "1")  # no ahead-of-time build: seconds, not tested here
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])
    return tmp_path


def crawled(path: Path, pages: int = 20) -> Path:
    """A crawl database whose pages wait to be indexed."""
    make_db(path)
    ids = np.array(query_ids("one two three four five"), dtype=np.uint32)
    put(path, {n: TokenCounts(ids[: 1 + n % 5], np.full(1 + n % 5, 2, np.uint32), 9 + n)
               for n in range(pages)})  # fmt: skip
    return path


def pending(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM search_pending").fetchone()[0])


def warmers_naming(path: Path) -> int:
    """Running warmer processes whose command line names ``path``."""
    found = 0
    for proc in Path("/proc").iterdir():
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"crawler.relevance.warmer" in words and os.fsencode(path) in words:
            found += 1
    return found


def wait_until(done: object, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.1)


def run_warmer(env_folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_env(drop=(warm.NO_WARM_ENV,), XDG_RUNTIME_DIR=str(env_folder), CRAWL_NO_AOT="1")
    return subprocess.run([sys.executable, "-m", "crawler.relevance.warmer", *args], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=240)  # fmt: skip


def test_crawls_ending_together_start_one_warmer_that_indexes_both(folder: Path) -> None:
    first, second = crawled(folder / "first.db"), crawled(folder / "second.db")
    assert pending(first) == pending(second) == 20
    assert warm.start_warming(str(first))
    # the lock went to the warmer with its start, before its interpreter has run a line
    assert warm.warming()
    assert warm.start_warming(str(second))  # one runs: this one is queued for it
    assert warmers_naming(second) == 0
    wait_until(lambda: warmers_naming(first) == 0 and not warm.warming())
    assert pending(first) == pending(second) == 0
    assert not warm.queue_waiting()


def test_the_warmer_indexes_what_was_queued_and_passes_over_what_it_cannot(
    folder: Path,
) -> None:
    good = crawled(folder / "good.db")
    not_a_crawl = folder / "notes.db"
    with sqlite3.connect(not_a_crawl) as conn:
        conn.execute("CREATE TABLE notes (text)")
    damaged = crawled(folder / "damaged.db")
    with sqlite3.connect(damaged) as conn:
        conn.execute("UPDATE pages SET tokens = x'ff00' WHERE id = 3")  # not a token blob
    for name in (folder / "gone.db", not_a_crawl, damaged, good, good):
        warm.enqueue(str(name))
    done = run_warmer(folder)
    assert done.returncode == 0, done.stderr
    assert pending(good) == 0
    assert "gone.db" in done.stderr and "notes.db" in done.stderr
    assert "damaged.db" in done.stderr and pending(damaged) == 20  # rolled back, left as it was
    assert not warm.queue_waiting()


def test_a_warmer_that_finds_another_running_queues_its_database(folder: Path) -> None:
    db = crawled(folder / "late.db")
    with warm.only_warmer() as alone:  # as a warmer would hold it
        assert alone
        busy = run_warmer(folder, str(db))
        assert busy.returncode == 0, busy.stderr
        assert warm.queued() == [str(db)]  # what the running warmer would then index
    assert pending(db) == 20


def test_the_queue_names_each_database_once_by_its_full_path(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    for name in ("a.db", "b.db", "a.db", "bad\nname.db"):
        warm.enqueue(name)
    assert warm.queued() == [str(folder / "a.db"), str(folder / "b.db")]
    assert warm.queued() == []  # emptied by the first look


def test_the_queue_is_bounded(folder: Path) -> None:
    for n in range(5000):
        warm.enqueue(str(folder / f"{n:040d}.db"))
    size = (folder / f"crawl-search-warm-{os.getuid()}.queue").stat().st_size
    assert 0 < size <= warm._QUEUE_MAX
    assert len(warm.queued()) == size // len(f"{folder}/{0:040d}.db\n")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a file another user owns")
def test_a_queue_another_user_made_is_not_read(folder: Path) -> None:
    warm.enqueue(str(folder / "theirs.db"))
    os.chown(folder / f"crawl-search-warm-{os.getuid()}.queue", 12345, 12345)
    assert warm.queued() == []


def test_the_warmers_entry_imports_nothing_heavy_at_normal_priority() -> None:
    """Everything past the standard library (numba, numpy, the store) is imported in the
    idle-priority thread (``warmer._work``): a crawl running beside a warmer keeps its
    CPU."""
    check = ("import sys, crawler.relevance.warmer;"
             "print(sorted(m for m in ('numba', 'numpy', 'storage', 'sqlite3', 'asyncio')"
             " if m in sys.modules))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", check], env=child_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_warmer_leaves_a_database_a_crawl_is_running_on(folder: Path) -> None:
    """That crawl's end starts (or queues for) a warmer: nothing it writes waits for this
    one's catch-up, nor does its WAL grow behind this one's snapshot."""
    db = crawled(folder / "busy.db")
    with RunLock(str(db)):
        assert crawl_running(str(db))
        done = run_warmer(folder, str(db))
        assert done.returncode == 0, done.stderr
        assert pending(db) == 20
    assert crawl_running(str(db)) is False
    done = run_warmer(folder, str(db))
    assert done.returncode == 0, done.stderr
    assert pending(db) == 0


def test_no_name_is_lost_when_the_queue_is_taken_while_crawls_write_to_it(folder: Path) -> None:
    """A reader (the warmer) takes the queue again and again while names are queued: each
    name is read once, none goes into a file already taken."""
    names = [str(folder / f"{n}.db") for n in range(400)]
    read: list[str] = []
    writing = threading.Event()
    writing.set()

    def reader() -> None:
        while writing.is_set():
            read.extend(warm.queued())
        read.extend(warm.queued())

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for name in names:
            warm.enqueue(name)
    finally:
        writing.clear()
        thread.join(60)
    assert sorted(read) == sorted(names)


def test_a_probe_of_the_warmer_never_holds_its_lock(folder: Path) -> None:
    """``warming()`` reads the kernel's locks: a crawl ending meanwhile takes the lock (and
    starts its warmer) every time, where a probe that took the lock would turn it away."""
    probing = threading.Event()
    probing.set()
    seen: list[bool] = []

    def probe() -> None:
        while probing.is_set():
            seen.append(warm.warming())

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        for _ in range(300):
            fd = warm._take_lock()
            assert fd is not None
            os.close(fd)
    finally:
        probing.clear()
        thread.join(60)
    assert seen and not all(seen)


def test_a_crawl_without_stdin_hands_the_real_lock_to_its_warmer(folder: Path) -> None:
    """With descriptor 0 closed the lock would be opened as 0, and the spawn's redirection
    of 0-2 would overwrite it before it is handed over as 3."""
    start = ("import os; os.close(0); from crawler.relevance import warm;"
             "print(warm.start_warming(None), warm.warming(), flush=True)")  # fmt: skip
    env = child_env(drop=(warm.NO_WARM_ENV,), XDG_RUNTIME_DIR=str(folder), CRAWL_NO_AOT="1")
    done = subprocess.run([sys.executable, "-c", start], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]  # its warmer holds the lock file's flock
    wait_until(lambda: not warm.warming())


def test_a_failure_to_start_a_warmer_does_not_fail_the_crawl(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = crawled(folder / "done.db")

    def broken(name: str | None) -> bool:
        raise RuntimeError("no warmer today")

    monkeypatch.setattr(warm, "start_warming", broken)
    warm.after_crawl(str(db), True)  # logged, not raised: the crawl is stored
