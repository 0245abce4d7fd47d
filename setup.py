"""The one build step pyproject.toml cannot state in a stable form (setuptools calls its
``ext-modules`` table experimental): the C walk of lexbor's tree, ``parsers/_walk.c``, and
the frontier's set of URL hashes, ``crawler/frontier/_seen.c``.

Both optional: where they do not compile (no C compiler), the install goes on, the parse
workers walk the tree in Python (``parsers/tree_walk.py``) and the frontier keeps its URL
hashes in the Python class (``crawler/frontier/seen.py``), with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "parsers._walk",
            ["parsers/_walk.c", "parsers/_resolve.c"],
            depends=["parsers/_resolve.h"],
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
