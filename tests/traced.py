"""``traced()``: what Python's allocator handed out while a block ran (``tracemalloc``), for
the tests that bound a parser's or an exporter's memory against hostile input."""

from __future__ import annotations

import contextlib
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Traced:
    current: int = 0
    """Bytes still allocated (since the block began) when it ended."""
    peak: int = 0
    """The most bytes allocated at once while it ran."""


@contextlib.contextmanager
def traced() -> Iterator[Traced]:
    """``with traced() as memory: ...``, then ``memory.current`` and ``memory.peak``. Tracing
    stops however the block ends."""
    memory = Traced()
    tracemalloc.start()
    try:
        yield memory
        memory.current, memory.peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
