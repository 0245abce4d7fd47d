"""The parse workers' two kernels compiled ahead of time: an extension module that needs
numpy only, not numba, to run.

Owns: the module's name for the source it was compiled from, where it is kept, and loading
it (``load``: no numba). ``parsers.aot_build`` builds it (``python -m parsers.aot_build``:
numba's ``pycc`` and a C compiler).

Why: to run two kernels from numba's cache, a worker (or the fork server it is forked
from) imports numba and LLVM and rebuilds numba's runtime: ~0.28 s of a core and ~170 MB
resident before the first page, where lexbor, numpy and this module take ~0.09 s and ~40 MB. The
crawl waits for that start (a 526-page crawl of the Python docs spends a third of its wall
time before its workers are up), and each worker keeps the pages of it that it touched.
``pycc`` compiles the very same functions (``parsers.tokens._terms``,
``parsers.hrefs._resolve_all``, with the kernels they call) to machine code in a plain
extension module; ``parsers.native`` calls it where it exists and numba's JIT where not.

Invariants:
- the module's name holds a hash of its inputs (the kernels' source files, numba's and
  numpy's versions, the interpreter's ABI, the CPU): an edit, an upgrade or another machine
  sharing the folder finds no module, never a stale one;
- a module is written to a temporary name and renamed into place: a reader never sees half
  of one, and two builders at once leave one whole module;
- the compiled functions check no argument types (a wrong dtype is undefined behaviour):
  ``parsers.native`` is their only caller, and builds every array it passes.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
from pathlib import Path
from types import ModuleType

FOLDER_ENV = "CRAWL_KERNEL_DIR"
"""Where the module is kept and looked for, instead of the defaults (``folders``)."""
NO_AOT_ENV = "CRAWL_NO_AOT"
"""Set (to anything) to never load the module: numba's JIT runs the kernels."""
_PACKAGE = Path(__file__).resolve().parent
_SOURCES = ("tokens.py", "hrefs.py", "terms.py")
"""The kernels' source, and the module of constants they read."""
_VERSIONS = (("numba", "_version.py"), ("numpy", "version.py"))
"""Files that change with each version of the libraries the module was compiled with."""


def module_name() -> str:
    """``_parse_kernels_<hash>``: the extension module's import name for this source, these
    libraries, this interpreter and this CPU."""
    digest = hashlib.blake2b(digest_size=10)
    for name in _SOURCES:
        digest.update((_PACKAGE / name).read_bytes())
    for package, file in _VERSIONS:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            digest.update(package.encode() + b" missing")
            continue
        version = Path(spec.origin).parent / file
        digest.update(version.read_bytes() if version.exists() else spec.origin.encode())
    digest.update(f"{sys.implementation.cache_tag} {platform.machine()}".encode())
    digest.update(_cpu())
    return f"_parse_kernels_{digest.hexdigest()}"


def _cpu() -> bytes:
    """What identifies this CPU's instruction set: the module is compiled for the host CPU
    (10-20 % faster here than for a generic one), which another CPU may not run. Linux: the
    first processor's model and flags in ``/proc/cpuinfo``; elsewhere ``platform``'s words."""
    try:
        with open("/proc/cpuinfo", "rb") as info:
            lines = []
            for line in info:
                if not line.strip():
                    break  # the first processor's block is enough
                if line.startswith((b"model name", b"flags", b"vendor_id", b"Features")):
                    lines.append(line)
            return b"".join(lines)
    except OSError:
        return f"{platform.processor()} {platform.platform()}".encode()


def folders() -> list[Path]:
    """Where the module may be, in the order looked: ``CRAWL_KERNEL_DIR`` if set; else
    beside numba's own cache of the same kernels (``NUMBA_CACHE_DIR``, or this package's
    ``__pycache__``), then the user's cache folder."""
    chosen = os.environ.get(FOLDER_ENV)
    if chosen:
        return [Path(chosen)]
    numba_cache = os.environ.get("NUMBA_CACHE_DIR")
    first = Path(numba_cache) / "crawler" if numba_cache else _PACKAGE / "__pycache__"
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crawler"
    return [first, user]


def file_name(name: str) -> str:
    """The file of the module ``name``: the interpreter's extension suffix."""
    return name + importlib.machinery.EXTENSION_SUFFIXES[0]


def find() -> Path | None:
    """The built module's file, if one exists for this source."""
    file = file_name(module_name())
    for folder in folders():
        path = folder / file
        if path.is_file():
            return path
    return None


_loaded: dict[Path, ModuleType] = {}


def load() -> ModuleType | None:
    """The module, imported (once a process), or ``None``: none is built for this source,
    ``CRAWL_NO_AOT`` is set, or it does not load (numba's JIT runs the kernels then)."""
    if os.environ.get(NO_AOT_ENV):
        return None
    path = find()
    if path is None:
        return None
    return load_file(path)


def load_file(path: Path) -> ModuleType | None:
    """The module in ``path``, imported once a process; ``None`` if it does not load."""
    if path in _loaded:
        return _loaded[path]
    name = path.name.split(".", 1)[0]
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        if spec is None:
            return None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError):  # built against another numpy, say: the JIT will do
        return None
    _loaded[path] = module
    return module


def writable_folder() -> Path:
    for folder in folders():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder
    raise OSError(f"no folder to write the compiled kernels to: {', '.join(map(str, folders()))}")


def wanted() -> bool:
    """Whether a background build is worth starting: none is built for this source, none
    failed before (``parsers.aot_build.ensure_built`` leaves a note), and ``CRAWL_NO_AOT``
    is not set."""
    if os.environ.get(NO_AOT_ENV) or find() is not None:
        return False
    note = failure_note()
    return not any((folder / note).exists() for folder in folders())


def failure_note() -> str:
    """The name of the note a failed build leaves (``parsers.aot_build.ensure_built``)."""
    return module_name() + ".failed"
