"""Set-up of a parse worker process (run once per process by the pool).

Workers ignore SIGINT: a Ctrl-C in a terminal reaches the whole process group, and the
parent decides how to stop; a worker dying of it would break the pool mid-batch.
"""

from __future__ import annotations

import os
import signal

from selectolax.lexbor import LexborHTMLParser


def init_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def warm_up() -> int:
    """Imports are done and lexbor loaded before the first real batch; returns the pid."""
    LexborHTMLParser("<p>warm</p>").css_first("p")
    return os.getpid()
