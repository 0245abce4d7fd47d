"""parsers.priority: a focused crawl's link priorities, free of the corpus's statistics."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from parsers.priority import (
    REFERENCE_LENGTH,
    anchor_relevance,
    link_evidence,
    page_relevance,
)

counts = st.lists(st.integers(0, 50), min_size=1, max_size=8)


@given(counts, st.integers(1, 100_000))
def test_relevance_is_a_share_in_0_1_and_0_without_query_words(tf: list[int], length: int) -> None:
    relevance = page_relevance(tf, length)
    assert 0.0 <= relevance < 1.0
    assert (relevance == 0.0) == (sum(tf) == 0)


@given(counts, st.integers(1, 10_000), st.integers(0, 7))
def test_more_of_a_query_word_or_a_shorter_page_is_more_relevant(
    tf: list[int], length: int, which: int
) -> None:
    more = list(tf)
    more[which % len(tf)] += 1
    assert page_relevance(more, length) > page_relevance(tf, length)
    if sum(tf):
        assert page_relevance(tf, length) > page_relevance(tf, length + 1)


def test_relevance_saturates_and_covers_the_query() -> None:
    """BM25's saturation: a page naming every query word twice beats one repeating a single
    word fifty times (a keyword-stuffed page does not win)."""
    spread = page_relevance([2, 2, 2, 2], REFERENCE_LENGTH)
    stuffed = page_relevance([50, 0, 0, 0], REFERENCE_LENGTH)
    assert spread > stuffed
    assert page_relevance([], 100) == 0.0 and page_relevance([3], 0) == 0.0


def test_anchor_evidence_counts_up_to_two_words_or_the_whole_query() -> None:
    assert anchor_relevance(0, 5) == 0.0
    assert anchor_relevance(1, 5) == 0.5
    assert anchor_relevance(2, 5) == anchor_relevance(4, 5) == 1.0
    assert anchor_relevance(1, 1) == 1.0  # a one-word query named in full
    assert link_evidence(0.25, 1, 4) == 0.25 + 0.5
    assert link_evidence(0.0, 0, 4) == 0.0
