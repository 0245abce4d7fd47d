"""Set-up of a parse worker process (run once per process by the pool).

``parse_batch`` is what the pool submits. Workers ignore SIGINT: a Ctrl-C in a terminal reaches the whole process group, and the
parent decides how to stop; a worker dying of it would break the pool mid-batch.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from parsers.page import Page, ParseFailure, ParseJob


def parse_batch(jobs: list[ParseJob]) -> list[Page | ParseFailure]:
    """``parsers.html.parse_batch``, imported here in the worker: the main process submits
    this function and so never imports the parser and its numba kernels."""
    from parsers.html import parse_batch as parse

    return parse(jobs)


def init_worker(extract: Callable[[Any, str], Any] | None = None) -> None:
    """Per process: ignore SIGINT; exit when the crawl process dies; install the crawl's
    ``extract`` hook, if any."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent()
    if extract is not None:
        from parsers import html

        html.set_extract(extract)


def _exit_with_parent(poll_s: float = 1.0) -> None:
    """A crawl killed with SIGKILL cannot stop its pool: without this its workers (and their
    memory) would live on as orphans. A daemon thread notices the new parent and exits."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def warm_up() -> int:
    """Imports are done, lexbor loaded and the numba kernels compiled or loaded from their
    cache before the first real batch; returns the pid."""
    from parsers.tokens import encode_counts, simhash_text, tokenize

    LexborHTMLParser("<p>warm</p>").css_first("p")
    counts = tokenize("warm up")
    encode_counts(counts)
    simhash_text("warm up the kernels")
    return os.getpid()
