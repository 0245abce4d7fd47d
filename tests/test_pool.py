"""crawler.pool: a real spawn-started process pool, batching, failures, restart."""

from __future__ import annotations

import asyncio
import os
import signal
from concurrent.futures.process import BrokenProcessPool

import pytest

from crawler.errors import ParseError
from crawler.pool import ParsePool
from parsers.page import ParseJob


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


def test_pool_restarts_once_after_a_worker_dies() -> None:
    async def go() -> str:
        async with ParsePool(1) as pool:
            await pool.parse(job(1))
            _kill_workers(pool)
            page = await pool.parse(job(2))  # the broken pool is replaced
            _kill_workers(pool)
            with pytest.raises(BrokenProcessPool):
                await pool.parse(job(3))  # a second break fails loudly
            return page.title

    assert asyncio.run(go()) == "2"


def _kill_workers(pool: ParsePool) -> None:
    executor = pool._executor
    assert executor is not None
    for pid in list(executor._processes):  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
