"""Loading the parse kernels from numba's cache without initialising numba's compiler.

Owns: ``quick_cache_loads``, used while a parse worker (or its fork server) warms up.

Numba's ``Cache.load_overload`` first calls ``target_context.refresh()``: it imports and
installs every lowering registry numba has (its ``cpython``, ``np``, ``typed``... modules, 75
modules and ~2,300 registrations; ~0.25-0.5 s of one core here, half of the fork server's
preload) because a *compilation* needs them. Machine code loaded from the cache needs none of
them: only the numba runtime (NRT: allocation and reference counting, whose symbols the
cached code links against), which ``rtsys.initialize`` sets up, as ``refresh`` would first.
A cache miss is untouched: ``Dispatcher.compile`` then compiles, and numba's compiler
refreshes both contexts itself (``CompilerBase.__init__``).

Private numba API, so defensive: where the names it relies on are missing (another numba
version), nothing is patched; a load that fails the quick way (a symbol another registry
would have defined, say) is retried the normal way.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)


@contextlib.contextmanager
def quick_cache_loads() -> Iterator[bool]:
    """Within the block, cached numba kernels load without ``refresh()``; yields whether
    the quick path is in place (False: numba's own loading, unchanged)."""
    try:
        from numba.core.caching import Cache
        from numba.core.runtime import rtsys
    except ImportError:  # pragma: no cover - numba's layout changed
        yield False
        return
    original: Callable[..., Any] | None = Cache.__dict__.get("load_overload")
    needed = ("_load_overload", "_guard_against_spurious_io_errors")
    if original is None or not all(hasattr(Cache, name) for name in needed):
        yield False  # pragma: no cover - numba's internals changed
        return

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        try:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                result = self._load_overload(sig, target_context)
        except Exception:  # the normal way decides (and raises what it raises)
            log.debug("quick load of a cached kernel failed; loading it normally", exc_info=True)
            return original(self, sig, target_context)
        return result  # None: not in the cache; the caller compiles (and refreshes)

    Cache.load_overload = load_overload  # type: ignore[method-assign]
    try:
        yield True
    finally:
        Cache.load_overload = original  # type: ignore[method-assign]
