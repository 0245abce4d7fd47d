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

Loading also rebuilds each cached function's ``Environment`` (the Python objects its code
may need), importing the module the function was defined in for its globals: for numba's own
array functions compiled into our kernels (``np.empty``...) that is ``numba.np.arrayobj`` and
what it imports, 60-80 ms of the preload. Code compiled in nopython mode (every ``@njit``)
reads only an environment's constants, never its globals (object mode does), so in the block
a module of numba's own not imported yet gets an environment with empty globals instead
(preload -39 ms, median of 12); any other module (code of ours or a hook's, which might hold
object-mode code) is imported as numba would.

Private numba API, so defensive: where the names it relies on are missing (another numba
version), nothing is patched; a load that fails the quick way (a symbol another registry
would have defined, say) is retried the normal way.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import types
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

    rebuild_env = _environments_without_imports()

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        try:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors(), rebuild_env():
                result = self._load_overload(sig, target_context)
        except Exception:  # the normal way decides (and raises what it raises)
            log.debug("quick load of a cached kernel failed; loading it normally", exc_info=True)
            return original(self, sig, target_context)
        return result  # None: not in the cache; the caller compiles (and refreshes)

    Cache.load_overload = load_overload  # type: ignore[method-assign]
    try:
        with _masked_arrays_not_imported():
            yield True
    finally:
        Cache.load_overload = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _masked_arrays_not_imported() -> Iterator[None]:
    """numba's ``typeof`` of an ndarray (done at each kernel's first call in a process) asks
    ``isinstance(value, np.ma.MaskedArray)``, and the first ``np.ma`` imports numpy's masked
    arrays: 26-33 ms of the fork server's preload, which the crawl's first page waits for.
    No masked array can exist before ``numpy.ma`` is imported: within the block ``np.ma`` is
    a stand-in whose ``MaskedArray`` nothing is an instance of, and whose other names import
    the real module (which then takes its place). After the block ``np.ma`` is numpy's own
    again, imported when first used. Code in the block that keeps the stand-in itself
    (``from numpy import ma``) would keep a ``MaskedArray`` nothing matches: the block wraps
    only the kernels' loading and first calls, which do not."""
    import numpy

    if "numpy.ma" in sys.modules or "ma" in vars(numpy):
        yield  # imported already (numpy 1.x imports it with numpy), or a stand-in is in place
        return

    class NotImported(types.ModuleType):
        class MaskedArray:
            """No value is an instance of this: ``numpy.ma`` is not imported."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("numpy.ma"), name)

    stand_in = NotImported("numpy.ma")
    numpy.ma = stand_in  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if vars(numpy).get("ma") is stand_in:
            del numpy.ma  # type: ignore[attr-defined]


def _environments_without_imports() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """A context manager within which unpickled ``Environment``s of numba's own modules not
    imported yet get empty globals (see the module's docstring); numba's own rebuilding where
    its names are missing, or within an enclosing one."""
    try:
        from numba.core import environment
    except ImportError:  # pragma: no cover - numba's layout changed
        return contextlib.nullcontext
    original: Callable[..., Any] | None = getattr(environment, "_rebuild_env", None)
    memo = getattr(getattr(environment, "Environment", None), "_memo", None)
    if original is None or memo is None or not hasattr(environment, "lookup_environment"):
        return contextlib.nullcontext  # pragma: no cover - numba's internals changed
    if getattr(original, "_without_imports", False):
        return contextlib.nullcontext  # an enclosing block swapped it already

    def rebuild(modname: str, consts: Any, env_name: str) -> Any:
        if (
            not modname.startswith("numba.")
            or modname in sys.modules
            or environment.lookup_environment(env_name) is not None
        ):
            return original(modname, consts, env_name)
        env = environment.Environment({"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        memo[env_name] = env
        return env

    # Pickled by reference while swapped in (an Environment's ``__reduce__`` names it):
    # to the module attribute it then is, and after, numba's own.
    rebuild.__module__, rebuild.__qualname__ = original.__module__, original.__qualname__
    rebuild._without_imports = True  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def swapped() -> Iterator[None]:
        environment._rebuild_env = rebuild  # what the pickles of cached functions call
        try:
            yield
        finally:
            environment._rebuild_env = original

    return swapped
