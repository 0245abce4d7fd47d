"""parsers.page_scan and parsers/_scan.c: a page read from lexbor's tokens, with no tree,
gives what the tree gives (links, rels, anchor text and its budgets, visible text, head,
lang), or gives up and the tree is built: on generated markup (misnested, implied, foreign,
tables, raw text, references, invalid UTF-8), on real pages, and on pages it must refuse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from parsers import html, page_scan, tree_walk
from parsers.page import Page, ParseJob
from tests.parsers.test_tree_walk import _BYTES, _PARTS, _markup

native = tree_walk.native


def test_the_scan_runs_under_ci() -> None:
    """CI builds the C walk: the scan must run there too (a probe that silently disagreed
    would leave every page on the tree)."""
    if not os.environ.get("CI"):
        pytest.skip("only CI promises a C compiler")
    assert page_scan.scans


needs_scan = pytest.mark.skipif(
    not page_scan.scans and not os.environ.get("CI"), reason="the scan does not run here"
)

_STRUCTURE = [
    "<!DOCTYPE html>", "<html lang=' fr '>", "<head>", "</head>", "<body>", "</body>", "</html>",
    "<title>T &amp; 1</title>", "<meta name=Robots content=' noindex, x '>", "<meta name=robots>",
    "<link rel='x Canonical' href=' /c '>", "<base href='/b/'>", "<base>", "<meta charset=utf-8>",
    "<table>", "<tbody>", "</tbody>", "<thead>", "<tr>", "</tr>", "<td>", "</td>", "<th>",
    "</th>", "</table>", "<caption>", "</caption>", "<colgroup><col>", "</colgroup>", "<ul>",
    "<li>", "</li>", "</ul>", "<ol>", "<dl>", "<dt>", "<dd>", "</dl>", "<div>", "</div>",
    "<pre>\n", "</pre>", "<span>", "</span>", "<h1>", "</h1>", "<h2>", "</h2>", "<form>",
    "</form>", "<button>", "</button>", "<option>", "</option>", "<br>", "</br>", "<img src=x>",
    "<hr>", "<em>", "</em>", "<i>", "</i>", "</b>", "<textarea>\nx</textarea>",
    "<script>a<b</script>", "<style>p{}</style>", "&lt;", "&notit;", "&#x41;", "&#0;",
    "<a href='/q?a=1&amp;b=2'>", "<a href=/z rel=' nofollow '>", "<iframe src=/i>",
    "</iframe>", "<path/>", "<g>", "</g>", "<circle r=1 />", "<!-- c -->", "\r\n", "x", " y ",
    "<nobr>", "<table><tr><td>", "<p><div>", "<listing>\n", "<x-widget a=b>", "</x-widget>",
    "<input type=hidden>", "<frameset>", "<plaintext>", "<select>", "</select>", "<math>",
    "<?pi x?>", "<!doctype html>", "<li-x>", "<section>", "</section>", "<li><p>",
]  # fmt: skip

_MARKUP = st.lists(st.sampled_from([*_PARTS, *_STRUCTURE, *_BYTES]), max_size=40).map(_markup)


_TEXT = st.sampled_from(
    [
        "x",
        " y ",
        "\r\n",
        "\n",
        "&amp;",
        "&eacute;",
        "&#x41;",
        "\u00e9t\u00e9",
        "\u00a0",
        " ",
        "word w",
        "<!-- c -->",
        "&lt;b&gt;",
        "kept",
    ]
)
_INLINE = [
    "span",
    "b",
    "i",
    "em",
    "code",
    "x-w",
    "a href=/a",
    "a href='/b?c=1&amp;d' rel=nofollow",
    "a href=''",
]
_BLOCK = ["div", "p", "section", "ul", "li", "dl", "dt", "dd", "h1", "h2", "pre", "form", "button",
          "blockquote", "noscript"]  # fmt: skip
_RAW = ["script", "style", "title", "textarea", "iframe src=/f", "template"]


def _element(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """An element around children, its end tag written or left out (the tree builder
    implies some: </p>, </li>, </td>...)."""

    def wrap(tag: str, inner: list[str], closed: bool) -> str:
        name = tag.split()[0]
        return f"<{tag}>{''.join(inner)}" + (f"</{name}>" if closed else "")

    def raw(tag: str, text: str) -> str:
        return f"<{tag}>{text}</{tag.split()[0]}>"

    def table(rows: list[list[str]], body: bool, closed: bool) -> str:
        cells = "".join(
            "<tr>" + "".join(f"<td>{c}" + ("</td>" if closed else "") for c in row)
            + ("</tr>" if closed else "") for row in rows
        )  # fmt: skip
        return "<table>" + (f"<tbody>{cells}</tbody>" if body else cells) + "</table>"

    return st.one_of(
        st.builds(wrap, st.sampled_from(_INLINE + _BLOCK), st.lists(children, max_size=4),
                  st.booleans()),
        st.builds(raw, st.sampled_from(_RAW), st.sampled_from(["a<b>c", "\nq", "</x> y", ""])),
        st.builds(table, st.lists(st.lists(children, max_size=3), max_size=3), st.booleans(),
                  st.booleans()),
        st.builds(lambda inner: f"<svg><g>{''.join(inner)}</g><path d=M0/></svg>",
                  st.lists(st.sampled_from(["<circle r=1/>", "t", "<text>s</text>"]),
                           max_size=3)),
    )  # fmt: skip


_TREE = st.recursive(_TEXT, _element, max_leaves=30)
_NESTED = st.builds(
    lambda head, body: (
        "<!DOCTYPE html><html lang=en><head>" + "".join(head) + "</head><body>" + body + "</body></html>"
    ).encode(),
    st.lists(st.sampled_from(["<title>T &amp; 1</title>", "<meta name=ROBOTS content=' none '>",
                              "<link rel='Canonical x' href=/c>", "<base href=/b/>",
                              "<script>if (a<b) {}</script>", "<style>p{}</style>", "\n"]),
             max_size=5),
    st.lists(_TREE, max_size=6).map("".join),
)  # fmt: skip
"""Documents that mostly nest as written, with the end tags HTML lets a page leave out."""


def _job(markup: bytes, url: str = "http://e.com/d/p.html", **fields: object) -> ParseJob:
    return ParseJob(url, url, 200, "text/html", None, markup, **fields)  # type: ignore[arg-type]


def _both(job: ParseJob, offered: dict[int, int] | None = None) -> tuple[Page, Page, bool]:
    """The page read with the scan (where it does not give up) and with the tree, and
    whether the scan read it."""
    scanned = page_scan.scan(html._markup(job), 4 * job.max_links) is not None
    with_scan = html.parse_document(job, None if offered is None else dict(offered),
                                    html.resolve_each)  # fmt: skip
    walk, page_scan._walk = page_scan._walk, None
    try:
        with_tree = html.parse_document(job, None if offered is None else dict(offered),
                                        html.resolve_each)  # fmt: skip
    finally:
        page_scan._walk = walk
    return with_scan, with_tree, scanned


def _same(a: Page, b: Page) -> None:
    assert a == b
    assert (a.text, a.title, a.links, a.nofollow_links, a.anchor_hits, a.lang, a.canonical) == (
        b.text, b.title, b.links, b.nofollow_links, b.anchor_hits, b.lang, b.canonical
    )  # fmt: skip


def _reading(markup: bytes, budget: int, text_bytes: int) -> object:
    """The C walk's reading of the tree: hrefs, rels, each anchor's text in order under
    the budgets, visible text."""
    assert native is not None
    tree = LexborHTMLParser(markup)
    root = tree.root
    assert root is not None
    hrefs, rels, anchors = native.links(root, 64, budget, text_bytes)
    return hrefs, rels, [anchors.text(i) for i in range(len(anchors))]


@needs_scan
@settings(max_examples=1500, deadline=None)
@given(_MARKUP, st.sampled_from(["", "a b", "kept x"]))
@example(b"<p>a<p>b</p><ul><li>c<li>d</ul></p><table><tr><td>e<td>f</table>", "")
@example(b"<table><td><b>x<td>y</table>z<a href=/a>w</a>", "w")
@example(b"<title>t</title><body>\r\nline\r\n<pre>\nq</pre>", "")
def test_the_scan_reads_what_the_tree_holds(markup: bytes, query: str) -> None:
    """Whatever the markup, a page the scan reads equals the page read from its tree,
    with and without a query (anchor text and its budgets)."""
    job = _job(markup, query_terms=tuple(query.split()))
    with_scan, with_tree, _ = _both(job, {} if query else None)
    _same(with_scan, with_tree)


@needs_scan
@settings(max_examples=1500, deadline=None)
@given(_NESTED, st.sampled_from(["", "x", "kept word"]))
def test_nested_documents_read_by_the_scan_equal_their_trees(markup: bytes, query: str) -> None:
    """Mostly well-formed pages (which the scan reads, most of them) with implied ends,
    tables with and without their implied parts, raw text and SVG."""
    job = _job(markup, query_terms=tuple(query.split()))
    with_scan, with_tree, _ = _both(job, {} if query else None)
    _same(with_scan, with_tree)


@needs_scan
@settings(max_examples=300, deadline=None)
@given(st.one_of(_MARKUP, _NESTED), st.integers(0, 12), st.integers(0, 30))
def test_anchor_budgets_are_spent_as_on_the_tree(
    markup: bytes, budget: int, text_bytes: int
) -> None:
    """Small budgets of node visits and bytes run out at the same link either way."""
    assert native is not None
    found = native.scan(markup, 64, budget, text_bytes)
    if found is None:
        return
    hrefs, rels, anchors, _, _ = found
    assert (hrefs, rels, [anchors.text(i) for i in range(len(anchors))]) == _reading(
        markup, budget, text_bytes
    )


_READ = [
    b"<!DOCTYPE html><html lang=en><head><title>T</title></head><body><p>a <a href=/x>x</a>"
    b"</p></body></html>",
    b"just text",
    b"<p>one<p>two<ul><li>a<li>b</ul><dl><dt>t<dd>d</dl>",
    b"<table><tr><td>a<td>b<tr><td>c</table><table><thead><tr><th>h</thead></table>",
    b"<div><p>x</div><pre>\nkeep</pre><svg viewBox='0 0 1 1'><path d=M0/></svg>",
    b"<textarea>\n&lt;b&gt;</textarea><iframe src=/f><b>raw</iframe><noscript>n</noscript>",
    b"<p>a</p></p><h1>h</h1><form><button>b</button></form><option>o</option>",
    b"<?xml version='1.0'?><p>x",  # a bogus comment, as the tree has it
    b"<p>a<template><a href=/t>t</a><script>'</template>'</script></template>b<a href=/x>x</a>",
    b"<head><noscript><link rel=canonical href=/c></noscript><template><title>x</title></template>"
    b"<title>T</title></head><svg><!-- c --><path/></svg>",
    # rustdoc's and mdBook's shapes: a noscript stylesheet, SVG icons kept in templates
    b"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><script defer src=m.js></script>"
    b"<noscript><link rel=stylesheet href=n.css></noscript></head><body><nav><a href=/i>i</a>"
    b"</nav><template id=fa-eye><span class=fa-svg><svg viewBox='0 0 5 5'><!--! icon -->"
    b"<path d='M0 0'/></svg></span></template><main><details><summary>s</summary><p>text"
    b"<wbr>more</p></details><rustdoc-search></rustdoc-search></main></body></html>",
]
_REFUSED = [
    b"<table>foster</table>",
    b"<table><div>foster</div></table>",
    b"<b>1<p>2</b>3</p>",
    b"<a href=/a>1<a href=/b>2</a>",
    b"<frameset><frame src=/f></frameset>",
    b"<math><mi>x</mi></math>",
    b"<svg><a href=/s>s</a></svg>",
    b"<svg><foreignObject><p>x</p></foreignObject></svg>",
    b"<svg><![CDATA[a>b]]></svg>x",
    b"<template><svg><style></template>x",
    b"<p>a\x00b</p>",
    b"<head><noscript><p>x</p></noscript></head>",
    b"<head><noscript>text</noscript></head>",
    b"<nobr>a<nobr>b",
    b"<select><option>a<option>b</select>",
    b"a</span>b",
    b"<p>x<table><tr><td>y</table>",
    b"<body><title>t</title><meta name=robots content=noindex></body><p>after</p>",
]


@needs_scan
@pytest.mark.parametrize("markup", _READ)
def test_the_scan_reads_documents_whose_tree_mirrors_them(markup: bytes) -> None:
    with_scan, with_tree, scanned = _both(_job(markup))
    assert scanned
    _same(with_scan, with_tree)


@needs_scan
@pytest.mark.parametrize("markup", _REFUSED)
def test_the_scan_gives_up_where_the_tree_is_not_its_tokens(markup: bytes) -> None:
    """Foster parenting, misnesting, templates, framesets, MathML, SVG's HTML, NUL, an
    ignored end tag (text around it joins), a table in a <p> (quirks keep it there)...:
    the page is read from its tree, the same as ever."""
    with_scan, with_tree, scanned = _both(_job(markup))
    assert not scanned
    _same(with_scan, with_tree)


def _corpus(root: Path, limit: int) -> list[Path]:
    return sorted(root.rglob("*.html"))[:limit] if root.is_dir() else []


_DOCS = Path("/usr/share/doc/python3.11/html")


@needs_scan
@pytest.mark.skipif(not _DOCS.is_dir(), reason="Debian's python3.11-doc is not installed")
def test_the_python_docs_are_read_by_the_scan_as_by_the_tree() -> None:
    """Sphinx's pages (tables, definition lists, <p> closed by a list, inline SVG): every
    one is read without a tree, and each equals its tree's page, with a query too."""
    files = _corpus(_DOCS, 120)
    for path in files:
        url = f"http://docs.test/{path.relative_to(_DOCS).as_posix()}"
        for query in ((), ("python", "loop")):
            with_scan, with_tree, scanned = _both(_job(path.read_bytes(), url,
                                                      query_terms=query), {})  # fmt: skip
            assert scanned, path
            _same(with_scan, with_tree)


@needs_scan
def test_a_long_run_of_made_up_names_replaces_the_tokenizer_and_reads_on() -> None:
    """The tokenizer keeps the names it meets; past its byte budget it is made anew, and
    the pages after read as before."""
    page = b"".join(b"<x-%d>t</x-%d>" % (i, i) for i in range(20_000)) + b"<a href=/a>a</a>"
    for _ in range(5):
        with_scan, with_tree, scanned = _both(_job(page))
        assert scanned
        _same(with_scan, with_tree)
