"""A crawl's phases, timed from inside its process, for ``phase_bench.py``.

    python bench/phase_probe.py OUT.json SEEDS [crawl options...]

Runs the ``crawl`` command (``crawler.cli.entry.main``, the console script's own code, in
its own order: the fork server first, then the imports) with marks around a few of the
crawl's methods, and writes to OUT.json the seconds from this process's exec to each mark
(``MARKS``), the crawl process's own CPU (its main thread; the store's thread; the rest),
and the store's CPU inside its transactions, with the kernel's share of it.

The marks wrap private methods, patched as their modules are imported (an import hook,
so that nothing is imported sooner than the crawl imports it): a measuring probe, not an
interface. ``tests/bench/test_phase_probe.py`` runs it on a small site, so that a rename
fails a test instead of the benchmark.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

_T0 = time.perf_counter()


def _process_age_s() -> float:
    """Seconds since this process started (``/proc``: its start in clock ticks of uptime)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))


_AGE0 = _process_age_s()
"""How long the interpreter took to reach this module (exec to here), in seconds."""

MARKS = (
    "engine_run",  # imports, options, settings and seeds done: the run begins
    "store_open",  # the database opened and migrated
    "first_fetch",  # the first page's fetch begins
    "last_fetch_start",  # the last page's fetch begins
    "last_page",  # the last page is recorded (fetched, parsed)
    "last_write",  # the writer's last batch is committed
    "finished",  # the run's row written, the store and pool closed
    "exit",  # the command exits (``exit_now``)
)
_at: dict[str, float] = {}
_counts = {"pages": 0, "writes": 0, "transactions": 0}
_store = {"cpu_s": 0.0, "user_s": 0.0, "sys_s": 0.0, "thread_cpu_s": 0.0}
"""The store thread's CPU (``time.thread_time``: exact) in its transactions and in all, and
the user and kernel time of its transactions as ``getrusage`` splits them: by the clock
ticks that found the thread in each, so only the split of a long run means anything."""


def _mark(name: str, first: bool = False) -> None:
    if first and name in _at:
        return
    _at[name] = _AGE0 + time.perf_counter() - _T0


def _around(
    cls: type, name: str, before: Callable[[], None] | None, after: Callable[[], None] | None
) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before()
        result = await original(*args, **kwargs)
        if after is not None:
            after()
        return result

    setattr(cls, name, wrapped)


def _page_started() -> None:
    _mark("first_fetch", first=True)
    _mark("last_fetch_start")


def _page_done() -> None:
    _counts["pages"] += 1
    _mark("last_page")


def _written() -> None:
    _counts["writes"] += 1
    _mark("last_write")


def _patch_engine(module: ModuleType) -> None:
    _around(module.Engine, "run", lambda: _mark("engine_run", first=True), None)
    _around(module.Engine, "_finish", None, lambda: _mark("finished"))


def _patch_pages(module: ModuleType) -> None:
    _around(module.Pages, "fetch", _page_started, _page_done)


def _patch_writer(module: ModuleType) -> None:
    _around(module.Writer, "save", None, _written)


def _patch_store(module: ModuleType) -> None:
    _around(module.SQLiteStore, "open", None, lambda: _mark("store_open", first=True))
    transaction = getattr(module, "_in_transaction")  # noqa: B009 -- a module, not a class

    @functools.wraps(transaction)
    def timed(*args: Any, **kwargs: Any) -> Any:
        before, cpu = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
        try:
            return transaction(*args, **kwargs)
        finally:
            after = resource.getrusage(resource.RUSAGE_THREAD)
            _store["cpu_s"] += time.thread_time() - cpu
            _store["user_s"] += after.ru_utime - before.ru_utime
            _store["sys_s"] += after.ru_stime - before.ru_stime
            _store["thread_cpu_s"] = time.thread_time()  # the thread's so far
            _counts["transactions"] += 1

    setattr(module, "_in_transaction", timed)  # noqa: B010


def _patch_entry(module: ModuleType) -> None:
    exit_now = getattr(module, "exit_now")  # noqa: B009

    def probed_exit(code: str | int | None) -> Any:
        _mark("exit")
        _write(code)
        return exit_now(code)

    setattr(module, "exit_now", probed_exit)  # noqa: B010


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "crawler.engine.engine": _patch_engine,
    "crawler.engine.pages": _patch_pages,
    "crawler.engine.writer": _patch_writer,
    "storage.sqlite.store": _patch_store,
}


class _Patcher(importlib.abc.MetaPathFinder):
    """Patches each module of ``PATCHES`` as soon as it has been executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = PATCHES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_out_path = ""


def _write(code: str | int | None) -> None:
    process = resource.getrusage(resource.RUSAGE_SELF)
    main_cpu = time.thread_time() if threading.current_thread() is threading.main_thread() else 0
    report = {
        "exit_code": code if isinstance(code, int) or code is None else str(code),
        "interpreter_s": _AGE0,
        "marks_s": {name: _at[name] for name in MARKS if name in _at},
        **_counts,
        "process_cpu_s": process.ru_utime + process.ru_stime,
        "main_thread_cpu_s": main_cpu,
        "store_thread_cpu_s": _store["thread_cpu_s"],
        "store_transactions_cpu_s": _store["cpu_s"],
        "store_transactions_user_s": _store["user_s"],
        "store_transactions_sys_s": _store["sys_s"],
    }
    with open(_out_path, "w") as f:
        json.dump(report, f, indent=1)


def main() -> None:
    global _out_path
    if len(sys.argv) < 3:
        raise SystemExit(__doc__.split("\n\n")[1].strip())
    _out_path = sys.argv[1]
    sys.argv = ["crawl", *sys.argv[2:]]
    sys.meta_path.insert(0, _Patcher())
    import crawler.cli.entry as entry  # light: the fork server still starts first (main)

    _patch_entry(entry)
    entry.main()


if __name__ == "__main__":
    main()
