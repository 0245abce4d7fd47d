"""crawler.policy.traps: session-id stripping and trap detection (pure string functions).

Speed, measured with ``timeit`` on the development machine (Python 3.11, one core, shared
and noisy): ``strip_session_ids`` ~0.08 µs/URL without a query or ``;`` (most URLs), ~2 µs
with a query or a ``;jsessionid``; ``trap_reason`` ~0.8-1.2 µs/URL for 1-5 path segments.
Benchmark material, so not asserted here.
"""

from __future__ import annotations

import calendar
import random

import ada_url
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.policy.traps import (
    TemplateBudget,
    TrapLimits,
    strip_session_ids,
    trap_reason,
    url_template,
)
from parsers.links import normalize_url


@pytest.mark.parametrize(
    ("url", "stripped"),
    [
        ("http://e.com/", "http://e.com/"),
        ("http://e.com/?", "http://e.com/?"),  # nothing removed: kept byte for byte
        ("http://e.com/a?b=1&&c=2", "http://e.com/a?b=1&&c=2"),
        ("http://e.com/a;jsessionid=0A1B2C", "http://e.com/a"),
        ("http://e.com/a;JSESSIONID=0A1B2C?x=1", "http://e.com/a?x=1"),
        ("http://e.com/a;jsessionid=1/b;jsessionid=2", "http://e.com/a/b"),
        ("http://e.com/a;v=1;jsessionid=2;w=3", "http://e.com/a;v=1;w=3"),
        ("http://e.com/a?jsessionid=1", "http://e.com/a"),
        ("http://e.com/a?PHPSESSID=abc&id=7", "http://e.com/a?id=7"),
        ("http://e.com/a?id=7&phpsessid=abc", "http://e.com/a?id=7"),
        ("http://e.com/a?sessionid=1&session_id=2&sessid=3", "http://e.com/a"),
        ("http://e.com/a?ASPSESSIONIDQQGGQGPG=KJH&x=1", "http://e.com/a?x=1"),
        ("http://e.com/a?CFID=1&CFTOKEN=2&page=3", "http://e.com/a?page=3"),
        ("http://e.com/a?sid=0123456789abcdef0123&p=1", "http://e.com/a?p=1"),
        ("http://e.com/article.pl?sid=03/05/01/123", "http://e.com/article.pl?sid=03/05/01/123"),
        ("http://e.com/a?sid=12", "http://e.com/a?sid=12"),
        ("http://e.com/a?utm_source=x&utm_medium=y&id=1", "http://e.com/a?id=1"),
        ("http://e.com/a?gclid=1&fbclid=2&msclkid=3", "http://e.com/a"),
        ("http://e.com/a?session=1&sessionids=2", "http://e.com/a?session=1&sessionids=2"),
        ("http://e.com/a?x=jsessionid", "http://e.com/a?x=jsessionid"),
        ("http://e.com/a?jsessionid", "http://e.com/a"),
        ("http://u;jsessionid=1@e.com/", "http://u;jsessionid=1@e.com/"),  # not the path
        ("http://e.com/a?b#f?jsessionid=1", "http://e.com/a?b#f?jsessionid=1"),
        ("http://e.com/a?jsessionid=1#frag", "http://e.com/a#frag"),
    ],
)
def test_strip_session_ids(url: str, stripped: str) -> None:
    assert strip_session_ids(url) == stripped


def test_tracking_can_be_kept() -> None:
    url = "http://e.com/a?utm_source=x&jsessionid=1"
    assert strip_session_ids(url, strip_tracking=False) == "http://e.com/a?utm_source=x"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://e.com/", None),
        ("http://e.com", None),
        ("http://e.com/a/b/c/d", None),
        ("http://e.com/2024/01/01/post", None),  # "01" twice is fine
        ("http://e.com/a/b/a/b/a/b/", "repeated-segment"),
        ("http://e.com/x/x/x/", "repeated-segment"),
        ("http://e.com/x/y/x/z/x", "repeated-segment"),
        ("http://e.com/x//x//x?q=x/x/x", "repeated-segment"),
        ("http://e.com/a?q=/x/x/x/x", None),  # the query is not the path
        ("http://e.com/" + "/".join(f"s{i}" for i in range(20)), None),
        ("http://e.com/" + "/".join(f"s{i}" for i in range(21)), "too-many-segments"),
        ("http://e.com/" + "a" * 2030, None),
        ("http://e.com/" + "a" * 2040, "url-too-long"),
    ],
)
def test_trap_reason(url: str, reason: str | None) -> None:
    assert trap_reason(url) == reason


def test_trap_limits_are_configurable() -> None:
    strict = TrapLimits(max_url_chars=30, max_path_segments=3, max_segment_repeats=1)
    assert trap_reason("http://e.com/a/b/c/d", strict) == "too-many-segments"
    assert trap_reason("http://e.com/a/a", strict) == "repeated-segment"
    assert trap_reason("http://e.com/" + "x" * 30, strict) == "url-too-long"
    assert trap_reason("http://e.com/a/b/c", strict) is None


# -- properties -------------------------------------------------------------------------------

_NAMES = st.sampled_from(
    ["id", "q", "page", "sid", "SID", "jsessionid", "PHPSESSID", "utm_source", "ASPSESSIONIDX",
     "cfid", "gclid", "s", "", "a b", "%41", "é"]
)  # fmt: skip
_VALUES = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=12),
    st.just("0123456789abcdef0123"),
)
_PARAMS = st.lists(st.tuples(_NAMES, st.booleans(), _VALUES), max_size=6).map(
    lambda params: "&".join(n + ("=" + v if eq else "") for n, eq, v in params)
)
_SEGMENTS = st.lists(
    st.one_of(st.sampled_from(["a", "b", "x", ";jsessionid=1", "p;jsessionid=AB;v=1"]),
              st.text(st.characters(codec="utf-8"), max_size=8)),
    max_size=8,
)  # fmt: skip


@st.composite
def urls(draw: st.DrawFn) -> str:
    host = draw(st.sampled_from(["e.com", "127.0.0.1:8080", "[::1]", "xn--bcher-kva.de"]))
    path = "/".join(draw(_SEGMENTS))
    query = draw(_PARAMS)
    raw = f"{draw(st.sampled_from(['http', 'https']))}://{host}/{path}"
    return raw + (f"?{query}" if draw(st.booleans()) else "")


@given(urls())
def test_strip_is_idempotent_and_keeps_urls_valid(raw: str) -> None:
    once = strip_session_ids(raw)
    assert strip_session_ids(once) == once
    if ada_url.check_url(raw):
        assert ada_url.check_url(once)
        url = normalize_url(raw)
        stripped = strip_session_ids(url)
        assert normalize_url(stripped) == stripped  # a normalised URL stays normalised
        assert ";jsessionid=" not in stripped.lower().partition("?")[0]


@given(st.text(max_size=80))
def test_arbitrary_text_never_raises(text: str) -> None:
    once = strip_session_ids(text)
    assert strip_session_ids(once) == once
    assert trap_reason(text) in (None, "url-too-long", "too-many-segments", "repeated-segment")


@given(urls())
def test_trap_reason_is_stable_under_stripping_of_the_query(raw: str) -> None:
    """Session parameters live in the query, which trap_reason ignores except for length."""
    stripped = strip_session_ids(raw)
    if ";" not in raw and "#" not in raw:
        reason = trap_reason(raw)
        assert trap_reason(stripped) in (reason, None)


# -- URL templates and their budget ----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "template"),
    [
        ("http://e.com/cal/2026/01", "http://e.com/cal/N/N"),
        ("http://127.0.0.1:8080/p12.html", "http://127.0.0.1:8080/pN.html"),  # origin as is
        ("http://e.com/a/5f3e2a9c1d/x", "http://e.com/a/N/x"),  # a long hex run is a number
        ("http://e.com/cafe/x", "http://e.com/cafe/x"),  # a short one is a word
        ("http://e.com/s?b=2&a=1&b=3", "http://e.com/s?a&b"),  # names, sorted, values out
        ("http://e.com", "http://e.com"),
    ],
)
def test_url_template(url: str, template: str) -> None:
    assert url_template(url) == template


def record(budget: TemplateBudget, url: str, text: str, **page: object) -> str:
    """A page parsed and judged: ``parsing`` then ``page``; returns its template."""
    template = budget.parsing(url)
    budget.page(template, url, text, **page)  # type: ignore[arg-type]
    return template


def _calendar_text(year: int, month: int) -> str:
    return f"Events {year}-{month:02d} No events this month. prev next next year"


def test_a_template_of_pages_that_only_repeat_their_own_address_closes() -> None:
    budget = TemplateBudget(5)
    closed_at = None
    for i in range(40):
        year, month = 2026 + i // 12, i % 12 + 1
        url = f"http://e.com/cal/{year}/{month:02d}"
        template = record(budget, url, _calendar_text(year, month), simhash=i)
        if closed_at is None and budget.closed(template):
            closed_at = i
    assert closed_at == 6  # 1 productive page, then 6 repeats: more than 5, and than 1


def test_pages_that_say_new_things_keep_their_template_open() -> None:
    budget = TemplateBudget(5)
    for i in range(2000):
        text = f"Heading {i} about page {i}; see page {i * 7 % 2000} and page {i * 13 % 2000}"
        template = record(budget, f"http://e.com/p{i}.html", text)
        assert not budget.closed(template), i


def test_long_texts_are_compared_by_simhash() -> None:
    text = "word " * 300  # long: only the SimHash counts
    budget = TemplateBudget(2)
    rng = random.Random(3)
    for i in range(50):  # unrelated SimHashes: ~32 bits apart
        assert not budget.closed(record(budget, f"http://e.com/a/{i}", text,
                                             simhash=rng.getrandbits(64)))  # fmt: skip
    near = rng.getrandbits(64)
    for i in range(5):  # within SIMHASH_NEAR_BITS of each other: 1 new, then 4 repeats
        template = record(budget, f"http://e.com/b/{i}", text, simhash=near ^ (1 << i))
    assert budget.closed(template)


def test_duplicates_count_as_nothing() -> None:
    budget = TemplateBudget(3)
    for i in range(100):  # the same page reached another way, again and again
        template = record(budget, f"http://e.com/p1?ref={i}", "x", duplicate_of="http://e.com/p1")
    assert not budget.closed(template)
    assert not budget.closed("http://e.com/never/seen")


def test_numbers_beyond_int_limits_are_only_text() -> None:
    budget = TemplateBudget(1)
    long_number = "9" * 10_000  # int() of it would raise: compared as text
    template = record(budget, "http://e.com/n/1", f"big {long_number}")
    assert not budget.closed(template)


def test_pages_being_parsed_count_as_repeats_once_a_template_repeats_itself() -> None:
    """Fetched faster than parsed: once a template's repeats are many, its pages still in
    the parse count against it, so the pages fetched meanwhile do not carry the trap on."""
    budget = TemplateBudget(6)
    url = "http://e.com/cal/{}"
    for i in range(4):  # 1 productive, 3 repeats: not a likely trap yet (2 * 3 <= 6)
        record(budget, url.format(i), "the same")
    for i in range(4, 10):
        budget.parsing(url.format(i))  # six more in the parse
    assert not budget.closed("http://e.com/cal/N")  # 3 repeats: pending not counted yet
    record(budget, url.format(10), "the same")  # 4 repeats: a likely trap, 4 + 6 > 6
    assert budget.closed("http://e.com/cal/N")
    for _ in range(4, 10):
        budget.abandon("http://e.com/cal/N")
    assert not budget.closed("http://e.com/cal/N")  # 4 repeats, none pending: not yet


def test_a_calendar_that_names_its_months_closes_in_any_order() -> None:
    """Twelve month names, each page's own numbers out: after the twelve, every page is a
    repeat, whatever order the crawl parses them in (BFS over prev, next and next year
    mixes them; a period longer than the window of recent pages must not hide it)."""
    rng = random.Random(7)
    pages = [(year, month) for year in range(2000, 2100) for month in range(1, 13)]
    orders = {"cyclic": pages, "shuffled": rng.sample(pages, len(pages))}
    for name, order in orders.items():
        budget = TemplateBudget(10)
        closed_at = None
        for i, (year, month) in enumerate(order):
            url = f"http://e.com/cal/{year}/{month:02d}"
            text = f"Events of {calendar.month_name[month]} {year} No events this month."
            template = record(budget, url, text)
            if budget.closed(template):
                closed_at = i
                break
        assert closed_at is not None and closed_at <= 12 + 12, (name, closed_at)


def _strip_one_at_a_time(base: str) -> str:
    """The removal as the standard-shaped loop does it: the first ``;jsessionid=`` of the
    path (any case), up to the next ``;`` or ``/``, until none is left."""
    path_start = base.find("/", base.find("//") + 2) if "//" in base else 0
    if path_start < 0:
        return base
    while True:
        at = base.lower().find(";jsessionid=", path_start)
        if at < 0:
            return base
        end = at + len(";jsessionid=")
        while end < len(base) and base[end] not in ";/":
            end += 1
        base = base[:at] + base[end:]


@given(
    st.lists(
        st.sampled_from([";jsessionid=", ";JSESSIONID=", ";jsess", "ionid=", "x", ";", "/"]),
        max_size=12,
    ).map(lambda parts: "http://e.com/" + "".join(parts))
)
def test_one_pass_strips_what_repeated_removal_strips(url: str) -> None:
    assert strip_session_ids(url) == _strip_one_at_a_time(url)


@pytest.mark.timeout(10)
def test_many_path_sessions_strip_in_linear_time() -> None:
    """A link can carry a megabyte of ``;jsessionid=`` parameters, and it is stripped on the
    event loop before any length check: removing them one at a time was quadratic (6.6 s at
    520 KB); a non-ASCII path (``İ`` lengthens when lower-cased) looped forever."""
    url = "http://h/a" + ";jsessionid=x" * 80_000 + "/b"
    assert strip_session_ids(url) == "http://h/a/b"
    assert strip_session_ids("http://h/" + "İ" * 20 + ";jsessionid=x") == "http://h/" + "İ" * 20
