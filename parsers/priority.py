"""Link priority for a focused crawl (``--query``): which queued URL is worth fetching first.

Pure and corpus-free: a link's priority depends only on the pages that link to it and the
links' own anchor text, never on the statistics of the pages crawled so far. A BM25 score
does depend on them: its IDF falls as a focused crawl fills its corpus with on-topic pages
(a query word in 90 % of the pages has an IDF near 0), so the links of late on-topic pages
ranked below the off-topic links of early ones, and the crawl lost its focus. A number the
crawl computes once per link and compares with numbers computed an hour later must not drift.

- ``page_relevance``: BM25's term saturation and length normalisation without the IDF,
  against a fixed reference length, averaged over the query's words: in [0, 1), and 0 for a
  page without any query word. Every query word counts alike (no corpus to weigh them by).
- ``link_evidence``: what one link tells of its target: the linking page's relevance plus
  the anchor's (the share of the query's words in the anchor text, up to ``ANCHOR_WORDS``),
  the link context of Chakrabarti's focused crawler and of Shark-search.
- A queued URL's priority is the sum of the evidence of every fetched page that links to it
  (a relevance-weighted backlink count, after Cho, Garcia-Molina and Page's ordering by
  backlinks): an on-topic page is linked from many on-topic pages, an off-topic page that
  one on-topic page happens to link to is not. On bench/focus_sim.py's sites the sum
  collects 297-299 on-topic pages of 300 where the best single link collects 235-247.
  A share of the linking page's own priority (Shark-search's inheritance) was tried and
  left out: on a site whose topic lies behind off-topic pages, off-topic pages that link to
  each other fed each other's priority and the crawl never left them.

The parse workers (which decide whether a link already offered is worth offering again:
``REOFFER_MIN``, ``REOFFER_MAX``) and the crawl process (which queues it) compute the same
numbers from the same inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

K1 = 1.2
B = 0.75
REFERENCE_LENGTH = 400
"""Tokens of a typical page: the length BM25 would divide by, fixed instead of the corpus's
average (which moves as the crawl goes)."""
ANCHOR_WORDS = 2
"""An anchor naming this many of the query's words (or all of a shorter query) counts fully."""
ANCHOR_WEIGHT = 1.0
PAGE_WEIGHT = 1.0
REOFFER_MIN = 0.1
"""A link found again adds to its priority only from a page at least this relevant; its
evidence is then the page's relevance (its anchor text is read once, when the link is new:
reading every anchor cost a focused crawl 9 % of its speed, and bench/focus_sim.py's sites
collect the same without it). The links of off-topic pages, most of a crawl's, are offered
once, as without a query."""
REOFFER_MAX = 5
"""A parse worker offers one link again at most this many times (a menu's links, on every
page, are not offered again on each). On bench/focus_sim.py's sites 5 collect what an
unbounded sum does (3 lose 0-4 pages of 300)."""


def page_relevance(query_tf: Sequence[int], length: int) -> float:
    """How much a page of ``length`` tokens is about the query whose words occur
    ``query_tf[i]`` times in it: in [0, 1), the same for the same counts in any crawl."""
    if length <= 0 or not query_tf:
        return 0.0
    norm = K1 * (1.0 - B + B * length / REFERENCE_LENGTH)
    total = 0.0
    for tf in query_tf:
        if tf > 0:
            total += tf / (tf + norm)
    return total / len(query_tf)


def anchor_relevance(hits: int, query_words: int) -> float:
    """The share of the query named by an anchor holding ``hits`` distinct query words."""
    if hits <= 0 or query_words <= 0:
        return 0.0
    return min(1.0, hits / min(ANCHOR_WORDS, query_words))


def link_evidence(relevance: float, hits: int, query_words: int) -> float:
    """What a link with ``hits`` query words in its anchor text, out of a page of
    ``relevance`` (``page_relevance``), adds to its target's priority."""
    return PAGE_WEIGHT * relevance + ANCHOR_WEIGHT * anchor_relevance(hits, query_words)
