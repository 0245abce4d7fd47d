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
        """The first stored page within the distance, else ``None`` (and ``url`` is filed).

        Called for every stored page: the four blocks are written out rather than looped
        over (most pages share no block with any other, and then this is 4 look-ups)."""
        t0, t1, t2, t3 = self._tables
        k0 = simhash & _MASK
        k1 = (simhash >> 16) & _MASK
        k2 = (simhash >> 32) & _MASK
        k3 = (simhash >> 48) & _MASK
        c0, c1, c2, c3 = t0.get(k0), t1.get(k1), t2.get(k2), t3.get(k3)
        if c0 or c1 or c2 or c3:
            best: tuple[int, str] | None = None
            for candidates in (c0, c1, c2, c3):
                for other, other_url in candidates or ():
                    distance = (simhash ^ other).bit_count()
                    if distance <= self._max_distance and (best is None or distance < best[0]):
                        best = (distance, other_url)
            if best is not None:
                return best[1]
        entry = (simhash, url)
        for table, key, candidates in ((t0, k0, c0), (t1, k1, c1), (t2, k2, c2), (t3, k3, c3)):
            if candidates is None:
                table[key] = [entry]
            else:
                candidates.append(entry)
        return None
