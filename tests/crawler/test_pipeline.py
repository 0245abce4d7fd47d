"""crawler.engine.pipeline: pages between fetch and store, bounded by what they weigh; and,
end to end, a crawl of heavy pages that keeps fewer of them in flight than of light ones."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import crawler
from crawler.engine import pipeline as pipeline_module
from crawler.engine.pipeline import PAGE_WEIGHT, Pipeline, page_weight
from crawler.settings import Settings
from storage.base import PageRecord
from tests.sites import SiteServer, new_links_handler

STAMP = "2026-12-06T00:00:00+00:00"


def record(body_bytes: int, links_json: str = "[]") -> PageRecord:
    return PageRecord(url="http://a.test/", final_url="http://a.test/", status=200, error=None,
                      content_type="text/html", depth=0, body_bytes=body_bytes,
                      fetched_at=STAMP, links_json=links_json)  # fmt: skip


def test_a_page_weighs_its_body_and_three_times_its_links_text() -> None:
    links = '["http://a.test/x"]'
    assert page_weight(record(1000, links)) == PAGE_WEIGHT + 1000 + 3 * len(links)
    failed = record(0)
    failed.body_bytes = None
    assert page_weight(failed) == PAGE_WEIGHT + 3 * 2


def test_the_limit_follows_the_pages_weight_between_floor_and_ceiling() -> None:
    pipe = Pipeline(floor=8, ceiling=32, initial=16, budget=1_000_000)
    assert pipe.limit() == 16  # nothing weighed yet
    for _ in range(3):
        pipe.running += 1
        pipe.release(record(100))  # light pages: the ceiling
    assert pipe.limit() == 32
    for _ in range(400):  # the average moves to 250 kB pages: 4 fit, the floor holds
        pipe.running += 1
        pipe.release(record(250_000))
    assert pipe.limit() == 8
    pipe = Pipeline(floor=8, ceiling=64, budget=1_000_000)
    pipe.running += 1
    pipe.release(record(50_000 - PAGE_WEIGHT - 6))  # 50 kB: 20 fit
    assert pipe.limit() == 20
    crawl = Pipeline.of(64)
    assert crawl.limit() == 64
    assert crawl._floor == 2  # pages of megabytes: 2 at once (with 64 slots)
    crawl.running += 1
    crawl.release(record(0))
    assert crawl.limit() == 256


def test_a_job_without_a_record_does_not_move_the_average() -> None:
    pipe = Pipeline(floor=4, ceiling=16, budget=1_000_000)
    pipe.running = 2
    pipe.release()  # robots.txt, a sitemap, a retry
    assert pipe.limit() == 4 and pipe.running == 1


def test_acquire_waits_at_the_limit_until_a_release() -> None:
    async def go() -> None:
        pipe = Pipeline(floor=2, ceiling=2)
        await pipe.acquire()
        await pipe.acquire()
        third = asyncio.ensure_future(pipe.acquire())
        await asyncio.sleep(0.01)
        assert not third.done() and pipe.running == 2
        pipe.release(record(10))
        await asyncio.wait_for(third, 1)
        assert pipe.running == 2

    asyncio.run(go())


def test_heavy_pages_are_fewer_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of 1,000 new links each (~300 kB weighed) against a 1 MB budget: at most
    the concurrency is in flight, and after the first pages what the budget holds, not
    4 x; every page is stored."""
    monkeypatch.setattr(pipeline_module, "WEIGHT_BUDGET", 1 << 20)
    seen: list[tuple[int, int]] = []
    acquire = Pipeline.acquire

    async def recorded(self: Pipeline) -> None:
        await acquire(self)
        seen.append((self.running, self.limit()))

    monkeypatch.setattr(Pipeline, "acquire", recorded)

    db = tmp_path / "heavy.db"
    with SiteServer(fallback=new_links_handler(1000, "-with-a-longer-path")) as site:
        report = crawler.run([site.url + "/"], Settings(db=str(db), concurrency=8, per_host=8,
                             delay=0.0, max_pages=80, template_budget=0))  # fmt: skip
    assert report.pages_ok == 80
    assert max(running for running, _ in seen) <= 8, seen
    limits = [limit for _, limit in seen]
    assert max(limits) == 8, seen  # never the 32 of light pages
    assert 1 <= limits[-1] <= 4, seen  # the budget's 1 MB of ~300 kB pages
