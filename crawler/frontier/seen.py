"""SeenSet: a compact set of 64-bit URL hashes for the frontier's "seen before?" test.

``SeenSet`` is the C type of ``crawler/frontier/_seen.c`` where the install compiled it,
else ``PySeenSet``, this module's class: the same layout and steps (the tests hold the two
to the same answers). The C type is ~10x faster a key, and the crawl process asks for every
link of every page: bisect on an ``array('q')`` makes an int object of each key it compares.

A Python ``set`` of a million ints takes ~66 MB (an int object and a hash-table slot each).
Here the keys live in sorted ``array('q')`` runs of at most ``2 * LOAD`` keys (8 bytes a
key), in key order, with the largest key of each run in ``_maxes`` (the layout of
sortedcontainers' ``SortedList``, with machine ints in place of lists of objects). A million
keys take ~8.5 MB: the runs, their slack (an array grows by a sixteenth) and a pointer and
a max for every thousand or so keys.

Membership: a binary search of ``_maxes``, then of one run. An addition inserts into one
run (a ``memmove`` of a few KB at most) and splits a run that grows past ``2 * LOAD`` in
two. Every step is C, bounded whatever the keys (no skew, hostile or not, makes a run
longer than ``2 * LOAD``), and nothing needs numpy: the crawl process, which holds the set,
does not load it (~20 MB of PSS), as an earlier design that merged with a numpy sort did.

Invariants: the runs are non-empty (once one exists), sorted, without repeats, and every key
of a run is below every key of the next; ``_maxes[i] == _runs[i][-1]``; ``_size`` is the
sum of their lengths. Pure data structure: no IO, no clocks.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable

LOAD = 1024
"""A run splits in two of ``LOAD`` keys when it passes ``2 * LOAD`` (16 KB)."""


class PySeenSet:
    """``key in s``, ``s.add(key)`` (``True`` if it was new), ``s.missing(keys)``, ``len(s)``
    for signed 64-bit ints. ``load``: a run splits in two of ``load`` keys past twice it."""

    __slots__ = ("_load", "_maxes", "_runs", "_size")

    def __init__(self, load: int = LOAD) -> None:
        self._runs: list[array[int]] = []
        self._maxes = array("q")
        self._size = 0
        self._load = load

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: int) -> bool:
        maxes = self._maxes
        i = bisect.bisect_left(maxes, key)
        if i == len(maxes):
            return False
        run = self._runs[i]
        j = bisect.bisect_left(run, key)
        return run[j] == key  # j < len(run): run[-1] == maxes[i] >= key

    def add(self, key: int) -> bool:
        """Add ``key``; whether it was not there before."""
        maxes, runs = self._maxes, self._runs
        i = bisect.bisect_left(maxes, key)
        if i == len(maxes):  # above every key: the end of the last run
            if not runs:
                runs.append(array("q", (key,)))
                maxes.append(key)
                self._size = 1
                return True
            i -= 1
            run = runs[i]
            run.append(key)
            maxes[i] = key
        else:
            run = runs[i]
            j = bisect.bisect_left(run, key)
            if run[j] == key:
                return False
            run.insert(j, key)
        self._size += 1
        load = self._load
        if len(run) > 2 * load:
            runs.insert(i + 1, run[load:])
            del run[load:]
            maxes.insert(i, run[-1])
        return True

    def missing(self, keys: Iterable[int]) -> list[bool]:
        """For each key, whether it is absent."""
        maxes, runs, search = self._maxes, self._runs, bisect.bisect_left
        size = len(maxes)
        out = []
        for key in keys:
            i = search(maxes, key)
            if i == size:
                out.append(True)
            else:
                run = runs[i]
                out.append(run[search(run, key)] != key)
        return out


try:
    from crawler.frontier._seen import SeenSet
except ImportError:  # not compiled (no C compiler at install): the same set in Python
    SeenSet = PySeenSet  # type: ignore[assignment,misc]
