"""Near-duplicate detection with 64-bit SimHash: pages within Hamming distance 3.

Owns: an index of the SimHashes of the pages stored so far. Pure (no IO).

By the pigeonhole principle two 64-bit hashes within distance 3 agree exactly on at least
one of four 16-bit blocks, so each hash is filed under its four blocks and a query compares
only against hashes sharing a block (Manku et al., WWW 2007), not against every page.
"""

from __future__ import annotations

MAX_DISTANCE = 3
_BLOCKS = 4
_MASK = (1 << 16) - 1


class NearDuplicates:
    """``first_near(simhash, url)``: the earlier URL this page nearly duplicates, or ``None``."""

    def __init__(self, max_distance: int = MAX_DISTANCE) -> None:
        if not 0 <= max_distance < _BLOCKS:
            raise ValueError(f"max_distance must be in 0..{_BLOCKS - 1}, got {max_distance}")
        self._max_distance = max_distance
        self._tables: list[dict[int, list[tuple[int, str]]]] = [{} for _ in range(_BLOCKS)]

    def first_near(self, simhash: int, url: str) -> str | None:
        """The first stored page within the distance, else ``None`` (and ``url`` is filed)."""
        best: tuple[int, str] | None = None
        keys = [(simhash >> (16 * i)) & _MASK for i in range(_BLOCKS)]
        for table, key in zip(self._tables, keys, strict=True):
            for other, other_url in table.get(key, ()):
                distance = (simhash ^ other).bit_count()
                if distance <= self._max_distance and (best is None or distance < best[0]):
                    best = (distance, other_url)
        if best is not None:
            return best[1]
        for table, key in zip(self._tables, keys, strict=True):
            table.setdefault(key, []).append((simhash, url))
        return None
