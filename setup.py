"""The one build step pyproject.toml cannot state in a stable form (setuptools calls its
``ext-modules`` table experimental): the C walk of lexbor's tree, ``parsers/_walk.c`` (with
the scan of lexbor's tokens, ``parsers/_scan.c``), and the frontier's set of URL hashes,
``crawler/frontier/_seen.c``.

All optional: where they do not compile (no C compiler), the install goes on, the parse
workers walk the tree in Python (``parsers/tree_walk.py``) and the frontier keeps its URL
hashes in the Python class (``crawler/frontier/seen.py``), with the same results.
"""

import sys

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "parsers._walk",
            ["parsers/_walk.c", "parsers/_resolve.c", "parsers/_scan.c"],
            depends=["parsers/_resolve.h", "parsers/_scan.h"],
            libraries=[] if sys.platform == "win32" else ["dl"],  # dlopen (glibc before 2.34)
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "crawler.frontier._seen",
            ["crawler/frontier/_seen.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
