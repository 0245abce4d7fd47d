"""A parse worker's memo of the links it offered the frontier: what a page's links add to
what the crawl process must look at (``new_links``; with a query, ``ranked_new_links``, which
offers a known link again where the page's evidence may raise its priority).

The memo holds ``hash()`` of each link (half the memory of the strings), is bounded (cleared
when full, which only costs the crawl process work), and is walked in C where the C walk
runs (``parsers/_walk.c``'s ``offer``), in Python else: the same loop, the same memos.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parsers import tree_walk
from parsers.page import Page
from parsers.priority import REOFFER_MAX, REOFFER_MIN, page_relevance

_OFFERED_MAX = 30_000
"""Links a memo holds before it is cleared."""


def new_links(page: Page, depth: int, offered: dict[int, int]) -> tuple[str, ...]:
    """The followable links of ``page`` not in the memo ``offered`` at ``depth`` or less
    (see ``Page.follow``, and ``parsers.html._links`` for the memo), which now holds them. The memo is
    bounded: when full it is cleared, which only costs work."""
    if len(offered) >= _OFFERED_MAX:
        offered.clear()
    walk = tree_walk.native
    if walk is not None:
        return walk.offer(page.followable, depth, offered, None, 0)  # type: ignore[no-any-return]
    fresh = []
    for url in page.followable:
        key = hash(url)
        previous = offered.get(key)
        if previous is None or depth < previous:
            offered[key] = depth
            fresh.append(url)
    return tuple(fresh)


@dataclass(slots=True)
class RankedMemo:
    """With a query, what a process offered the frontier: ``depth``, ``hash()`` of each link
    -> the smallest depth offered at (``parsers.html._links``' memo: their anchors are not read again);
    ``again``, -> the times offered again since. Bounded: cleared when full, which only costs
    work."""

    depth: dict[int, int] = field(default_factory=dict)
    again: dict[int, int] = field(default_factory=dict)


def ranked_new_links(page: Page, depth: int, memo: RankedMemo) -> tuple[str, ...]:
    """``new_links`` for a crawl with a query: also, from a page whose relevance reaches
    ``parsers.priority.REOFFER_MIN``, the links offered before, up to ``REOFFER_MAX`` times
    a link: the frontier adds the page's evidence to their priority. Their anchor text is
    not read again (``parsers.html._links`` with ``memo.depth``: reading every anchor cost a focused
    crawl 9 % of its speed), so their evidence is the page's relevance; the first offer's
    has the anchor's too."""
    offered, again = memo.depth, memo.again
    if len(offered) >= _OFFERED_MAX:
        offered.clear()
        again.clear()
    relevant = page_relevance(page.query_tf, page.token_length) >= REOFFER_MIN
    walk = tree_walk.native
    if walk is not None:  # the same loop in C
        return walk.offer(  # type: ignore[no-any-return]
            page.followable, depth, offered, again if relevant else None, REOFFER_MAX
        )
    fresh = []
    for url in page.followable:
        key = hash(url)
        previous = offered.get(key)
        if previous is None or depth < previous:
            offered[key] = depth
        elif not relevant:
            continue
        else:
            times = again.get(key, 0)
            if times >= REOFFER_MAX:
                continue
            again[key] = times + 1
        fresh.append(url)
    return tuple(fresh)
