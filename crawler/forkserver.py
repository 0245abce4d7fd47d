"""The parse workers' fork server: its multiprocessing context and an early start.

Owns: which start method the pool uses and what the fork server preloads. Light on purpose
(``multiprocessing`` only): the ``crawl`` command starts the fork server before it imports
anything else, so that the fork server's ~0.4 s preload (numba, lexbor) runs on another core
while this process imports the crawler.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.context

log = logging.getLogger(__name__)

PRELOAD = "parsers.preload"


def context(main: bool = True) -> multiprocessing.context.BaseContext:
    """The fork server context with ``parsers.preload`` preloaded (``spawn`` without one).

    The preload list is process-wide and read when the fork server starts: ours is added to
    the list already set (by default ``__main__``, the script, imported once there instead of
    in every worker, for hooks an application defines in it), never replacing an
    application's own. ``main=False`` leaves ``__main__`` out (the ``crawl`` command: its
    workers need nothing of the script). In a process whose fork server was started before
    (by other code), workers still work, and warm up themselves."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver

    fork_context = multiprocessing.get_context("forkserver")
    preload = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    wanted = [m for m in preload if main or m != "__main__"]
    if PRELOAD not in wanted:
        wanted.append(PRELOAD)
    if wanted != preload:
        fork_context.set_forkserver_preload(wanted)
    return fork_context


def prestart(main: bool = True) -> None:
    """Start the fork server now (it preloads the parser and numba in its own process) so
    that it is ready when the pool wants workers. For a caller with other start-up work to
    do first, like the CLI importing the crawler; harmless to skip or to call again.
    ``main``: see ``context``."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        context(main)
        try:
            forkserver.ensure_running()
        except OSError as exc:  # the pool tries again, and reports a real failure itself
            log.debug("fork server did not start early: %s", exc)
