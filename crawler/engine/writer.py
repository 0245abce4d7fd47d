"""Writer: the crawl's records go to the store in batches, one transaction each.

Owns: the bounded queue between the page jobs and the store (its bound is the crawl's
backpressure on memory), the batches (at most ``BATCH`` records, and none waits more than
``IDLE_S`` after the first of its batch), the run's page counts, and what each write
carries besides the pages: the URLs found and refused since the last one, so that a page,
its outlinks and its URL's new state are committed together.

The bounds are in records and in what they weigh: pages that each link to a thousand new
URLs make a batch of ``BATCH`` pages a quarter of a million URLs to hold and write at once,
and pages of megabytes of text a batch of hundreds of megabytes. So a batch is also written
once it carries ``FOUND_BATCH`` new URLs or weighs half of ``QUEUE_BYTES``, and a page job
waits (``room``) while the records not yet written (queued, or in the batch being built or
written) weigh ``QUEUE_BYTES`` or ``FOUND_MAX`` URLs found are not yet stored: the page jobs
then hold their slots, and the crawl fetches no more than the store takes.

A page counts (``RunCounters``) once its batch is committed, so the run's row never counts a
page the database lacks. A run that ends by being cancelled (a failure elsewhere in its
``TaskGroup``, or the caller's cancel) still writes what it had accepted before it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from crawler.engine.pipeline import LINK_WEIGHT
from crawler.report import RunCounters
from storage.base import PageRecord, SkipRecord, Store, StoreError, UrlRecord

log = logging.getLogger(__name__)

BATCH = 256
IDLE_S = 0.1
FOUND_BATCH = 10_000
"""A batch is written once the URLs found since the last write reach this many."""
FOUND_MAX = 30_000
"""``room`` waits while more URLs than this are found and not yet stored: waiting for a
write, or in the write under way (it holds them until it commits)."""
QUEUE_BYTES = 24 << 20
"""``room`` waits while the records not yet written weigh (``weight``) more than this.

A page of 10,000 links weighs ~1.5 MB (its ~0.5 MB of ``links_json`` three times): this
bound lets 16 such pages wait for the store, as 8 MB of unweighted JSON did before; twice
as many made the tree's peak PSS ~10 MB larger at a million URLs, for no speed
(bench/memory_bench.py). Pages of text weigh what they hold, and the bound lets three
times as much of them wait: the write of one batch (~4 MB on the bench site) no longer
fills the queue behind it, which held half the bench site's page jobs in ``room``
(5,500 waits in 10,040 pages, 9 % of the crawl's time at 8 MB: bench/RESULTS.md)."""


WRITE_NOW = object()
"""Queued by ``room``: the writer writes what it holds at once."""


def weight(record: PageRecord) -> int:
    """What a queued record holds in memory, roughly: its text, tokens and (with
    ``--store-body``) body, and its outlinks as the page's job holds them while it waits in
    ``room`` (the JSON and each URL's string: ``LINK_WEIGHT`` times the JSON)."""
    size = len(record.text or "") + LINK_WEIGHT * len(record.links_json)
    size += len(record.tokens or b"")
    return size + len(record.body) if record.body else size


class Writer:
    """Writes one run's records: ``put`` them, ``run`` the writing, ``close`` the queue."""

    def __init__(
        self,
        store: Store,
        counters: RunCounters,
        take_found: Callable[[], list[UrlRecord]],
        take_skips: Callable[[], list[SkipRecord]],
        found_waiting: Callable[[], int] = lambda: 0,
    ) -> None:
        self._store = store
        self._counters = counters
        self._take_found = take_found
        self._take_skips = take_skips
        self._found_waiting = found_waiting
        self._records: asyncio.Queue[PageRecord | object | None] = asyncio.Queue(BATCH * 4)
        self._pending_bytes = 0
        """What the records put and not yet written weigh (``weight``)."""
        self._room = asyncio.Event()
        """Set when a write has made room (``room`` waits on it past a bound)."""
        self._asked = False
        """A ``WRITE_NOW`` is in the queue."""
        self._writing = 0
        """URLs found in the write under way (taken from the admission, not yet stored)."""
        self.run_id = 0

    def _full(self) -> bool:
        found = self._found_waiting() + self._writing
        return self._pending_bytes > QUEUE_BYTES or found > FOUND_MAX

    async def put(self, record: PageRecord) -> None:
        """Queue ``record``; then, past a bound, wait for a write to make room (``room``)."""
        self._pending_bytes += weight(record)
        await self._records.put(record)
        await self.room()

    async def room(self) -> None:
        """Return once the URLs found and the queued records are within their bounds; past
        one, ask the writer to write now (a ``WRITE_NOW`` in its queue: a wait always ends,
        though every page job waits here and none queues a record) and wait for it. A
        page job waits here before it offers its page's links, so that the URLs found wait
        for a write in the thousands, not in the hundreds of thousands."""
        while self._full():
            if not self._asked and not self._writing:  # a write under way makes room
                with contextlib.suppress(asyncio.QueueFull):  # full: a write comes anyway
                    self._records.put_nowait(WRITE_NOW)
                    self._asked = True
            self._room.clear()
            await self._room.wait()

    async def close(self) -> None:
        """No more records: ``run`` writes what it holds and returns."""
        await self._records.put(None)

    async def run(self) -> None:
        batch: list[PageRecord] = []
        try:
            await self._run(batch)
        except asyncio.CancelledError:
            # Accepted (a page job's ``put`` returned, an ``on_page`` may have seen it): it
            # is written, then the cancel goes on.
            while not self._records.empty():
                record = self._records.get_nowait()
                if isinstance(record, PageRecord):
                    batch.append(record)
            try:
                await self.save(batch)
            except StoreError as exc:
                log.warning("the pages accepted before the stop are not stored: %s", exc)
            raise

    async def _run(self, batch: list[PageRecord]) -> None:
        batch_bytes = 0
        records = self._records
        loop = asyncio.get_running_loop()
        flush_at: float | None = None  # a batch is written at most IDLE_S after it began
        while True:
            try:
                async with asyncio.timeout_at(flush_at):
                    record = await records.get()
            except TimeoutError:
                await self.save(batch)
                flush_at, batch_bytes = None, 0
                continue
            if flush_at is None:
                flush_at = loop.time() + IDLE_S
            while True:  # take what is waiting without an await (and a timer) per record
                if record is None:
                    await self.save(batch)
                    return
                if record is WRITE_NOW:
                    self._asked = False
                    await self.save(batch)
                    flush_at, batch_bytes = None, 0
                    break
                assert isinstance(record, PageRecord)
                batch.append(record)
                batch_bytes += weight(record)
                if (
                    len(batch) >= BATCH
                    or batch_bytes >= QUEUE_BYTES // 2
                    or self._found_waiting() >= FOUND_BATCH
                ):
                    await self.save(batch)
                    flush_at, batch_bytes = None, 0
                    break
                if records.empty():
                    break
                record = records.get_nowait()

    def _count(self, pages: list[PageRecord]) -> None:
        """Count ``pages``, committed."""
        count = self._counters.count_page
        for page in pages:
            count(page.status, page.error, page.body_bytes, page.unchanged)

    async def save(self, batch: list[PageRecord] | None = None) -> None:
        """Write ``batch`` (emptied) with the URLs found and refused so far; a write with no
        pages makes those URLs visible to a claim."""
        skips, found = self._take_skips(), self._take_found()
        if batch or skips or found:
            pages = batch[:] if batch else []
            if batch:
                batch.clear()
            self._writing = len(found)
            write = asyncio.ensure_future(self._store.save(pages, found, skips, self.run_id))
            try:
                try:
                    await asyncio.shield(write)
                except asyncio.CancelledError:
                    # The transaction goes on in the store's thread whatever happens here:
                    # wait for it, so that what it committed is counted, then stop.
                    await asyncio.wait([write])
                    if not write.cancelled() and write.exception() is None:
                        self._count(pages)
                    raise
                self._count(pages)
            finally:
                self._writing = 0
                self._pending_bytes -= sum(weight(page) for page in pages)
                self._room.set()
