"""The bytecode of the dataclasses' generated methods, kept from one process to the next.

``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``
(and a frozen class's ``__setattr__`` and ``__delattr__``) as source text and ``exec``s it:
on CPython 3.11 and 3.12 one compile per method, about 200 for the 40 classes a crawl
imports, which made them a quarter of its imports' time (3.13 compiles once per class).
``install`` puts an ``exec`` into the ``dataclasses`` module's namespace, where its
``exec`` calls find it before the builtin: for the classes of this project's packages
(``OURS``: the module whose globals the method is made in) it runs the source's code object
from a memo, compiled the first time only; every other dataclass gets the builtin ``exec``.

The memo is a file beside this module's bytecode (``cache_path``: where ``__pycache__`` is,
or ``PYTHONPYCACHEPREFIX`` says), read at the first such class and, when a process compiled
any, written at its exit (merged with what is there, atomically), unless bytecode is not
written (``sys.dont_write_bytecode``; ``save(force=True)`` writes it anyway, as
``compileall`` writes ``.pyc`` files). A code object is keyed by its whole source,
so a class that changed is a new key, never a stale one, and the file starts with the
interpreter's bytecode magic and optimization level: another Python ignores it, as it does
another's ``.pyc``. Trusted as a ``.pyc`` is: whoever can write it can write those.
"""

# No ``from __future__ import annotations`` here: ``exec`` of a string compiles it with the
# future flags of the frame that calls it, which for everyone else's dataclasses is
# ``_exec``'s (it must add none: their methods' annotations would become strings).
import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from types import CodeType
from typing import Any

OURS = frozenset({"crawler", "parsers", "storage"})
"""The packages whose dataclasses' methods are memoized."""

MAX_ENTRIES = 600
"""Past this many methods kept (about twice all of this project's; old versions of classes
pile up in a developer's tree, and each entry is read at every start), a process writes
only those it used."""

_HEADER = importlib.util.MAGIC_NUMBER + bytes([sys.flags.optimize])
_codes: dict[str, CodeType] | None = None
"""Source text -> code object: read from the file at the first use, then grown."""
_used: set[str] = set()
_compiled: dict[str, CodeType] = {}
"""The code objects compiled by this process (what it has to write)."""
_saving = False
"""``save`` is registered to run at exit."""


def install() -> None:
    """Memoize the compiles of our dataclasses' methods (once a process; never replaces an
    ``exec`` someone else put there)."""
    namespace = vars(dataclasses)
    if "exec" not in namespace:
        namespace["exec"] = _exec


def compiled_here() -> int:
    """How many methods this process compiled (found in no file)."""
    return len(_compiled)


def cache_path() -> str | None:
    """The memo's file, or ``None`` where this interpreter keeps no bytecode."""
    try:
        pyc = importlib.util.cache_from_source(__file__)
    except (NotImplementedError, ValueError):
        return None
    return pyc.rpartition(".")[0] + ".methods"


def _exec(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> None:
    if isinstance(source, str) and isinstance(globals, dict):
        name = globals.get("__name__")
        if isinstance(name, str) and name.partition(".")[0] in OURS:
            source = _code(source)
    builtins.exec(source, globals, locals, **kwargs)


def _code(source: str) -> CodeType:
    global _codes, _saving
    if _codes is None:
        _codes = _read()
    code = _codes.get(source)
    if code is None:
        # as ``exec(source)`` in ``dataclasses`` compiles it: no __future__ flags there
        code = compile(source, "<string>", "exec", dont_inherit=True)
        _codes[source] = code
        _compiled[source] = code
        if not _saving:
            _saving = True
            atexit.register(save)
    _used.add(source)
    return code


def _read() -> dict[str, CodeType]:
    path = cache_path()
    if path is None:
        return {}
    try:
        with open(path, "rb") as file:
            data = file.read()
        if not data.startswith(_HEADER):
            return {}
        codes = marshal.loads(memoryview(data)[len(_HEADER) :])
        if not isinstance(codes, dict):
            return {}
        return {k: v for k, v in codes.items() if isinstance(k, str) and isinstance(v, CodeType)}
    except Exception:  # none yet, or damaged (marshal raises SystemError on some bytes)
        return {}


def save(force: bool = False) -> bool:
    """Write the memo if this process compiled any method (``force``: even where bytecode
    is not written); ``False`` when nothing was written."""
    path = cache_path()
    if path is None or not _compiled or (sys.dont_write_bytecode and not force):
        return False
    codes = _read()  # what other processes wrote meanwhile stays
    codes.update(_compiled)
    if len(codes) > MAX_ENTRIES:
        codes = {k: v for k, v in (_codes or {}).items() if k in _used}
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as file:
            file.write(_HEADER + marshal.dumps(codes))
        os.replace(temporary, path)
    except OSError:  # a read-only install: compiled again next time, as without the memo
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return False
    _compiled.clear()
    return True
