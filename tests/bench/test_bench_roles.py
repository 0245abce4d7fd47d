"""bench/benchlib.py's CPU split by role: a real command with a thread, a child and a
grandchild, each burning CPU, sampled from /proc as the crawl benchmark samples our crawl."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.proc import ROOT as ROOT_DIR

BENCH = ROOT_DIR / "bench"

_BURNER = """
import os, sys, threading, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    time.sleep(0.3)  # alive until sampled after the burn

def thread_burn(seconds):  # a thread's own CPU: process_time counts the whole process
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    time.sleep(0.3)

if os.fork() == 0:  # child
    if os.fork() == 0:  # grandchild
        burn(0.4)
        os._exit(0)
    burn(0.4)
    os.wait()
    os._exit(0)
helper = threading.Thread(target=thread_burn, args=(0.4,))
helper.start()
thread_burn(0.4)
helper.join()
os.wait()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_cpu_is_split_by_thread_and_process_depth(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import benchlib
    finally:
        sys.path.remove(str(BENCH))
    result = benchlib.run_measured(
        "burner", [sys.executable, "-c", _BURNER], log_path=tmp_path / "log", timeout_s=60
    )
    assert result.returncode == 0, (tmp_path / "log").read_text()
    roles = result.cpu_roles
    assert list(roles) == list(benchlib.CPU_ROLES)  # every role seen, in the declared order
    for role, cpu in roles.items():
        assert 0.2 <= cpu <= 1.5, (role, roles)
    assert sum(roles.values()) <= result.cpu_s + 0.2
