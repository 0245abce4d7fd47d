"""Writer: the crawl's records go to the store in batches, one transaction each.

Owns: the bounded queue between the page jobs and the store (its bound is the crawl's
backpressure on memory), the batches (at most ``BATCH`` records, and none waits more than
``IDLE_S`` after the first of its batch), the run's page counts, and what each write
carries besides the pages: the URLs found and refused since the last one, so that a page,
its outlinks and its URL's new state are committed together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from crawler.report import RunCounters
from storage.base import PageRecord, SkipRecord, Store, UrlRecord

BATCH = 256
IDLE_S = 0.1


class Writer:
    """Writes one run's records: ``put`` them, ``run`` the writing, ``close`` the queue."""

    def __init__(
        self,
        store: Store,
        counters: RunCounters,
        take_found: Callable[[], list[UrlRecord]],
        take_skips: Callable[[], list[SkipRecord]],
    ) -> None:
        self._store = store
        self._counters = counters
        self._take_found = take_found
        self._take_skips = take_skips
        self._records: asyncio.Queue[PageRecord | None] = asyncio.Queue(maxsize=BATCH * 4)
        self.run_id = 0

    async def put(self, record: PageRecord) -> None:
        await self._records.put(record)

    async def close(self) -> None:
        """No more records: ``run`` writes what it holds and returns."""
        await self._records.put(None)

    async def run(self) -> None:
        batch: list[PageRecord] = []
        records = self._records
        loop = asyncio.get_running_loop()
        flush_at: float | None = None  # a batch is written at most IDLE_S after it began
        while True:
            try:
                async with asyncio.timeout_at(flush_at):
                    record = await records.get()
            except TimeoutError:
                await self.save(batch)
                flush_at = None
                continue
            if flush_at is None:
                flush_at = loop.time() + IDLE_S
            while True:  # take what is waiting without an await (and a timer) per record
                if record is None:
                    await self.save(batch)
                    return
                batch.append(record)
                self._counters.count_page(
                    record.status, record.error, record.body_bytes, record.unchanged
                )
                if len(batch) >= BATCH:
                    await self.save(batch)
                    flush_at = None
                    break
                if records.empty():
                    break
                record = records.get_nowait()

    async def save(self, batch: list[PageRecord] | None = None) -> None:
        """Write ``batch`` (emptied) with the URLs found and refused so far; a write with no
        pages makes those URLs visible to a claim."""
        skips, found = self._take_skips(), self._take_found()
        if batch or skips or found:
            pages = batch[:] if batch else []
            if batch:
                batch.clear()
            await self._store.save(pages, found, skips, self.run_id)
