"""Process settings for a ``crawl`` command, set before anything heavy is imported.

Read by the console script (``crawler.cli.entry``) at its start and by a CLI crawl
(``crawler.cli.runner.tune_gc``); a library caller's process keeps its own settings.
"""

from __future__ import annotations

GC_THRESHOLD = (50_000, 20, 10)
"""The cyclic collector's thresholds in a process the crawl owns (Python's first is 700
allocations). Importing the crawler and its dependencies allocates many objects and frees
few, so the default thresholds collect again and again, over ever larger generations, for
nothing; a crawl itself frees nearly everything by reference counting. Figures:
``bench/RESULTS.md`` (start-up)."""

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")
"""Set (unless the user set it) before anything imports numpy: numpy's OpenBLAS starts a
thread per extra core at import, which spins waiting for work, and the crawl never calls
BLAS. In the command and in its fork server, that spinning took CPU from the start-up,
when the fork server's preload (which the first page waits for) and the command's imports
share the cores."""
