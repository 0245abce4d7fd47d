"""SeenSet: a compact set of 64-bit URL hashes for the frontier's "seen before?" test.

A Python ``set`` of a million ints takes ~66 MB (an int object and a hash-table slot each).
Here the bulk lives in one sorted ``array('q')`` (8 bytes a hash) and only recent additions
in a small ``set``; when that grows past a 32nd of the array (at least 32 Ki entries) it
is merged in (appended, then a numpy sort in place of the two sorted runs: linear in their
length, no copy). A million hashes take ~8 MB plus the recent set: a set's int weighs ~60
bytes with its slot, so an eighth of the array would be ~7 MB more at a million, a 32nd is
under 2 MB; the merges, linear each, stay a fixed fraction apart, so all of them together
cost about 32 passes over the array's final size.

Membership of one key: the recent set, then a binary search of the array. numpy is
imported on the first merge only: a small crawl never loads it.

Invariants: a key is in exactly one of the two parts; the array is sorted, without repeats.
Pure data structure: no IO, no clocks.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable

_MERGE_MIN = 1 << 15


class SeenSet:
    """``key in s``, ``s.add(key)`` (``True`` if it was new), ``len(s)`` for signed 64-bit ints."""

    __slots__ = ("_recent", "_sorted")

    def __init__(self) -> None:
        self._sorted = array("q")
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, key: int) -> bool:
        if key in self._recent:
            return True
        found = self._sorted
        i = bisect.bisect_left(found, key)
        return i < len(found) and found[i] == key

    def add(self, key: int) -> bool:
        """Add ``key``; whether it was not there before."""
        if key in self:
            return False
        self._recent.add(key)
        if len(self._recent) >= max(_MERGE_MIN, len(self._sorted) >> 5):
            self._merge()
        return True

    def missing(self, keys: Iterable[int]) -> list[bool]:
        """For each key, whether it is absent."""
        recent, found, search = self._recent, self._sorted, bisect.bisect_left
        size = len(found)
        out = []
        for key in keys:
            if key in recent:
                out.append(False)
            else:
                i = search(found, key)
                out.append(i >= size or found[i] != key)
        return out

    def _merge(self) -> None:
        """The recent keys appended to the array, which is then sorted in place: two sorted
        runs, which timsort merges in linear time with a buffer of the shorter one. No copy
        of the array is made (a million keys is 8 MB; a merge that built a new array, through
        bytes, held three copies at once), and its growth is a ``realloc``."""
        import numpy as np

        self._sorted.extend(sorted(self._recent))
        self._recent = set()
        view = np.frombuffer(self._sorted, dtype=np.int64)  # the array's own memory
        view.sort(kind="stable")
        del view  # the array cannot grow while a view of it exists
