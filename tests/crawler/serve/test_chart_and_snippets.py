"""The pure parts of ``crawl serve``: rates from progress samples, the SVG chart, snippets."""

from __future__ import annotations

import re

from crawler.serve.chart import MAX_POINTS, bars, line_chart, rates
from crawler.serve.search import query_words, snippet


def sample(elapsed_s: float, done: int, failed: int = 0) -> dict[str, float]:
    return {"elapsed_s": elapsed_s, "done": done, "failed": failed}


def test_rates_are_per_second_between_samples() -> None:
    samples = [sample(0, 0), sample(2, 10, 1), sample(4, 30, 1), sample(6, 30, 5)]
    pages, errors = rates(samples)
    assert pages == [(0, 5.0), (2, 5.0), (2, 10.0), (4, 10.0), (4, 0.0), (6, 0.0)]
    assert errors == [(0, 0.5), (2, 0.5), (2, 0.0), (4, 0.0), (4, 2.0), (6, 2.0)]
    assert rates([sample(0, 0), sample(1.5, 3)])[0] == [(0, 2.0), (1.5, 2.0)]  # a short run
    assert rates([sample(0, 0)]) == ([], [])


def test_the_final_sample_taken_moments_after_the_last_joins_it_and_draws_no_spike() -> None:
    samples = [sample(2.0 * i, 10 * i) for i in range(10)] + [sample(18.05, 91)]
    pages, _ = rates(samples)
    assert pages[-1][0] == 18.05 and max(rate for _, rate in pages) < 6


def test_a_long_run_is_drawn_with_at_most_max_points() -> None:
    samples = [sample(2.0 * i, 3 * i) for i in range(50_000)]
    pages, errors = rates(samples)
    assert len(pages) <= 2 * (MAX_POINTS + 1) and len(errors) == len(pages)
    assert all(abs(rate - 1.5) < 1e-9 for _, rate in pages)


def test_the_chart_escapes_its_labels_and_scales_to_its_data() -> None:
    svg = line_chart('<script>"x"</script>', [("a<b", "pages", [(1.0, 3.0), (2.0, 7.0)])], "u")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a&lt;b" in svg
    (points,) = re.findall(r'points="([^"]+)"', svg)
    assert len(points.split()) == 2
    assert ">10<" in svg  # the y axis ends at a round number above 7
    assert "style=" not in svg  # the page's CSP forbids inline styles
    assert "none" in bars("t", []) and "&lt;b&gt;" in bars("t", [("<b>", 3)])


def test_a_snippet_marks_the_query_words_and_escapes_the_rest() -> None:
    text = "x " * 300 + "<b>Zebra</b> & quagga stripes; zebra again " + "y " * 300
    html = snippet(text, query_words("zebra QUAGGA"))
    assert html.startswith("…") and html.endswith("…")
    assert "&lt;b&gt;<mark>Zebra</mark>&lt;/b&gt; &amp; <mark>quagga</mark>" in html
    assert html.count("<mark>") == 3 and "<b>" not in html
    assert snippet("short text", {"absent"}) == "short text"


def test_a_megabyte_title_is_shown_cut() -> None:
    from crawler.serve.views import TITLE_CHARS, page_link, shown_title

    title = "<b>" + "t" * 1_000_000
    shown = shown_title(title)
    assert len(shown) == TITLE_CHARS + 1 and shown.endswith("…")
    assert shown_title("short") == "short" and shown_title(None) == ""
    assert "&lt;b&gt;" in page_link("http://a/", shown) and len(page_link("http://a/", shown)) < 400
