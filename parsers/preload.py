"""Imported once by the pool's fork server: parse workers are forked from a process that has
already imported the parser, lexbor and numba and loaded the kernels from their cache (the
quick way, ``parsers.kernel_cache``: without numba's compiler set-up, half the preload).

A worker then starts in milliseconds instead of ~0.4 s of CPU each, and the workers share
those pages with the fork server (copy-on-write) instead of each holding its own ~110 MB.
The fork server never runs a ``parallel=True`` kernel or starts a thread, so forking it is
safe for numba (see ``crawler.pool.parse_pool``).
"""

from __future__ import annotations

import gc
import logging
import os

# One BLAS thread (see ``crawler.cli.entry.BLAS_THREADS``), for a fork server started by other
# code than the ``crawl`` command (which set it already): this module is imported in the
# fork server only, before numpy unless that code's ``__main__`` imported it first.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# No garbage collection while numpy, numba and the kernels load: the hundreds of modules'
# new objects set it off again and again, for next to no garbage (~10 % of the preload,
# which the crawl's first pages wait for). Everything is frozen below anyway.
gc.disable()

from parsers.worker import warm_up  # noqa: E402  # after the two: it imports numpy

try:
    warm_up()
except Exception:  # each worker warms up again and reports the real error
    logging.getLogger(__name__).debug("fork server warm-up failed", exc_info=True)

# Everything imported so far lives as long as the fork server: keep it out of the garbage
# collector's reach, so that collections in the workers do not write to (and so copy) the
# pages they share with it.
gc.freeze()
gc.enable()  # the workers, forked from here, collect as usual
