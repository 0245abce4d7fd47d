"""Query words in anchor text: for each link of a page, the most distinct words of a query
that one of its anchors holds (``parsers.priority.link_evidence`` turns them into the
link's priority in a focused crawl).

Owns: which anchors are read (not a link left out, nor one this worker offered at the
page's depth or less, nor one with every word found already) and, where the C walk
(``parsers._walk``) read the page, reading them in C, one call a text read
(``next_anchor``): the C walk's budgets of visits and bytes for anchor text are spent in
the same order either way. Pure CPU work, no IO.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

_WORDS = re.compile(r"[^\x00-/:-`{-\x7f]+")
"""Runs of ASCII lower-case letters and digits and of every non-ASCII character: the set
``[a-z0-9\x80-\U0010ffff]``, written as its complement, which ``re`` compiles in a fraction
of the time (the range to U+10FFFF is a charset of a million code points to compile at
every start of the crawl)."""


def anchor_hits(
    walk: ModuleType | None,
    anchors: Any,
    text_of: Callable[[int], str],
    urls: list[str | None],
    terms: frozenset[str],
    offered: dict[int, int] | None,
    depth: int,
    found: dict[str, None],
) -> dict[str, int]:
    """URL -> distinct words of ``terms`` (lower-case) in its best anchor, for the links
    of ``found`` whose anchor holds any: ``urls[i]`` is link i's URL (``None``: resolved to
    nothing), its text ``text_of(i)``, or ``anchors`` read by ``walk`` (the C walk, which
    found the links), else ``None``. ``offered``: ``hash(url)`` -> the smallest depth this
    worker offered it at; such a link at ``depth`` or less is not read again."""
    hits: dict[str, int] = {}
    any_term = _any_term(terms)
    needles = _ascii_needles(terms) if walk is not None else None
    for i, text in _texts(walk, anchors, text_of, needles, urls, offered, depth, found, hits,
                          len(terms)):  # fmt: skip
        text = text.lower()
        if any_term(text) is None:
            continue
        count = len(terms.intersection(_WORDS.findall(text)))
        url = urls[i]
        if url is not None and count > hits.get(url, 0):
            hits[url] = count
    return hits


def _texts(
    walk: ModuleType | None,
    anchors: Any,
    text_of: Callable[[int], str],
    needles: tuple[bytes, ...] | None,
    urls: list[str | None],
    offered: dict[int, int] | None,
    depth: int,
    found: dict[str, None],
    hits: dict[str, int],
    most_hits: int,
) -> Iterator[tuple[int, str]]:
    """(i, anchor text) of each link whose text is looked in, in order: not one left out
    (``found``), offered by this worker at ``depth`` or less, or holding every query word
    already (``hits``, which the caller adds to as it goes); nor, with ASCII ``needles``
    (the C walk's), one whose ASCII text holds none of them.

    An anchor's text is its whole subtree, and anchors can nest (<svg><a><a>...): none is
    read that the query cannot use, and the C walk's budgets are spent in this order. The
    C walk runs the whole loop (``next_anchor``: one call a text read, not Python steps for
    each of a page's links); the Python walk, this one."""
    if walk is not None:
        next_anchor, start = walk.next_anchor, 0
        while (got := next_anchor(anchors, urls, start, offered, depth, found, hits, most_hits,
                                  needles)) is not None:  # fmt: skip
            yield got
            start = got[0] + 1
        return
    for i, url in enumerate(urls):
        if url is None or (offered is not None and offered.get(hash(url), depth + 1) <= depth):
            continue
        if url not in found or hits.get(url, 0) == most_hits:
            continue
        yield i, text_of(i)


@functools.lru_cache(maxsize=8)
def _ascii_needles(terms: frozenset[str]) -> tuple[bytes, ...] | None:
    """The query words as ASCII bytes for the C walk's ``next_anchor`` (which screens out
    ASCII anchor text holding none of them), or ``None`` if any word is not ASCII."""
    if not all(term.isascii() for term in terms):
        return None
    return tuple(term.encode("ascii") for term in sorted(terms))


@functools.lru_cache(maxsize=8)
def _any_term(terms: frozenset[str]) -> Callable[[str], re.Match[str] | None]:
    """Search for any of ``terms`` as a substring. Most anchors hold none of the query words:
    this spares them the word split (a third of link extraction on a link-heavy page).
    Built once per query, not per page."""
    return re.compile("|".join(map(re.escape, sorted(terms))) or "(?!)").search
