"""A page's links, visible text and head read from lexbor's tokens, with no tree
(``parsers/_scan.c``), for the pages whose tree would mirror their tokens.

Owns: whether the scan may run in this process (``scans``), the scan of a page's markup
(``scan``: ``None`` where the tree must be built) and the resolution of the hrefs it found
(``resolve``). ``parsers.html.parse_document`` reads a page this way first.

Why: lexbor's tree builder and the tree's nodes cost it about as much again as tokenizing
does (bench/RESULTS.md), and the C walk then reads the tree once more. The scan follows the tree
builder only where elements nest and close as written; anything else (an implied or
misnested end, a table with text in it, a template, a frameset, MathML...) makes it give up,
and the page is parsed into a tree as before. So a page's results never depend on which
way it was read: the tests hold the two equal on generated markup and on real pages.

Invariants: runs only where the C walk does (``tree_walk.native``: a checked selectolax, its
layout probed), with lexbor's tokenizer found in selectolax's module, and only if it reads
the probe pages exactly as the C walk reads their trees. ``CRAWL_NO_SCAN`` set (to
anything) turns it off.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import selectolax.lexbor
from selectolax.lexbor import LexborHTMLParser

from parsers import tree_walk
from parsers.links import Resolver
from parsers.tree_walk import ANCHOR_TEXT_BYTES, ANCHOR_TEXT_VISITS

NO_SCAN_ENV = "CRAWL_NO_SCAN"
"""Set (to anything) to build every page's tree, as before the scan."""


class Head(NamedTuple):
    """What ``parsers.html._head`` reads from the head: the first title (its words joined by
    one space), ``<base href>``, ``<meta name=robots>`` content and canonical href."""

    title: str
    base: str | None
    meta_robots: str
    canonical: str | None


class Scanned(NamedTuple):
    """A page as the scan read it: the head, ``<html lang>``, and what the C walk reads
    from a tree (hrefs as written, rels, the link elements' ``Anchors``, visible text)."""

    head: Head
    lang: str | None
    hrefs: list[str]
    rels: list[tuple[int, str]]
    anchors: Any
    text: str


def scan(markup: bytes | str, most: int) -> Scanned | None:
    """``markup`` (what ``LexborHTMLParser`` would be given) read without a tree, its first
    ``most`` hrefs; ``None`` where the tree must be built (or the scan does not run here)."""
    walk = _walk
    if walk is None:
        return None
    data = markup if isinstance(markup, bytes) else markup.encode("utf-8", "ignore")
    found = walk.scan(data, most, ANCHOR_TEXT_VISITS, ANCHOR_TEXT_BYTES)
    if found is None:
        return None
    hrefs, rels, anchors, text, (title, base, robots, canonical, lang) = found
    head = Head(
        " ".join(title.split()) if title is not None else "",
        (base.strip() or None) if base is not None else None,
        robots.strip() if robots is not None else "",
        (canonical.strip() or None) if canonical is not None else None,
    )
    return Scanned(head, (lang or "").strip() or None, hrefs, rels, anchors, text)


def resolve(
    resolver: Resolver,
    hrefs: list[str],
    resolve_all: Callable[[Resolver, list[str]], list[str | None]],
) -> list[str | None]:
    """The scan's hrefs resolved as the C walk resolves those it finds in a tree: in C
    (``parsers/_resolve.c``), ``resolver`` deciding those it hands back; all by
    ``resolve_all`` where the base is not a plain normalised URL."""
    origin = resolver.origin
    if origin is None or _walk is None:
        return resolve_all(resolver, hrefs)
    directory = resolver.directory
    context = f"{origin}{directory}{resolver.base}".encode("ascii")
    urls, fallbacks = _walk.resolve_hrefs(hrefs, context, len(origin), len(directory))
    for k in fallbacks:
        urls[k] = resolver.resolve(urls[k].strip())
    return urls  # type: ignore[no-any-return]


_PROBES = (
    b"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>T &amp; t</title>"
    b"<style>a{}</style><script>var a = '<a href=/no>';</script></head><body>"
    b"<div class=x><p>Some <b>bold</b> &eacute; text<a href='/a' REL='Nofollow x'>A <i>b</i>"
    b"<!-- c --></a><a href=''>e</a><a>n</a></p><area href='/r'>"
    b"<iframe src='/f' href='/no'>raw <b></iframe><pre>\nkept</pre>"
    b"<table><tbody><tr><td>cell <a href='/c'>c</a></td></tr></tbody></table>"
    b"<svg><path d='M0'/></svg><noscript><a href='/n'>n</a> o</noscript>"
    b"<ul><li>one<li-x>two</li-x></li></ul>\xc2\xa0 \xff</div></body></html>\n",
    b"plain <a href=/p>text</a> only",
)
"""Pages the scan must read, each as the C walk reads its tree: a head with each element,
raw text (a tag inside a script, an iframe's text), character references, nested
formatting, a comment in a link, empty and missing hrefs, a table, SVG, noscript's markup,
a newline after <pre>, invalid UTF-8 and non-ASCII space; then a page with no tags around."""


def _agrees(walk: ModuleType, probe: bytes) -> bool:
    found = walk.scan(probe, 1_000, ANCHOR_TEXT_VISITS, ANCHOR_TEXT_BYTES)
    if found is None:
        return False
    hrefs, rels, anchors, text, _ = found
    scanned = (hrefs, rels, [anchors.text(i) for i in range(len(anchors))], text)
    return scanned == tree_walk.walk_in_c(walk, LexborHTMLParser(probe), 1_000)


def _load() -> ModuleType | None:
    walk = tree_walk.native
    if walk is None or os.environ.get(NO_SCAN_ENV) or not hasattr(walk, "scan"):
        return None
    if not walk.bind_scan(selectolax.lexbor.__file__):
        return None
    return walk if all(_agrees(walk, probe) for probe in _PROBES) else None


_walk: ModuleType | None = _load()
scans = _walk is not None
"""Whether pages are read by the scan first in this process."""
