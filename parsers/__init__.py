"""Pure CPU work that runs in parse worker processes: HTML to ``Page``, URL resolution, tokens.

Imports nothing from ``crawler`` or ``storage``, so the parse workers load only this package.
"""

from parsers import dataclass_cache

dataclass_cache.install()  # before any module of ours makes a dataclass
