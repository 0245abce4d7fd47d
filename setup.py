"""The one build step pyproject.toml cannot state in a stable form (setuptools calls its
``ext-modules`` table experimental): the C walk of lexbor's tree, ``parsers/_walk.c``.

Optional: where it does not compile (no C compiler), the install goes on and the parse
workers walk the tree in Python, with the same results (``parsers/tree_walk.py``).
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
        )
    ]
)
