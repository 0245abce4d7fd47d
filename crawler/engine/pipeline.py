"""Pipeline: the bound on pages between their fetch and the store, in count and in weight.

A page job holds its page from the fetch until the writer has its record: the body, the
parsed text and every outlink (a page waiting for the writer to make room, ``Writer.room``,
holds them all). A bound in pages alone lets memory follow the pages' size: 256 pages that
each link to a thousand URLs hold a quarter of a million URL strings, 30-40 MB. So the
number of pages let in follows what a page has weighed lately (``WEIGHT_BUDGET`` over a
moving average of the pages' weight), between a floor and a ceiling (``Pipeline.of``: a
32nd of the fetch slots, at least 2, and four times as many). Pages that heavy are few at
once by design: pages of a thousand new links each outrun the store's inserts anyway (the
writer is what they wait for), and pages of megabytes of text are what the budget is for
(4 MB pages, 64 slots: 1.6 GB PSS with 256 of them let in, 0.26 GB with 8, 0.18 GB with 2,
as fast; bench/memory_bench.py --page-bytes). Until a page has been
weighed ``initial`` holds (all the fetch slots): the first pages are fetched at full
concurrency, not held back until one is weighed.

Single-consumer: the dispatcher alone ``acquire``s; the page jobs ``release``.
"""

from __future__ import annotations

import asyncio

from storage.base import PageRecord

WEIGHT_BUDGET = 6 << 20
"""What the pages between fetch and store may weigh together, about (bytes)."""
LINK_WEIGHT = 3
"""A link's weight over its share of ``links_json``: its URL string held by the page, the
tuple slot and object header, and the JSON text itself (a 44-character URL: ~150 bytes)."""
PAGE_WEIGHT = 2048
"""A page's own weight besides its body and links: its job, response and record objects."""
SMOOTHING = 1 / 32
"""The moving average follows about the last 32 pages."""


def page_weight(record: PageRecord) -> int:
    """What a page held in memory between its fetch and the store, roughly. Not its text:
    counting it (most of a text-heavy page's body again) held the Python docs' crawl ~8 %
    slower, at the same peak, and the floor already bounds pages of megabytes."""
    return PAGE_WEIGHT + (record.body_bytes or 0) + LINK_WEIGHT * len(record.links_json)


class Pipeline:
    """At most ``limit()`` page jobs at once: ``floor`` to ``ceiling`` by their weight
    (``initial`` before one is weighed)."""

    def __init__(
        self, floor: int, ceiling: int, initial: int | None = None, budget: int | None = None
    ) -> None:
        self._floor = floor
        self._ceiling = max(floor, ceiling)
        self._initial = floor if initial is None else min(max(floor, initial), self._ceiling)
        self._budget = WEIGHT_BUDGET if budget is None else budget
        self._average = 0.0
        """A page's moving-average weight; 0 until one is weighed."""
        self.running = 0
        self._free = asyncio.Event()

    @classmethod
    def of(cls, concurrency: int) -> Pipeline:
        """A crawl's: a 32nd of its fetch slots (at least 2) to four times as many, all of
        them to start."""
        return cls(max(2, concurrency // 32), concurrency * 4, concurrency)

    def limit(self) -> int:
        if self._average <= 0:
            return self._initial
        fits = int(self._budget / self._average)
        return max(self._floor, min(self._ceiling, fits))

    async def acquire(self) -> None:
        while self.running >= self.limit():
            self._free.clear()
            await self._free.wait()
        self.running += 1

    def release(self, record: PageRecord | None = None) -> None:
        """A page job ended; ``record``, its page's record, updates the average weight."""
        self.running -= 1
        if record is not None:
            weight = page_weight(record)
            average = self._average
            self._average = weight if average <= 0 else average + (weight - average) * SMOOTHING
        if self.running < self.limit():
            self._free.set()
