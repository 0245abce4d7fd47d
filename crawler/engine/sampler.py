"""The run's progress, written to the store every few seconds (``run_samples``).

Owns: when a sample is taken (at the start, every ``SAMPLE_INTERVAL_S``, at the end) and
that a sample that cannot be written never stops a crawl (a warning: samples are a view of
the crawl, not its data). ``crawl serve`` charts pages/s and errors/s from them, live.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from crawler.report import Progress
from storage.base import RunSample, Store, StoreError

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_S = 2.0
"""Seconds between samples: a day's run is ~43,000 rows of eight numbers."""


def as_sample(progress: Progress, backlog: int) -> RunSample:
    """``progress`` as a sample; ``backlog``: the URLs queued in the store, not in memory."""
    return RunSample(at=time.time(), elapsed_s=round(progress.elapsed_s, 3),
                     done=progress.done, failed=progress.errors,
                     queued=progress.queued + backlog, in_flight=progress.in_flight,
                     bytes=progress.bytes)  # fmt: skip


class Sampler:
    """Writes run ``run_id``'s ``progress()`` (and ``backlog()``: URLs queued in the store,
    not in memory) to ``store``: ``record`` once, ``run`` until cancelled."""

    def __init__(self, store: Store, run_id: int, progress: Callable[[], Progress],
                 backlog: Callable[[], int]) -> None:  # fmt: skip
        self._store, self._run_id = store, run_id
        self._progress, self._backlog = progress, backlog

    async def run(self) -> None:
        """A sample now and then every ``SAMPLE_INTERVAL_S`` until cancelled."""
        while True:
            await self.record()
            await asyncio.sleep(SAMPLE_INTERVAL_S)

    async def record(self) -> None:
        try:
            await self._store.add_sample(self._run_id, as_sample(self._progress(), self._backlog()))
        except StoreError as exc:
            log.warning("progress sample not written: %s", exc)
