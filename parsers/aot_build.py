"""Building the parse kernels' ahead-of-time module (``parsers.aot``): numba's ``pycc``
compiles ``parsers.tokens._terms`` and ``parsers.hrefs._resolve_all``, with the kernels they
call, into an extension module that needs numpy only.

``python -m parsers.aot_build`` builds it where it is missing and prints its path; the
background warmer (``crawler.relevance.warmer``) does the same after a crawl. Needs a C
compiler and ~5 s of a core. ``pycc`` is "pending deprecation" since numba 0.57, with no
replacement yet: where a numba has dropped it, ``build`` raises ``ImportError``,
``ensure_built`` leaves its note, and numba's JIT goes on running the kernels.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from numba import types
from numba.core.errors import NumbaPendingDeprecationWarning

from parsers import aot, hrefs, tokens


def _pycc() -> Any:
    """numba's ``pycc.CC``, or None in a numba without it. Imported only to build: it
    brings setuptools and distutils, a quarter second of a core that a warmer with
    nothing to build would spend for nothing."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
            from numba.pycc import CC
    except ImportError:  # a numba without pycc: build() says so
        return None
    return CC


log = logging.getLogger(__name__)


def build(folder: Path | None = None) -> Path:
    """Compile the module into ``folder`` (the first of ``folders`` that can be written,
    unless given) and return its path. Takes numba, a C compiler and ~5 s of a core.
    Raises ``OSError`` when no folder can be written, and what ``pycc`` raises when it
    cannot compile."""
    compiler = _pycc()
    if compiler is None:
        raise ImportError("this numba has no pycc to compile ahead of time with")
    name = aot.module_name()
    target = folder if folder is not None else aot.writable_folder()
    target.mkdir(parents=True, exist_ok=True)
    readonly = types.Array(types.uint8, 1, "C", readonly=True)
    u8 = types.Array(types.uint8, 1, "C")
    u32 = types.Array(types.uint32, 1, "C")
    i64 = types.Array(types.int64, 1, "C")
    cc = compiler(name)
    cc.target_cpu = "host"
    cc.verbose = False
    # The argument types each kernel is called with (``parsers.native``): the readonly
    # arrays are views of bytes.
    terms = types.Tuple((types.int64, types.int64, types.uint64))
    cc.export("page_terms", terms(readonly, u8, types.int64, u32, types.uint64, u8, u32))(
        tokens._page_terms.py_func
    )
    resolved = types.Tuple((u8, i64))
    cc.export("resolve_all", resolved(readonly, types.int64, readonly, types.int64, types.int64))(
        hrefs._resolve_all.py_func
    )
    with tempfile.TemporaryDirectory(prefix=".aot-", dir=target) as scratch:
        cc.output_dir = scratch
        cc.compile()
        built = Path(scratch) / aot.file_name(name)
        final = target / built.name
        os.replace(built, final)
    _prune(target)
    return final


KEEP = 4
"""Modules kept in a folder, the newest: a folder shared by machines, interpreters or
checkouts holds one for each; an older one is of a source or library long replaced."""


def _prune(folder: Path) -> None:
    built = sorted(folder.glob("_parse_kernels_*"), key=_mtime, reverse=True)
    for old in built[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def ensure_built() -> Path | None:
    """The module's path, built first if there is none; ``None`` when it cannot be built
    (no C compiler, no writable folder): the JIT goes on running the kernels, and a note
    beside where the module would be keeps later crawls from trying again for this source."""
    found = aot.find()
    if found is not None:
        return found
    try:
        return build()
    except Exception as exc:  # pycc's compiler errors are of many kinds; none is fatal
        log.warning("the parse kernels were not compiled ahead of time: %s", exc)
        with contextlib.suppress(OSError):
            (aot.writable_folder() / aot.failure_note()).write_text(f"{exc}\n")
        return None


def main(argv: list[str]) -> int:
    """``python -m parsers.aot_build``: build the module if it is missing; print its path."""
    if len(argv) > 1:
        print("usage: python -m parsers.aot_build", file=sys.stderr)
        return 2
    logging.basicConfig(format="%(name)s: %(message)s")
    path = ensure_built()
    if path is None:
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
