"""The C walk of a parsed page (parsers/_walk.c) against the Python walk it replaces: the same
hrefs, rels, anchor texts and visible text on generated markup (the HTML standard's odd
corners: capitals, foreign content, template content, invisible elements inside links,
invalid UTF-8, Unicode spaces) and on real pages; the same ``Page`` from ``parse_page``."""

from __future__ import annotations

import dataclasses
import gc
import glob
import os
from html import escape as html_escape
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from parsers import html, tree_walk
from parsers.links import Resolver, resolve_url
from parsers.offered import python_offer
from parsers.page import ParseJob
from parsers.tree_walk import walk_in_c, walk_in_python
from tests.parsers.test_links import _PAGE_HREFS, _RESOLVER_BASES, RESOLVE_FORMS

native = tree_walk.native
needs_c = pytest.mark.skipif(
    native is None and not os.environ.get("CI"), reason="parsers._walk is not built here"
)


def test_the_c_walk_runs_under_ci() -> None:
    """CI installs with a C compiler and the checked selectolax: the C walk must load there
    (a build that silently failed would leave the crawl on the slower Python walk)."""
    if not os.environ.get("CI"):
        pytest.skip("only CI promises a C compiler")
    assert native is not None


_PARTS = [
    "<a href='/a'>", "<A HREF='/b' REL='NoFollow me'>", "</a>", "<a href=''>", "<a href>",
    "<a rel=nofollow href=/c>", "<area href=/d>", "<iframe src=/e href=/no></iframe>",
    "<frame src=/f>", "<frameset>", "<script src=/no>", "</script>", "<style>", "</style>",
    "<noscript>", "</noscript>", "<template>", "</template>", "<svg>", "</svg>", "<math>",
    "</math>", "<a xlink:href='/x'>", "<use href='/u' xlink:href='/v'>", "<p>", "</p>", "<b>",
    "</b>", "<table>", "<tr><td>", "text ", "\u00a0", "\u3000x\u2003", "\x1c y ", " \n\t ",
    "caf\u00e9", "&amp;", "&#0;", "<!-- c -->", "<![CDATA[d]]>", "<title>", "</title>",
    "<textarea>", "</textarea>", "<a href='/\u00e9?q=\u00fc'>", "<base href='/b/'>",
    "<body>", "<html lang=en>", "<head>", "<option>", "<select>", "<xmp>", "<plaintext>",
]  # fmt: skip
_BYTES = [b"\xff", b"\xc3", b"\xe2\x82", b"\x00"]


def _markup(parts: list[str | bytes]) -> bytes:
    return b"".join(p if isinstance(p, bytes) else p.encode() for p in parts)


@needs_c
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*_PARTS, *_BYTES]), max_size=40).map(_markup))
def test_c_walk_finds_what_the_python_walk_finds(markup: bytes) -> None:
    assert native is not None
    ours = walk_in_c(native, LexborHTMLParser(markup), 1_000)
    assert ours == walk_in_python(LexborHTMLParser(markup), 1_000)


@needs_c
@given(st.lists(st.sampled_from(_PARTS), max_size=40).map("".join), st.integers(0, 6))
def test_c_walk_stops_at_most_hrefs_as_python_does(markup: str, most: int) -> None:
    assert native is not None
    ours = walk_in_c(native, LexborHTMLParser(markup), most)
    python = walk_in_python(LexborHTMLParser(markup), most)
    assert ours[:3] == python[:3] and len(ours[0]) <= most
    assert ours[3] == python[3]  # the text is the whole page's, whatever the bound


_CONTEXT = b"http://e.com/d/http://e.com/d/p.html"
"""``resolved_links``' context for the base http://e.com/d/p.html: origin, directory, URL."""


def _one_and_two_walks(markup: bytes, most: int, inner: bool = False) -> tuple[object, object]:
    """``resolved_links_text`` of a page, and what ``resolved_links`` and ``text`` give
    apart: the links walked from the document's element (``inner``: from its first child,
    the head where there is one: the body is then out of the walked tree, and its text is
    read after the walk), the text from the body."""
    assert native is not None
    tree = LexborHTMLParser(markup)
    root, below = tree.root, tree_walk.text_root(tree)
    assert root is not None and below is not None
    if inner and root.child is not None:
        root = root.child
    args = (most, tree_walk.ANCHOR_TEXT_VISITS, tree_walk.ANCHOR_TEXT_BYTES, _CONTEXT, 12, 3)
    urls, fallbacks, rels, anchors, text = native.resolved_links_text(root, below, *args)
    one = (urls, fallbacks, rels, [anchors.text(i) for i in range(len(anchors))], text)
    urls, fallbacks, rels, anchors = native.resolved_links(root, *args)
    texts = [anchors.text(i) for i in range(len(anchors))]
    return one, (urls, fallbacks, rels, texts, native.text(below))


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from([*_PARTS, *_BYTES]), max_size=40).map(_markup),
    st.integers(0, 6) | st.just(1_000),
    st.booleans(),
)
def test_links_and_text_in_one_walk_are_those_of_two(markup: bytes, most: int, inner: bool) -> None:
    """The one pass reads the text as ``text`` does (invisible subtrees skipped, the body
    only, the links' bound not stopping it) and the links as ``resolved_links``."""
    one, two = _one_and_two_walks(markup, most, inner)
    assert one == two


@needs_c
def test_links_and_text_in_one_walk_on_real_pages() -> None:
    pages = _real_pages()
    if not pages:
        pytest.skip("no HTML documentation installed here")
    for path in pages:
        one, two = _one_and_two_walks(path.read_bytes(), 40_000)
        assert one == two, path


@needs_c
def test_a_body_replaced_by_a_frameset_gives_no_text() -> None:
    """A ``<frameset>`` after body content that leaves frameset-ok set takes the body's
    place: the old body is out of the tree, and neither walk reads its style as text."""
    assert native is not None
    markup = b"<option><style>p{}</style><frameset><frame src=/f></frameset>"
    ours = walk_in_c(native, LexborHTMLParser(markup), 10)
    assert ours == walk_in_python(LexborHTMLParser(markup), 10) == (["/f"], [], [""], "")


def _real_pages() -> list[Path]:
    """Real pages of other shapes than the generated ones: the Python docs where installed
    (Debian's python3-doc), and this repository's own fixtures and served pages."""
    root = Path(__file__).resolve().parents[2]
    found = sorted(root.glob("tests/**/*.html")) + sorted(root.glob("examples/**/*.html"))
    for docs in sorted(glob.glob("/usr/share/doc/python3*/html"))[-1:]:
        found += sorted(Path(docs).glob("**/*.html"))[::7]
    return found


@needs_c
def test_c_walk_agrees_on_real_pages() -> None:
    pages = _real_pages()
    if not pages:
        pytest.skip("no HTML pages here")
    assert native is not None
    for path in pages:
        body = path.read_bytes()
        ours = walk_in_c(native, LexborHTMLParser(body), 40_000)
        assert ours == walk_in_python(LexborHTMLParser(body), 40_000), path


def _job(body: bytes, **kw: object) -> ParseJob:
    return ParseJob("http://e.com/d/p.html", "http://e.com/d/p.html", 200, "text/html", None,
                    body, **kw)  # type: ignore[arg-type]  # fmt: skip


@needs_c
@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([*_PARTS, *_BYTES]), max_size=40).map(_markup))
def test_parse_page_is_the_same_with_either_walk(markup: bytes) -> None:
    """With a query (anchor hits read) and without, the whole ``Page`` is equal."""
    assert native is not None
    # a non-ASCII word: anchors read as str; ASCII words only: screened in C (``text_if``)
    for kw in ({}, {"query_terms": ("text", "caf\u00e9", "x")}, {"query_terms": ("text", "x")}):
        ours = html.parse_page(_job(markup, **kw))
        try:
            tree_walk.native = None
            python = html.parse_page(_job(markup, **kw))
        finally:
            tree_walk.native = native
        assert dataclasses.asdict(ours) == dataclasses.asdict(python)


@needs_c
@pytest.mark.timeout(30)
def test_nested_anchor_text_is_bounded_by_the_visit_budget() -> None:
    """64,000 nested anchors would be 4 x 10^9 node visits for all their texts: the first
    are read whole while the page's budget lasts, the rest as empty."""
    assert native is not None
    depth = 64_000
    tree = LexborHTMLParser("<svg>" + "<a href='/n'>w" * depth + "</svg>")
    root = tree.root
    assert root is not None
    budget = tree_walk.ANCHOR_TEXT_VISITS
    hrefs, _, anchors = native.links(root, depth, budget, tree_walk.ANCHOR_TEXT_BYTES)
    assert len(hrefs) == len(anchors) == depth
    texts = [anchors.text(i) for i in range(depth)]
    assert texts[0] == "w" * depth and texts[1] == "w" * (depth - 1)
    assert texts[-1] == ""
    assert sum(map(len, texts)) <= budget  # a text node and an element a level


@pytest.mark.timeout(30)
def test_python_walk_bounds_nested_anchor_text_as_well() -> None:
    """Where the C walk cannot run, the same page costs the same bounded work: the texts
    past the budget read as empty (``tree_walk.AnchorTexts``)."""
    depth = 64_000
    tree = LexborHTMLParser("<svg>" + "<a href='/n'>w" * depth + "</svg>")
    hrefs, _, text_of = tree_walk.python_hrefs(tree, depth, None)
    assert len(hrefs) == depth
    texts = [text_of(i) for i in range(depth)]
    assert texts[0] == "w" * depth and texts[1] == "w" * (depth - 1)
    assert texts[-1] == ""
    assert sum(map(len, texts)) <= tree_walk.ANCHOR_TEXT_VISITS


@pytest.mark.timeout(60)
@pytest.mark.parametrize("c_walk", [True, False])
def test_nested_anchors_around_a_long_text_read_it_within_the_byte_budget(c_walk: bool) -> None:
    """1,400 anchors around one 9.5 MB text node are 1,400 visits but 13 GB of text: no
    text past the page's bytes is read, and the page with a query parses in bounded time."""
    if c_walk and native is None:
        pytest.skip("parsers._walk is not built here")
    depth, size = 1_400, 9_500_000
    markup = b"<svg>" + b"".join(b"<a href=/n%d>" % i for i in range(depth)) + b"x" * size
    if c_walk:
        assert native is not None
        tree = LexborHTMLParser(markup)
        assert tree.root is not None
        _, _, anchors = native.links(tree.root, depth, 1 << 20, tree_walk.ANCHOR_TEXT_BYTES)
        text_of = anchors.text
    else:
        _, _, text_of = tree_walk.python_hrefs(LexborHTMLParser(markup), depth, None)
    texts = [text_of(i) for i in range(depth)]
    assert texts[0] == "" and sum(map(len, texts)) == 0  # each would be the whole 9.5 MB
    job = _job(markup, query_terms=("needle",))
    walk = tree_walk.native
    try:
        tree_walk.native = walk if c_walk else None
        page = html.parse_page(job)
    finally:
        tree_walk.native = walk
    assert len(page.links) == depth and page.text == "x" * size


@needs_c
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(_PARTS), max_size=40).map("".join),
    st.integers(0, 40),
    st.integers(0, 60),
)
def test_both_walks_spend_the_anchor_text_budget_alike(
    markup: str, budget: int, text_bytes: int
) -> None:
    """Node for node and byte for byte: the same texts are read whole, and the same ones
    come back empty."""
    assert native is not None
    tree = LexborHTMLParser(markup)
    assert tree.root is not None
    hrefs, _, anchors = native.links(tree.root, 1_000, budget, text_bytes)
    ours = [anchors.text(i) for i in range(len(anchors))]
    theirs, _, text_of = tree_walk.python_hrefs(
        LexborHTMLParser(markup), 1_000, None, budget, text_bytes
    )
    assert theirs == hrefs
    assert [text_of(i) for i in range(len(hrefs))] == ours


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*_PARTS, "TEXT", "Te", "xT", "\u212a", "k"]), max_size=40).map(
        "".join
    ),
    st.integers(0, 40),
    st.integers(0, 60),
    st.lists(st.sampled_from(["text", "x", "te", "k", ""]), max_size=3).map(tuple),
)
@example("<a href=/a>text</a><a href=/b>x</a>", 1, 60, ("",))  # a spent budget: ""
def test_text_if_screens_out_exactly_the_ascii_texts_without_a_needle(
    markup: str, budget: int, text_bytes: int, words: tuple[str, ...]
) -> None:
    """``Anchors.text_if(i, needles)`` is ``None`` where ``text(i)`` is ASCII and holds no
    needle in any case (``""`` included: a spent budget), and ``text(i)`` otherwise, the
    Kelvin sign (which ``str.lower()`` folds to k) too; its budgets go as ``text``'s."""
    assert native is not None
    needles = tuple(word.encode() for word in words)
    tree = LexborHTMLParser(markup)
    assert tree.root is not None
    _, _, anchors = native.links(tree.root, 1_000, budget, text_bytes)
    texts = [anchors.text(i) for i in range(len(anchors))]
    _, _, screening = native.links(tree.root, 1_000, budget, text_bytes)
    for i, text in enumerate(texts):
        lower = text.lower()
        held = not text.isascii() or any(word in lower for word in words)
        assert screening.text_if(i, needles) == (text if held else None), (i, text)


def _reference_anchor_texts(
    anchors: object,
    urls: list[str | None],
    offered: dict[int, int] | None,
    depth: int,
    found: dict[str, None],
    hits: dict[str, int],
    most_hits: int,
    needles: tuple[bytes, ...] | None,
    add: dict[str, int],
) -> list[tuple[int, str]]:
    """The loop ``next_anchor`` replaced, step for step in Python, adding ``add[url]`` to
    ``hits`` after each text read (as ``_links`` adds what it counts)."""
    read = []
    for i, url in enumerate(urls):
        if url is None or (offered is not None and offered.get(hash(url), depth + 1) <= depth):
            continue
        if url not in found or hits.get(url, 0) == most_hits:
            continue
        text = anchors.text(i) if needles is None else anchors.text_if(i, needles)  # type: ignore[attr-defined]
        if text is None:
            continue
        read.append((i, text))
        hits[url] = max(hits.get(url, 0), add.get(url, 0))
    return read


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*_PARTS, "TEXT", "Te", "<a href='/a'>x te", "\u212a"]), max_size=40
    ).map("".join),
    st.integers(0, 40),
    st.integers(0, 60),
    st.one_of(st.none(), st.lists(st.sampled_from(["text", "x", "te", ""]), max_size=3).map(tuple)),
    st.data(),
)
def test_next_anchor_reads_what_the_python_loop_read(
    markup: str, budget: int, text_bytes: int, words: tuple[str, ...] | None, data: st.DataObject
) -> None:
    """``next_anchor`` skips the links the query loop skipped (resolved to nothing, offered
    at the depth or less, not kept, every word found already: read at each call, after
    what the caller added), reads the others' texts in the same order, and so spends the
    budgets of visits and bytes as that loop did."""
    assert native is not None
    tree = LexborHTMLParser(markup)
    assert tree.root is not None
    hrefs, _, _ = native.links(tree.root, 1_000, budget, text_bytes)
    urls: list[str | None] = [
        None if href.startswith("/e") else resolve_url("http://e.com/d/p.html", href)
        for href in hrefs
    ]
    distinct = sorted({url for url in urls if url is not None})
    kept = data.draw(st.sets(st.sampled_from(distinct)) if distinct else st.just(set()))
    found = dict.fromkeys(url for url in urls if url in kept)
    depth = data.draw(st.integers(0, 3))
    offered = data.draw(
        st.none()
        | st.dictionaries(st.sampled_from(distinct), st.integers(0, 4)).map(
            lambda d: {hash(url): at for url, at in d.items()}
        )
        if distinct
        else st.none()
    )
    most_hits = data.draw(st.integers(1, 3))
    add = data.draw(
        st.dictionaries(st.sampled_from(distinct), st.integers(0, 3)) if distinct else st.just({})
    )
    needles = None if words is None else tuple(word.encode() for word in words)
    _, _, theirs = native.links(tree.root, 1_000, budget, text_bytes)
    expected = _reference_anchor_texts(theirs, urls, offered, depth, found, {}, most_hits,
                                       needles, add)  # fmt: skip
    _, _, anchors = native.links(tree.root, 1_000, budget, text_bytes)
    hits: dict[str, int] = {}
    got, start = [], 0
    while (step := native.next_anchor(anchors, urls, start, offered, depth, found, hits,
                                      most_hits, needles)) is not None:  # fmt: skip
        got.append(step)
        url = urls[step[0]]
        assert url is not None
        hits[url] = max(hits.get(url, 0), add.get(url, 0))
        start = step[0] + 1
    assert got == expected


@needs_c
def test_next_anchor_skips_a_link_whose_words_were_all_found() -> None:
    """A link met again is read again only while its hits lack a query word; an offered
    one at the depth or less, or one not kept, is not read at all."""
    assert native is not None
    tree = LexborHTMLParser(
        "<a href=/a>one</a><a href=/a>two</a><a href=/b>three</a><a href=/c>four</a>"
        "<a href=/d>five</a>"
    )
    assert tree.root is not None
    _, _, anchors = native.links(tree.root, 10, 100, 100)
    a, b, c, d = (f"http://e.com/{name}" for name in "abcd")
    urls: list[str | None] = [a, a, b, c, d]
    found = dict.fromkeys([a, b, d])
    offered = {hash(d): 1}
    hits: dict[str, int] = {}
    assert native.next_anchor(anchors, urls, 0, offered, 1, found, hits, 1, None) == (0, "one")
    hits[a] = 1
    assert native.next_anchor(anchors, urls, 1, offered, 1, found, hits, 1, None) == (2, "three")
    assert native.next_anchor(anchors, urls, 3, offered, 1, found, hits, 1, None) is None
    assert native.next_anchor(anchors, urls, 3, offered, 0, found, hits, 1, None) == (4, "five")


@needs_c
def test_next_anchor_refuses_what_it_cannot_read() -> None:
    """Wrong types are a TypeError, not a crash."""
    assert native is not None
    tree = LexborHTMLParser("<a href=/a>a</a>")
    assert tree.root is not None
    _, _, anchors = native.links(tree.root, 10, 100, 100)
    good = [anchors, ["http://e.com/a"], 0, None, 1, {"http://e.com/a": None}, {}, 1, None]
    assert native.next_anchor(*good) == (0, "a")
    for at, bad in ((0, object()), (1, ("http://e.com/a",)), (3, []), (5, []), (6, None),
                    (8, (1,)), (8, [b"a"])):  # fmt: skip
        args = list(good)
        args[at] = bad
        with pytest.raises(TypeError):
            native.next_anchor(*args)
    with pytest.raises(TypeError):
        native.next_anchor(*good[:8])


_URL = st.sampled_from([f"http://e.com/{c}" for c in "abcdef"])


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(_URL, max_size=8).map(tuple), st.integers(0, 3),
                          st.booleans()), max_size=12),
       st.integers(0, 3))  # fmt: skip
def test_offer_is_the_python_loop(
    pages: list[tuple[tuple[str, ...], int, bool]], most_again: int
) -> None:
    """Page after page (repeats within one, several depths, relevant or not), the C loop
    offers what the Python loop offers and leaves the same memos."""
    assert native is not None
    memos: list[tuple[dict[int, int], dict[int, int]]] = [({}, {}), ({}, {})]
    for urls, depth, relevant in pages:
        got = [
            offer(urls, depth, offered, again if relevant else None, most_again)
            for offer, (offered, again) in zip((native.offer, python_offer), memos, strict=True)
        ]
        assert got[0] == got[1]
        assert memos[0] == memos[1]


@needs_c
def test_offer_takes_any_sequence_and_refuses_wrong_types() -> None:
    assert native is not None
    offered: dict[int, int] = {}
    assert native.offer(["http://e.com/a"] * 2, 1, offered, None, 0) == ("http://e.com/a",)
    assert offered == {hash("http://e.com/a"): 1}
    for bad in ((None, 1, {}, None, 0), ((), 1, [], None, 0), ((), 1, {}, [], 0),
                ((), "1", {}, None, 0), ((["unhashable"],), 1, {}, None, 0)):  # fmt: skip
        with pytest.raises(TypeError):
            native.offer(*bad)
    with pytest.raises(TypeError):
        native.offer((), 1, {}, None)
    bad_memo = {hash("http://e.com/a"): "one"}
    with pytest.raises(TypeError):
        native.offer(("http://e.com/a",), 1, bad_memo, None, 0)


@needs_c
def test_the_probes_meet_frames_and_template_content() -> None:
    """What ``_load`` compares includes a frameset's frame (a tag id no other probe page
    reaches) and template elements inside foreign content (in the tree, unlike HTML's)."""
    assert native is not None
    frames = walk_in_c(native, LexborHTMLParser(tree_walk._PROBES[1]), 10)
    assert frames[0] == ["/f"]
    foreign = walk_in_c(native, LexborHTMLParser(tree_walk._PROBES[2]), 10)
    assert foreign[2] == ["mhkv"] and foreign[3] == "m v"


@needs_c
def test_fragments_are_refused_by_the_c_walk() -> None:
    """selectolax reads a fragment's root through the nodes around it: the C walk, which
    reads one subtree, says no rather than miss the fragment's other top-level nodes."""
    assert native is not None
    fragment = LexborHTMLParser("<p>one</p><a href=/y>b</a>", is_fragment=True)
    assert fragment.root is not None
    with pytest.raises(ValueError, match="fragment"):
        native.links(fragment.root, 10, 10, 10)
    with pytest.raises(ValueError, match="fragment"):
        native.text(fragment.root)


@needs_c
def test_anchors_keep_the_tree_alive_by_its_parser() -> None:
    """The walk holds the parser itself, not the node's (writable) reference to it."""
    assert native is not None
    tree = LexborHTMLParser("<a href=/x>kept</a>")
    root = tree.root
    assert root is not None
    _, _, anchors = native.links(root, 10, 100, 100)
    root.parser = None  # type: ignore[assignment]  # a public attribute in selectolax
    del tree, root
    gc.collect()
    assert anchors.text(0) == "kept"


def test_a_tree_changed_by_the_extract_hook_is_walked_in_python() -> None:
    """An href set through selectolax on an svg element (stored unlike a parsed one) is a
    link, as the Python walk reads it."""

    def extract(tree: LexborHTMLParser, url: str) -> str:
        node = tree.css_first("a")
        assert node is not None
        node.attrs["href"] = "/new"
        return "done"

    html.set_extract(extract)
    try:
        page = html.parse_page(_job(b"<svg><a>x</a></svg>"))
    finally:
        html.set_extract(None)
    assert page.links == ("http://e.com/new",) and page.extract == '"done"'


@needs_c
def test_the_walk_refuses_what_is_not_a_lexbor_node() -> None:
    assert native is not None
    tree = LexborHTMLParser("<a href=/a>a</a>")
    with pytest.raises(TypeError):
        native.links(tree, 10, 10, 10)
    with pytest.raises(TypeError):
        native.text("<p>")
    with pytest.raises(ImportError):
        native.bind(dict)  # any other type would be read as a LexborNode
    _, _, anchors = native.links(tree.root, 10, 10, 10)
    with pytest.raises(IndexError):
        anchors.text(1)
    with pytest.raises(IndexError):
        anchors.text(-1)


def test_the_python_walk_serves_when_the_c_walk_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CRAWL_NO_C_WALK`` (or no module, another selectolax) leaves ``native`` unset, and
    pages parse the same way in Python."""
    monkeypatch.setenv(tree_walk.NO_C_WALK_ENV, "1")
    assert tree_walk._load() is None
    monkeypatch.setattr(tree_walk, "native", None)
    page = html.parse_page(_job(b"<a href=x rel=nofollow>x</a><script>s</script><p>t</p>"))
    assert page.links == ("http://e.com/d/x",) and page.nofollow_links == page.links
    assert page.text == "x t"


def _resolved_in_c(markup: bytes, base: str) -> tuple[list[str | None], list[str]]:
    """The C walk's URLs for ``markup``'s links against ``base`` (its fallbacks resolved as
    ``parsers.html._links`` resolves them), and the hrefs as ``links()`` reads them."""
    assert native is not None
    resolver = Resolver(base)
    assert resolver.origin is not None
    root = LexborHTMLParser(markup).root
    context = f"{resolver.origin}{resolver.directory}{base}".encode("ascii")
    urls, fallbacks, rels, _ = native.resolved_links(
        root, 1_000, 10_000, 100_000, context, len(resolver.origin), len(resolver.directory)
    )
    hrefs, plain_rels, _ = native.links(root, 1_000, 10_000, 100_000)
    assert rels == plain_rels
    for k in fallbacks:
        assert urls[k] == hrefs[k]  # handed back as the href itself
        urls[k] = resolver.resolve(urls[k].strip())
    return urls, hrefs


_PLAIN_BASES = [base for base in _RESOLVER_BASES if Resolver(base).origin is not None]


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(_PLAIN_BASES),
    _PAGE_HREFS,
    st.lists(st.sampled_from(["", "\xff", "\xc3", "\x00", "/" * 300 + "x"]), max_size=3),
)
def test_links_resolved_in_c_are_what_ada_makes_of_each_href(
    base: str, hrefs: list[str], odd: list[str]
) -> None:
    """``resolved_links`` gives, href for href, what ada gives for the stripped href, as
    ``Resolver.resolve`` would: spaces, newlines, fragments, non-ASCII characters and
    invalid UTF-8, other schemes and hosts, dot segments, ports, long hrefs."""
    tags = [f'<a href="{html_escape(h)}">x</a>'.encode() for h in hrefs]
    tags += [b'<a href="/' + o.encode("latin-1") + b'">o</a>' for o in odd]
    markup = b"<!doctype html><body>" + b"".join(tags)
    urls, found = _resolved_in_c(markup, base)
    assert urls == [resolve_url(base, h.strip()) for h in found]
    assert len(found) == len([h for h in hrefs if h]) + len(odd)  # an empty href is no link


@needs_c
@pytest.mark.parametrize(
    ("href", "expected"),
    [
        *[form for form in RESOLVE_FORMS if form[0]],  # an empty href is no link
        ("http://cdn.other.org:0080/", "http://cdn.other.org/"),
        ("http://cdn.other.org:123456/", None),
        ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/"),
        ("/a&amp;b", "http://example.com/a&b"),
    ],
)
def test_links_resolved_in_c_forms(href: str, expected: str | None) -> None:
    base = "http://example.com/a/b/c.html"
    markup = f"<a href='x'></a><a href='{href}'></a><a href='/y'></a>".encode()
    urls, _ = _resolved_in_c(markup, base)
    assert urls == ["http://example.com/a/b/x", expected, "http://example.com/y"]
