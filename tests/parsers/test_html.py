"""parsers.html: the parse worker's function, on real HTML bytes."""

from __future__ import annotations

import codecs
import hashlib
import json
import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from parsers.encodings import ASCII_COMPATIBLE
from parsers.html import (
    RankedMemo,
    _Head,
    _head,
    _links,
    choose_charset,
    content_hash,
    links_json,
    parse_batch,
    parse_document,
    parse_page,
    ranked_new_links,
    resolve_each,
    visible_text,
)
from parsers.page import Page, ParseFailure, ParseJob, same_content
from parsers.priority import REOFFER_MAX, REOFFER_MIN, page_relevance
from parsers.terms import query_token_ids as query_ids
from parsers.tree_walk import strip_invisible
from parsers.worker import text_terms


def job(body: bytes | str, url: str = "http://example.com/dir/page.html", **kw: object) -> ParseJob:
    data = body.encode() if isinstance(body, str) else body
    return ParseJob(url, url, 200, "text/html", kw.pop("charset", None), data, **kw)  # type: ignore[arg-type]


DOC = """<!doctype html><html lang="en-GB"><head><title>  A   title </title>
<meta name="Robots" content="NOARCHIVE"><link rel="canonical" href="/canon">
<script>var hidden = 1;</script><style>.x {color: red}</style></head>
<body><h1>Hello</h1><p>visible <b>text</b></p><noscript>no script</noscript>
<template><p>tmpl</p></template>
<a href="a.html#x">a</a> <a href="a.html">dup</a> <a href="../up.html">up</a>
<a href="mailto:x@y.z">mail</a> <area href="/area"> <iframe src="frame.html"></iframe>
<a href="https://other.org/ext">ext</a> <a>no href</a></body></html>"""


def test_fields() -> None:
    page = parse_page(job(DOC))
    assert isinstance(page, Page)
    assert page.title == "A title"
    assert page.lang == "en-GB"
    assert page.meta_robots == "NOARCHIVE"
    assert page.canonical == "http://example.com/canon"
    assert "visible text" in page.text and "Hello" in page.text
    for hidden in ("hidden", "color", "no script", "tmpl"):
        assert hidden not in page.text
    assert page.links == (
        "http://example.com/dir/a.html",
        "http://example.com/up.html",
        "http://example.com/area",
        "http://example.com/dir/frame.html",
        "https://other.org/ext",
    )
    assert not page.noindex and not page.nofollow
    assert page.content_hash == content_hash(DOC.encode())


def test_content_hash_and_the_hashes_of_older_versions() -> None:
    body = DOC.encode()
    digest = content_hash(body)
    assert digest.startswith("b3:") and len(digest) == 3 + 32
    assert digest == content_hash(bytes(body)) != content_hash(body + b" ")
    assert same_content(body, digest) and not same_content(body + b" ", digest)
    blake2b = hashlib.blake2b(body, digest_size=16).hexdigest()  # stored before BLAKE3
    assert same_content(body, blake2b) and not same_content(body[:-1], blake2b)


HEAD_SELECTOR = 'title, base[href], meta[name="robots" i], link[rel~="canonical" i]'
head_elements = st.lists(
    st.sampled_from([
        "<title>T one</title>", "<title> T  two </title>", '<base href="/b/">', "<base>",
        '<base href="">', '<meta name="robots" content="noindex">', '<meta name="ROBOTS" content=" A ">',
        '<meta name="robots">', '<meta name="robotsx" content="x">', '<meta content="y" name="Robots">',
        '<link rel="canonical" href="/c1">', '<link rel="alternate CANONICAL" href=" /c2 ">',
        '<link rel="canonical">', '<link rel="canonicalx" href="/c3">', '<link rel="canonical\xa0x" href="/c4">',
        '<link rel="x\tcanonical" href="/c5">', "<noscript><meta name=robots content=ns></noscript>",
        '<style>p{}</style>', '<meta charset="utf-8">', "<script>var t='<title>no</title>'</script>",
    ]),
    max_size=8,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(head_elements)
def test_head_walk_finds_what_the_selector_finds(elements: list[str]) -> None:
    tree = LexborHTMLParser(f"<html><head>{''.join(elements)}</head><body><p>x</p></body></html>")
    expected = _Head()
    seen: set[str] = set()
    for node in tree.head.css(HEAD_SELECTOR):  # the query _head's walk replaced
        if node.tag in seen:
            continue
        seen.add(node.tag)
        attributes = node.attributes
        if node.tag == "title":
            expected.title = " ".join(node.text().split())
        elif node.tag == "base":
            expected.base = (attributes.get("href") or "").strip() or None
        elif node.tag == "meta":
            expected.meta_robots = (attributes.get("content") or "").strip()
        else:
            expected.canonical = (attributes.get("href") or "").strip() or None
    assert _head(tree) == expected


def test_base_href() -> None:
    page = parse_page(
        job('<base href="http://cdn.example.com/b/"><a href="x">x</a><a href="/y">y</a>')
    )
    assert page.links == ("http://cdn.example.com/b/x", "http://cdn.example.com/y")


def test_meta_robots_and_x_robots_tag() -> None:
    page = parse_page(job('<meta name="robots" content="noindex, nofollow"><p>secret</p>'))
    assert page.noindex and page.nofollow and page.text == ""
    page = parse_page(job("<p>x</p>", x_robots_tag="none"))
    assert page.noindex and page.nofollow


def test_charsets() -> None:
    text = "日本語のテキスト"
    sjis = f'<html><head><meta charset="shift_jis"><title>{text}</title></head></html>'
    assert parse_page(job(sjis.encode("shift_jis"))).title == text
    assert parse_page(job(sjis.encode("shift_jis"), charset="Shift_JIS")).title == text
    utf16 = codecs.BOM_UTF16_LE + f"<title>{text}</title>".encode("utf-16-le")
    assert parse_page(job(utf16)).title == text
    latin = "<title>caf\xe9</title>".encode("latin-1")
    assert parse_page(job(latin, charset="iso-8859-1")).title == "café"
    assert choose_charset("no-such-charset", b"") == "utf-8"
    assert (
        choose_charset(
            None, b'<meta http-equiv="content-type" content="text/html; charset=koi8-r">'
        )
        == "koi8-r"
    )


@pytest.mark.parametrize(
    ("header", "body", "encoding"),
    [
        ("latin1", b"", "windows-1252"), ("US-ASCII", b"", "windows-1252"),
        ("  Shift_JIS ", b"", "shift_jis"), ("iso-2022-kr", b"", "replacement"),
        ("utf-16", b"", "utf-16le"), ("x-user-defined", b"", "x-user-defined"),
        ("punycode", b"", "utf-8"), ("rot13", b"", "utf-8"), ("utf-7", b"", "utf-8"),
        ("idna", b"", "utf-8"), ("zlib_codec", b"", "utf-8"), ("raw_unicode_escape", b"", "utf-8"),
        ("punycode", b'<meta charset="koi8-r">', "koi8-r"),
        (None, b'<meta charset="punycode"><meta charset=big5>', "big5"),
        (None, b'<meta charset="utf-16">', "utf-8"), (None, b'<meta charset="UTF-16BE">', "utf-8"),
        (None, b"<meta charset=x-user-defined>", "windows-1252"),
        (None, b"<meta charset=hz-gb-2312>", "replacement"),
        ("windows-1251", b"\xef\xbb\xbf<meta charset=big5>", "utf-8"),
        ("utf-8", b"\xfe\xff", "utf-16be"), ("utf-8", b"\xff\xfe", "utf-16le"),
    ],
)  # fmt: skip
def test_charset_is_sniffed_over_the_standards_labels(
    header: str | None, body: bytes, encoding: str
) -> None:
    """BOM, then the header's label, then the first ``<meta>`` with a label, then UTF-8; a
    name that is no label (however Python decodes it) is passed over as if absent; a
    ``<meta>`` says UTF-8 for UTF-16 and windows-1252 for x-user-defined."""
    assert choose_charset(header, body) == encoding


def test_a_codec_that_is_no_label_does_not_decode_the_page() -> None:
    """``punycode`` (quadratic), ``rot13``, ``utf-7``: the page is read as if the header said
    nothing (here UTF-8), not through them."""
    body = "<title>uryyb +AGEAYgBj- café</title>".encode()
    for charset in ("rot13", "utf-7", "punycode", "unicode_escape"):
        assert parse_page(job(body, charset=charset)).title == "uryyb +AGEAYgBj- café"
    hostile = b"<title>t</title>" + b"a" * 200_000 + b"-" + b"9" * 1000
    assert parse_page(job(hostile, charset="punycode")).title == "t"


def test_the_standards_decoders_read_the_page() -> None:
    assert parse_page(job(b"<title>\x80 caf\xe9</title>", charset="latin1")).title == "€ café"
    assert parse_page(job(b"<title>caf\xe9</title>", charset="x-user-defined")).title == "caf\uf7e9"
    page = parse_page(job(b"<title>t</title><a href=/a>a</a>", charset="iso-2022-kr"))
    assert (page.title, page.text, page.links) == ("", "\ufffd", ())
    utf16 = codecs.BOM_UTF16_BE + '<title>é</title><a href="/b">b</a>'.encode("utf-16-be")
    page = parse_page(job(utf16, charset="windows-1252"))
    assert (page.title, page.links) == ("é", ("http://example.com/b",))
    page = parse_page(job("<title>é</title>".encode("utf-16-le"), charset="utf-16le"))
    assert page.title == "é"


def test_a_utf8_bom_is_not_part_of_the_document() -> None:
    body = b'\xef\xbb\xbf<html><head><title>t</title><link rel=canonical href="/c"></head>'
    page = parse_page(job(body + b"<body>x</body></html>"))
    assert (page.title, page.canonical, page.text) == ("t", "http://example.com/c", "x")


def test_detection_gives_an_ascii_compatible_encoding() -> None:
    """Undeclared and not UTF-8: the detector's guess if the standard has it, never UTF-16
    (what browsers' detectors do), else windows-1252."""
    russian = ("<p>" + "Съешь же ещё этих мягких французских булок " * 20).encode("cp1251")
    assert choose_charset(None, russian, detect=True) == "windows-1251"
    binaryish = b"<a href=/a>a</a>" + b"\x00x" * 2000 + b"\xe9\xff"
    assert choose_charset(None, binaryish, detect=True) in ASCII_COMPATIBLE - {"utf-8"}


_NULS = b"\x00" * 100_000


@pytest.mark.parametrize(
    ("charset", "word"), [(None, "café".encode()), ("windows-1252", b"caf\xe9")]
)
def test_nul_bytes_are_parsed_as_a_browser_does(charset: str | None, word: bytes) -> None:
    """The text and links after NULs are kept: NUL is U+FFFD in a title or an attribute, and
    dropped from body text (the HTML standard's "in body" insertion mode ignores it)."""
    body = (
        b"<html><head><title>a\x00" + word + b"</title></head><body><a href=/a>a</a>"
        + _NULS + b"<p>after\x00" + _NULS + word + b'<a href="/b\x00">b</a>'
        + b"<textarea>t\x00</textarea></body></html>"
    )  # fmt: skip
    page = parse_page(job(body, charset=charset))
    assert page.title == "a\ufffdcafé"
    assert page.links == ("http://example.com/a", "http://example.com/b%EF%BF%BD")
    assert page.text == "a aftercafé b t\ufffd"
    (batched,) = parse_batch([job(body, charset=charset)])
    assert isinstance(batched, Page)
    assert json.loads(batched.links_json) == list(page.links)


_NUL_PARTS = ["\x00", "\x00", "<title>t", "</title>", "<p>x", "<a href='/a", "'>", "</a>", "<svg>",
              "<![CDATA[c", "]]>", "</svg>", "<!--c", "-->", "<textarea>", "</textarea>", "<script>",
              "</script>", "<table>", "<td>", "<select>", "<option>", "&#0;", "<plaintext>", "é",
              '<meta name="robots" content="', '<html lang="', '<link rel=canonical href="', '">']  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_NUL_PARTS), max_size=30).map("".join),
    st.sampled_from(["utf-8", "windows-1252"]),
)
def test_no_page_string_holds_a_nul(html: str, charset: str) -> None:
    """Wherever NULs are (text, attributes, raw text, foreign content, character
    references), no string of the ``Page`` holds U+0000 (which PostgreSQL's text cannot)."""
    page = parse_page(job(html.encode("utf-8" if charset == "utf-8" else "cp1252"),
                          charset=charset))  # fmt: skip
    for value in (page.title, page.text, page.meta_robots, page.canonical, page.lang,
                  page.links_json, *page.links):  # fmt: skip
        assert value is None or "\x00" not in value


def test_empty_and_broken_documents() -> None:
    for body in (b"", b"<", b"\x00\xff\xfe garbage", b"<html><body><a href='http://[bad'>x</a>"):
        page = parse_page(job(body))
        assert page.links == ()


def test_parse_batch_keeps_order_and_isolates_failures() -> None:
    results = parse_batch([job("<title>1</title>"), job("<title>2</title>")])
    assert [r.title for r in results if isinstance(r, Page)] == ["1", "2"]
    bad = ParseJob("http://e.com/", "http://e.com/", 200, "text/html", None, None)  # type: ignore[arg-type]
    results = parse_batch([bad, job("<title>ok</title>")])
    assert isinstance(results[0], ParseFailure) and results[0].url == "http://e.com/"
    assert isinstance(results[1], Page)


def test_parse_batch_sends_links_as_json_and_follow_only() -> None:
    html = '<a href="/a">a</a> <a href="/b" rel="nofollow">b</a> <a href="/a#x">again</a>'
    (page,) = parse_batch([job(html, url="http://e.com/p")])
    assert isinstance(page, Page)
    assert json.loads(page.links_json) == ["http://e.com/a", "http://e.com/b"]
    assert page.follow == ("http://e.com/a",)
    assert page.links == () and page.nofollow_links == ()  # not pickled back to the crawl
    assert page == pickle.loads(pickle.dumps(page))


_INVISIBLE_PARTS = ["<noscript>", "</noscript>", "<style>", "</style>", "<script>", "</script>",
                    "<template>", "</template>", "<p>", "</p>", "<div>", "</div>", "text ", "<b>",
                    "<svg><style>", "</svg>"]  # fmt: skip


@given(st.lists(st.sampled_from(_INVISIBLE_PARTS), max_size=30).map("".join))
def test_invisible_elements_removed_as_strip_tags_does(html: str) -> None:
    """One query, removed last to first (nested matches included), leaves the same text as
    selectolax's strip_tags, one query per tag."""
    ours, reference = LexborHTMLParser(html), LexborHTMLParser(html)
    strip_invisible(ours)
    reference.strip_tags(["script", "style", "noscript", "template"])

    assert visible_text(ours) == visible_text(reference)


_ANCHOR_WORDS = ["fast", "Python", "crawler", "pythonic", "crawlers", "slow", "FAST", "fast-python",
                 "über", "py thon", "3"]  # fmt: skip


def test_anchor_words_are_the_set_they_are_written_for() -> None:
    """``_WORDS`` is written as a complement (it compiles faster): the same characters as
    ``[a-z0-9\x80-\U0010ffff]``, every code point checked."""
    from parsers.anchor_hits import _WORDS

    reference = re.compile(r"[a-z0-9\x80-\U0010ffff]")
    for point in range(0x110000):
        char = chr(point)
        assert bool(_WORDS.fullmatch(char)) == bool(reference.fullmatch(char)), hex(point)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_ANCHOR_WORDS), max_size=6), min_size=1, max_size=8))
def test_anchor_hits_count_whole_query_words(anchors: list[list[str]]) -> None:
    """Per link, the most distinct query words in one of its anchors (whole words only)."""
    terms = frozenset({"fast", "python", "crawler"})
    body = "".join(f'<a href="/p{i % 3}">{" ".join(words)}</a>' for i, words in enumerate(anchors))
    tree = LexborHTMLParser(f"<body>{body}</body>")
    _, _, hits, _ = _links(tree, "http://e.com/", 100, terms)
    expected: dict[str, int] = {}
    for i, words in enumerate(anchors):
        found = set(re.findall(r"[a-z0-9\x80-\U0010ffff]+", " ".join(words).lower()))
        count = len(terms & found)
        url = f"http://e.com/p{i % 3}"
        if count > expected.get(url, 0):
            expected[url] = count
    assert hits == expected


_MIXED_PARTS = [*_INVISIBLE_PARTS, '<a href="/a">a</a>', '<a href="b">b</a>', '<area href="/c">',
                '<iframe src="/d"></iframe>', "<a href=/e>", "</a>", '<a href="/a#x">again</a>']  # fmt: skip


@given(st.lists(st.sampled_from(_MIXED_PARTS), max_size=30).map("".join))
def test_one_walk_finds_the_links_and_removes_what_the_separate_queries_do(html: str) -> None:
    """parse_page finds links and invisible elements in one pass: the same links (links
    inside noscript or template too) and the same text as a links query on the intact
    tree followed by the invisible elements' removal."""
    page = parse_page(job(f"<body>{html}</body>"))
    tree = LexborHTMLParser(f"<body>{html}</body>".encode())
    links, _, _, _ = _links(tree, "http://example.com/dir/page.html", 10_000)
    strip_invisible(tree)
    text = visible_text(tree)
    assert page.links == links
    assert page.text == text


def test_visible_text_has_one_space_between_text_nodes() -> None:
    """Text nodes are stripped and joined by one space: words in adjacent elements stay
    apart, and the line breaks between tags add no runs of spaces."""
    html = "<body>\n  <h1>Title</h1>\n\n  <p>one <b>two</b>three</p>\n"
    html += " <span>a</span><span>b</span>\n</body>"
    assert visible_text(LexborHTMLParser(html)) == "Title one two three a b"
    assert visible_text(LexborHTMLParser("<body> \n </body>")) == ""


def test_each_kind_of_element_gives_its_own_attribute() -> None:
    """Links come from ``href`` (a, area, an SVG ``a`` too) or ``src`` (frame, iframe); a
    script's ``src`` and an iframe's ``href`` are not links, nor a template's content (a
    fragment apart from the tree); whichever kind a worker meets first (the tag ids are
    learnt as met)."""
    base = "http://e.com/d/p.html"
    body = (
        '<script src="/s.js"></script><iframe src="/if" href="/not"></iframe>'
        '<a href="/a" src="/not">a</a><area href="/ar"><svg><a href="/svg"></a></svg>'
        "<noscript><a href='/ns'>x</a></noscript><template><a href='/t'></a></template>"
    )
    frames = '<frameset><frame src="/f1"><frame src="/f2"></frameset>'
    for html in (body, frames, body):
        links, _, _, _ = _links(LexborHTMLParser(html.encode()), base, 100, invisible=[])
        want = (
            ("http://e.com/f1", "http://e.com/f2")
            if "frameset" in html
            else tuple(f"http://e.com/{p}" for p in ("if", "a", "ar", "svg", "ns"))
        )
        assert links == want


_URL_TEXT = st.text(
    alphabet=st.sampled_from(list('htp:/.abc?=&%-_~"\\, \x00\x1f\x7fé\u2028')), max_size=12
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_URL_TEXT, max_size=6).map(tuple))
def test_links_json_is_json_dumps(links: tuple[str, ...]) -> None:
    """The joined fast path gives ``json.dumps``'s text exactly, and falls back to it for
    anything that needs escaping (quotes, backslashes, controls) or is not ASCII."""
    assert links_json(links) == json.dumps(links, ensure_ascii=False)
    assert json.loads(links_json(links)) == list(links)


_HEADS = [
    "",
    '<base href="http://cdn.e.com/b/">',
    '<base href="../x/">',
    '<meta name="robots" content="NOFOLLOW">',
    '<meta name="robots" content="noindex">',
]
_PREVIEW_PARTS = [*_MIXED_PARTS, '<a href="/n" rel="nofollow">n</a>', '<a href="../u?q=1">u</a>',
                  '<a href="  /sp  ">fast python</a>', '<a href="HTTP://E.com/%7ex">x</a>',
                  '<a href="//other.org/x">crawler</a>', '<a href="mailto:a@b">m</a>',
                  '<a href="http://[bad">bad</a>', '<a href="#top">top</a>', "<p>fast text</p>",
                  '<a href="/n" rel="NoFollow external">fast</a>', '<a href="é/ü">u</a>']  # fmt: skip


def _parsed_here(job: ParseJob, offered: dict[int, int] | None = None) -> Page:
    """What the crawl process makes of ``job`` while no worker is up: ``parse_document``
    without numba, and the terms a worker computes (``text_terms``)."""
    page = parse_document(job, offered, resolve=resolve_each)
    assert page.tokens == b"" and page.token_length == 0  # the terms are a worker's
    page.tokens, page.token_length, page.simhash, page.query_tf = text_terms(
        page.text, job.query_ids
    )
    return page


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(_PREVIEW_PARTS), max_size=30).map("".join),
    st.sampled_from(_HEADS),
    st.sampled_from(["", "noindex", "none"]),
    st.sampled_from([3, 10_000]),
    st.sampled_from([(), ("fast", "python", "crawler")]),
)
def test_a_page_parsed_without_numba_is_the_workers_page(
    html: str, head: str, x_robots: str, max_links: int, terms: tuple[str, ...]
) -> None:
    """Per-href ``Resolver.resolve`` instead of the numba kernel, the terms computed apart:
    the same ``Page`` (``<base href>``, meta and header robots, rel=nofollow, the link
    limit, whitespace around hrefs, anchor hits)."""
    body = f"<html><head>{head}</head><body>{html}</body></html>"
    ids = query_ids(" ".join(terms)) if terms else ()
    page_job = job(body, x_robots_tag=x_robots, max_links=max_links, query_terms=terms,
                   query_ids=ids)  # fmt: skip
    assert _parsed_here(page_job) == parse_page(page_job)


def test_pages_of_the_benchmark_site_parsed_without_numba(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Pages like the benchmark's (relative, absolute, ``../``, fragments, query duplicates,
    external links): the same ``Page`` both ways, on each of 60."""
    from bench.sitegen import generate

    base = "http://127.0.0.1:8/"
    generate(tmp_path, 60, base)
    pages = sorted(tmp_path.rglob("*.html"))
    assert len(pages) >= 60
    terms = ("site", "page", "the")
    for path in pages:
        url = base + path.relative_to(tmp_path).as_posix()
        page_job = job(path.read_bytes(), url=url, query_terms=terms,
                       query_ids=query_ids(" ".join(terms)))  # fmt: skip
        page = _parsed_here(page_job)
        assert page.links and page.tokens  # every page links somewhere and has text
        assert page == parse_page(page_job), url


def test_pages_parsed_here_offer_the_links_a_worker_offers(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With a query, the crawl process keeps a memo of the links its pages offered, as a
    worker does (``ranked_new_links``): over the same pages in the same order, the links to
    offer and their anchor hits are the worker's, page by page; a link offered before comes
    again only from a page whose relevance reaches ``REOFFER_MIN``, and at most
    ``REOFFER_MAX`` times; the anchors of links offered before are not read again."""
    import parsers.html
    from bench.sitegen import generate

    base = "http://127.0.0.1:8/"
    generate(tmp_path, 40, base)
    terms = ("site", "page", "the")
    jobs = [
        job(path.read_bytes(), url=base + path.relative_to(tmp_path).as_posix(),
            query_terms=terms, query_ids=query_ids(" ".join(terms)), depth=1)
        for path in sorted(tmp_path.rglob("*.html"))
    ]  # fmt: skip
    monkeypatch.setattr(parsers.html, "_ranked", RankedMemo())  # a fresh worker
    worker = parse_batch(jobs)
    memo = RankedMemo()
    seen: set[str] = set()
    again = skipped = 0
    for page_job, theirs in zip(jobs, worker, strict=True):
        assert isinstance(theirs, Page)
        ours = _parsed_here(page_job, memo.depth)
        everything = ours.followable
        follow = ranked_new_links(ours, page_job.depth + 1, memo)
        assert follow == theirs.follow, page_job.url
        assert ours.anchor_hits == theirs.anchor_hits, page_job.url
        relevance = page_relevance(ours.query_tf, ours.token_length)
        for url in everything:
            if url in seen and url in follow:
                again += 1
                assert memo.again[hash(url)] <= REOFFER_MAX
                assert relevance >= REOFFER_MIN  # a relevant page adds to its priority
            elif url not in seen:
                assert url in follow  # a new link is always offered
        seen.update(everything)
        every_hit = parse_document(page_job, None, resolve_each).anchor_hits or {}
        skipped += len(every_hit) - len(ours.anchor_hits or {})
    assert again > 0  # links found again on relevant pages add to their priority
    assert skipped > 0  # links seen before had their anchors read once only


@pytest.mark.parametrize("charset", [None, "windows-1252", "utf-16le"])
def test_anchor_hits_whatever_the_encoding_and_none_on_a_page_without_the_words(
    charset: str | None,
) -> None:
    """Anchors are read only on a page that names a query word somewhere (in its bytes, or
    its decoded text): the hits are the same as reading every anchor, in any encoding."""
    terms = ("nebula", "galaxy")
    on = '<meta charset="{c}"><p>café</p><a href="/n">The NEBULA</a><a href="/x">other</a>'
    off = '<meta charset="{c}"><p>café</p><a href="/n">The cloud</a><a href="/x">other</a>'
    for body, expected in ((on, {"http://example.com/n": 1}), (off, None)):
        text = body.format(c=charset or "utf-8")
        data = text.encode(charset or "utf-8")
        page = parse_page(job(data, charset=charset, query_terms=terms,
                              query_ids=query_ids(" ".join(terms))))  # fmt: skip
        assert page.anchor_hits == expected, (charset, body)


def test_only_a_bounded_number_of_hrefs_is_resolved() -> None:
    """With ``max_links=10`` the first 40 hrefs are resolved (``HREFS_PER_LINK``): the
    first 10 distinct links among them are kept, repeats included in the count, and the
    invisible elements after the last href looked at are still left out of the text."""
    repeats = "".join('<a href="/same">s</a>' for _ in range(20))
    unique = "".join(f'<a href="/u{k}">u</a>' for k in range(100))
    body = f"<body><p>seen</p>{repeats}{unique}<script>hidden()</script><style>p{{}}</style></body>"
    page = parse_page(job(body, max_links=10))
    assert page.links == (
        "http://example.com/same",
        *(f"http://example.com/u{k}" for k in range(9)),
    )
    assert "hidden" not in page.text and "seen" in page.text
    beyond = parse_page(job(repeats * 2 + unique, max_links=10))
    assert beyond.links == ("http://example.com/same",)  # 40 repeats: the bound is hrefs


def test_anchor_hits_only_for_the_links_kept() -> None:
    """Anchors nest in foreign content (``<svg><a><a>...``), and each one's text is its
    whole subtree: a link beyond ``max_links`` gets none read, nor a link that already
    holds every query word; the counts are those of the links kept."""
    nested = "<svg>" + '<a href="/same">' * 2000 + "python crawler</svg>"
    kept = '<a href="/k1">python</a><a href="/k2">crawler python</a><a href="/k3">python</a>'
    tree = LexborHTMLParser(f"<body>{kept}{nested}</body>")
    links, _, hits, _ = _links(tree, "http://e.com/", 3, frozenset({"python", "crawler"}))
    assert links == ("http://e.com/k1", "http://e.com/k2", "http://e.com/k3")
    assert hits == {"http://e.com/k1": 1, "http://e.com/k2": 2, "http://e.com/k3": 1}
    _, _, hits, _ = _links(
        LexborHTMLParser(nested), "http://e.com/", 10, frozenset({"python", "crawler"})
    )
    assert hits == {"http://e.com/same": 2}
