"""Parsing in the crawl process: for the requests a pool runs itself, from the start (an
``extract`` hook the workers cannot import) or once its workers cannot run.

Pages whose shape makes lexbor slow (``costly``) are not parsed here, where a parse cannot be
abandoned: they fail with ``ParseTimeout``, as a worker's would.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from crawler.pool.workers import Reply
from parsers.page import ParseFailure, ParseJob
from parsers.worker import kernels, parse_batch

IN_PROCESS_WHY = (
    "the extract hook is defined in a script the parse workers cannot import (one read from "
    "standard input, say); put it in a file for parallel parsing"
)


def run_here(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    reply: Reply,
    extract: Callable[[Any, str], Any] | None = None,
) -> None:
    """Run a worker's request in this process (with the crawl's ``extract`` hook, as a
    worker has it); pages too costly to parse here (``costly``) fail with ``ParseTimeout``
    instead of holding the event loop."""
    if function is parse_batch:
        jobs: list[ParseJob] = args[0]
        here = [job for job in jobs if not costly(job.body)]
        done = iter(_parse_here(here, extract) if here else ())
        results: list[Any] = []
        for job in jobs:
            if costly(job.body):
                results.append(ParseFailure(job.url, _COSTLY, timed_out=True))
            else:
                results.append(next(done))
        reply(True, results)
        return
    try:
        result = function(*args)
    except Exception as exc:  # the caller's to handle, as a worker's reply would be
        reply(False, exc)
        return
    reply(True, result)


def _parse_here(jobs: list[ParseJob], extract: Callable[[Any, str], Any] | None) -> list[Any]:
    html = kernels().html  # the parser and numba: in this process only on this path
    html.set_extract(extract)
    try:
        return html.parse_batch(jobs)
    finally:
        html.set_extract(None)


_COSTLY = "not parsed in the crawl process: its shape would make the parser slow"
COSTLY_STEPS = 16_000_000
"""``costly``'s bound on tags times unclosed tags, the parser's cost of deep nesting."""
_LONG_TAG = re.compile(rb"<[^>]{8192}")
"""A tag of 8 KiB or more: a few thousand attributes, the parser's other quadratic case."""


def costly(body: bytes) -> bool:
    """Whether lexbor may take long on ``body`` (super-linear: deep nesting, thousands of
    attributes on one element), judged in C-speed scans: the number of tags times the
    number left unclosed (an upper bound on nesting), and any tag of 8 KiB or more. Pages
    judged so are parsed only where a parse can be abandoned (a worker)."""
    tags = body.count(b"<")
    unclosed = tags - 2 * body.count(b"</")
    return tags * unclosed > COSTLY_STEPS or _LONG_TAG.search(body) is not None
