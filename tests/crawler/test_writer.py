"""crawler.engine.writer: the bounds on what waits for the store (URLs found, records' bytes),
against a real SQLite store and, end to end, a crawl of pages that each link to many new URLs."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import crawler
from crawler.engine import window as window_module
from crawler.engine import writer as writer_module
from crawler.engine.writer import Writer
from crawler.report import RunCounters
from crawler.settings import Settings
from storage.base import PageRecord, UrlRecord
from storage.sqlite.store import SQLiteStore
from tests.sites import SiteServer, new_links_handler

STAMP = "2026-12-06T00:00:00+00:00"


def taker(found: list[UrlRecord]) -> Callable[[], list[UrlRecord]]:
    """A ``take_found`` for ``Writer``: what ``found`` holds, emptied (as the admission's)."""

    def take() -> list[UrlRecord]:
        taken = found[:]
        found.clear()
        return taken

    return take


def test_a_wait_for_room_ends_though_no_record_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page job may wait in ``room`` before it queues a record: the writer is asked
    to write what waits (``WRITE_NOW``), and the URLs found are stored."""
    monkeypatch.setattr(writer_module, "FOUND_MAX", 100)
    found = [UrlRecord(f"http://e.com/{i}", 1, 0.0, False, "2026-12-04T00:00:00+00:00")
             for i in range(150)]  # fmt: skip

    async def go() -> None:
        store = SQLiteStore(str(tmp_path / "w.db"))
        await store.open()
        try:
            writer = Writer(store, RunCounters(), taker(found), list, lambda: len(found))
            writer.run_id = await store.start_run(1, "{}", "2026-12-04T00:00:00+00:00")
            running = asyncio.create_task(writer.run())
            await asyncio.wait_for(writer.room(), 10)
            assert not found
            await writer.close()
            await running
        finally:
            await store.close()

    asyncio.run(go())
    with sqlite3.connect(tmp_path / "w.db") as conn:
        assert conn.execute("SELECT count(*) FROM urls WHERE state = 'queued'").fetchone() == (150,)


def test_the_urls_in_the_write_under_way_count_against_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URLs a write has taken are held until it commits: with 80 of them being written
    and 30 more waiting, 110 are past a bound of 100, and a page job waits until the write
    ends (not only until fewer than 100 wait, which would hold twice the bound)."""
    monkeypatch.setattr(writer_module, "FOUND_MAX", 100)
    found = [UrlRecord(f"http://e.com/{i}", 1, 0.0, False, STAMP) for i in range(80)]
    gate = asyncio.Event()

    class GatedStore(SQLiteStore):
        async def save(self, *args: Any) -> None:
            await gate.wait()
            await super().save(*args)

    async def go() -> None:
        store = GatedStore(str(tmp_path / "w.db"))
        await store.open()
        try:
            writer = Writer(store, RunCounters(), taker(found), list, lambda: len(found))
            gate.set()
            writer.run_id = await store.start_run(1, "{}", STAMP)
            gate.clear()
            writing = asyncio.create_task(writer.save())
            await asyncio.sleep(0.01)
            assert not found  # the write took the 80
            found.extend(UrlRecord(f"http://e.com/n{i}", 1, 0.0, False, STAMP) for i in range(30))
            waiting = asyncio.create_task(writer.room())
            await asyncio.sleep(0.2)
            assert not waiting.done()  # 80 being written + 30 waiting > 100
            gate.set()
            await asyncio.wait_for(waiting, 10)
            await writing
        finally:
            await store.close()

    asyncio.run(go())
    with sqlite3.connect(tmp_path / "w.db") as conn:
        assert conn.execute("SELECT count(*) FROM urls WHERE state = 'queued'").fetchone() == (80,)


def test_urls_found_wait_for_the_store_in_bounded_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 200 new links each: no more than the bound plus one page's links wait for a
    write at any time (without it, 4,000 here: the pages in flight), and every page and
    every URL found is stored."""
    monkeypatch.setattr(writer_module, "FOUND_MAX", 600)
    monkeypatch.setattr(writer_module, "FOUND_BATCH", 300)
    waiting: list[int] = []
    take = window_module.Window.take

    def recorded_take(self: window_module.Window) -> list[UrlRecord]:
        waiting.append(len(self.found))
        return take(self)

    monkeypatch.setattr(window_module.Window, "take", recorded_take)

    db = tmp_path / "links.db"
    with SiteServer(fallback=new_links_handler(200)) as site:
        report = crawler.run([site.url + "/"], Settings(db=str(db), concurrency=32,
                             per_host=32, delay=0.0, max_pages=60, template_budget=0))  # fmt: skip
    assert report.pages_ok == 60
    assert max(waiting) <= 600 + 200, waiting  # the bound, plus the page that crossed it
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM pages").fetchone() == (60,)
        queued = conn.execute("SELECT count(*) FROM urls WHERE state = 'queued'").fetchone()[0]
    assert queued >= 59 * 200 - 60  # every link found is stored (less the ones fetched)


def test_records_in_the_batch_count_against_the_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page job waits while the records not yet written weigh ``QUEUE_BYTES``, those the
    writer has taken into its batch included: pages of megabytes of text are not held by
    the hundred while a batch fills (its 256 records or its 0.1 s)."""
    monkeypatch.setattr(writer_module, "QUEUE_BYTES", 2000)
    written: list[int] = []

    class CountingStore(SQLiteStore):
        async def save(self, pages: list[PageRecord], *args: Any) -> None:
            await super().save(pages, *args)
            written.append(len(pages))

    async def go() -> int:
        store = CountingStore(str(tmp_path / "w.db"))
        await store.open()
        unwritten = 0
        try:
            writer = Writer(store, RunCounters(), list, list)
            writer.run_id = await store.start_run(1, "{}", STAMP)
            task = asyncio.create_task(writer.run())
            for i in range(40):
                url = f"http://e.com/{i}"
                await writer.put(PageRecord(url=url, final_url=url, status=200, error=None,
                                            content_type="text/html", depth=0, body_bytes=600,
                                            fetched_at=STAMP, text="x" * 600))  # fmt: skip
                await asyncio.sleep(0)  # the writer takes what is queued into its batch
                unwritten = max(unwritten, i + 1 - sum(written))
            await writer.close()
            await task
        finally:
            await store.close()
        return unwritten

    unwritten = asyncio.run(go())
    assert sum(written) == 40
    assert unwritten <= 4, unwritten  # 2,000 bytes of 600-byte records, and the one put


def test_a_record_weighs_its_stored_body_too() -> None:
    """With ``--store-body`` a record carries the compressed body to the store: it counts."""
    page = PageRecord(url="http://e.com/", final_url="http://e.com/", status=200, error=None,
                      content_type="text/html", depth=0, body_bytes=5000, fetched_at=STAMP,
                      text="x" * 100, tokens=b"t" * 10)  # fmt: skip
    assert writer_module.weight(page) == 100 + 3 * len("[]") + 10
    page.body = b"b" * 3000
    assert writer_module.weight(page) == 100 + 3 * len("[]") + 10 + 3000


def test_a_record_weighs_its_links_as_its_job_holds_them() -> None:
    """A page job holds its links (a string each) besides the JSON while it waits for room:
    a byte of ``links_json`` weighs three of text, so that the bound holds a third as many
    link-heavy pages as pages of text of the same size."""
    links = "[" + ", ".join(f'"http://e.com/{i}"' for i in range(1000)) + "]"
    linked = PageRecord(url="http://e.com/", final_url="http://e.com/", status=200, error=None,
                        content_type="text/html", depth=0, body_bytes=5000, fetched_at=STAMP,
                        links_json=links)  # fmt: skip
    texty = PageRecord(url="http://e.com/", final_url="http://e.com/", status=200, error=None,
                       content_type="text/html", depth=0, body_bytes=5000, fetched_at=STAMP,
                       text="x" * len(links))  # fmt: skip
    assert writer_module.weight(linked) == 3 * len(links)
    assert writer_module.weight(texty) == len(links) + 3 * len("[]")
