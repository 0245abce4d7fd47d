"""A parse worker's memo of the links it offered the frontier: what a page's links add to
what the crawl process must look at (``new_links``; with a query, ``ranked_new_links``, which
offers a known link again where the page's evidence may raise its priority).

The memo holds ``hash()`` of each link (half the memory of the strings), is bounded (cleared
when full, which only costs the crawl process work), and is walked in C where the C walk
runs (``parsers/_walk.c``'s ``offer``), in Python else: the same loop, the same memos.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from parsers import tree_walk
from parsers.page import Page
from parsers.priority import REOFFER_MAX, REOFFER_MIN, page_relevance

_OFFERED_MAX = 30_000
"""Links a memo holds before it is cleared."""


def new_links(page: Page, depth: int, offered: dict[int, int]) -> tuple[str, ...]:
    """The followable links of ``page`` not in the memo ``offered`` at ``depth`` or less
    (see ``Page.follow``, and ``parsers.html._links`` for the memo), which now holds them.
    The memo is bounded: when full it is cleared, which only costs work."""
    if len(offered) >= _OFFERED_MAX:
        offered.clear()
    return _offer()(page.followable, depth, offered, None, 0)


@dataclass(slots=True)
class RankedMemo:
    """With a query, what a process offered the frontier: ``depth``, ``hash()`` of each link
    -> the smallest depth offered at (``parsers.html._links``' memo: their anchors are not
    read again); ``again``, -> the times offered again since. Bounded: cleared when full,
    which only costs work."""

    depth: dict[int, int] = field(default_factory=dict)
    again: dict[int, int] = field(default_factory=dict)


def ranked_new_links(page: Page, depth: int, memo: RankedMemo) -> tuple[str, ...]:
    """``new_links`` for a crawl with a query: also, from a page whose relevance reaches
    ``parsers.priority.REOFFER_MIN``, the links offered before, up to ``REOFFER_MAX`` times
    a link: the frontier adds the page's evidence to their priority. Their anchor text is
    not read again (``parsers.html._links`` with ``memo.depth``: reading every anchor cost a
    focused crawl 9 % of its speed), so their evidence is the page's relevance; the first
    offer's has the anchor's too."""
    offered, again = memo.depth, memo.again
    if len(offered) >= _OFFERED_MAX:
        offered.clear()
        again.clear()
    relevant = page_relevance(page.query_tf, page.token_length) >= REOFFER_MIN
    return _offer()(page.followable, depth, offered, again if relevant else None, REOFFER_MAX)


def python_offer(
    urls: tuple[str, ...],
    depth: int,
    offered: dict[int, int],
    again: dict[int, int] | None,
    most_again: int,
) -> tuple[str, ...]:
    """The links of ``urls`` to offer, the memos updated: one not in ``offered`` at ``depth``
    or less is recorded at ``depth``; else, with ``again`` (None: never), one offered again
    fewer than ``most_again`` times is offered once more. ``parsers/_walk.c``'s ``offer`` is
    the same loop in C."""
    fresh = []
    for url in urls:
        key = hash(url)
        previous = offered.get(key)
        if previous is None or depth < previous:
            offered[key] = depth
        elif again is None:
            continue
        else:
            times = again.get(key, 0)
            if times >= most_again:
                continue
            again[key] = times + 1
        fresh.append(url)
    return tuple(fresh)


def _offer() -> Callable[
    [tuple[str, ...], int, dict[int, int], dict[int, int] | None, int], tuple[str, ...]
]:
    """The loop in C where the C walk runs, else in Python."""
    walk = tree_walk.native
    return walk.offer if walk is not None else python_offer  # type: ignore[no-any-return]
