"""HTML parsing in worker processes: bytes in, a plain ``Page`` out (selectolax / lexbor).

Owns: the charset decision (the HTML standard's encoding sniffing over the Encoding Standard's
labels, ``parsers.encodings``), title, visible text (no script/style/noscript/template), outlinks
(resolved against ``<base href>`` or the final URL), meta robots, canonical and ``<html lang>``.

Invariants: pure CPU work, no IO; never returns parser nodes; importable without the engine,
and without numba (imported where the kernels run: ``parse_document`` with ``resolve_each``
needs none, for the crawl process's first pages while its workers start). Only the Encoding
Standard's encodings decode a body, each in linear time (no ``punycode`` or ``utf-7`` because a
page says so). NUL bytes are left to lexbor, which treats them as the HTML standard's tokenizer
and tree builder do (dropped from body text, U+FFFD in titles, attributes, comments and raw
text), so that the text and links after them are kept and no ``Page`` string holds a U+0000.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from selectolax.lexbor import LexborHTMLParser, LexborNode

from parsers import page_scan, tree_walk
from parsers.anchor_hits import anchor_hits
from parsers.encodings import ASCII_COMPATIBLE, bom_encoding, decode, from_python, get_encoding
from parsers.links import Resolver, resolve_url
from parsers.offered import RankedMemo, new_links, ranked_new_links
from parsers.page import Page, ParseFailure, ParseJob, content_hash
from parsers.tree_walk import (
    ANCHOR_TEXT_BYTES,
    ANCHOR_TEXT_VISITS,
    python_hrefs,
    remove,
    visible_text,
)

HREFS_PER_LINK = 4
"""A page's first ``HREFS_PER_LINK * max_links`` hrefs are resolved, for its first
``max_links`` distinct links: every href resolved is a URL as long as the base, and a page
of 10 MB can hold 700,000 hrefs (gigabytes of URLs against a base of a few thousand
characters)."""

_ASCII_SPACE = re.compile("[ \t\n\f\r]")
"""What separates the tokens of an attribute like ``rel`` (HTML's ASCII whitespace)."""

_JSON_ESCAPED = bytes(range(0x20)) + b"\\"
"""What ``json.dumps(..., ensure_ascii=False)`` escapes in an ASCII string, but for ``"``."""

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_META_BYTES = 2048
_FROM_META = {"utf-16be": "utf-8", "utf-16le": "utf-8", "x-user-defined": "windows-1252"}
"""What the HTML standard's prescan turns a ``<meta>``-declared encoding into (a page whose
``<meta>`` could be read as ASCII bytes is not UTF-16)."""


def choose_charset(header_charset: str | None, body: bytes, *, detect: bool = False) -> str:
    """The encoding to decode ``body`` with, as the HTML standard's encoding sniffing decides:
    a BOM; else the HTTP header's charset if it is a label of the Encoding Standard; else the
    first ``<meta>`` in the first 2048 bytes with such a label (``_FROM_META``); else UTF-8
    (or, with ``detect``, detection: UTF-8 if valid, else charset-normalizer's guess when
    the standard has it and it is ASCII-compatible, else windows-1252).

    An unknown label (``punycode``, ``rot13``, a typo) is skipped as if absent. Returns the
    encoding's name (lower case, a key of ``parsers.encodings.ENCODINGS``: ``"utf-8"``,
    ``"windows-1252"`` for ``latin1`` or ``us-ascii``, ``"shift_jis"``...), for
    ``parsers.encodings.decode``, not ``bytes.decode``: ``"x-user-defined"`` and
    ``"replacement"`` are no Python codec, and Python's ``"shift_jis"`` is not the standard's.
    """
    encoding = bom_encoding(body) or get_encoding(header_charset) or _meta_charset(body)
    if encoding is not None:
        return encoding
    return _detect(body) if detect else "utf-8"


def _meta_charset(body: bytes) -> str | None:
    for match in _META_CHARSET.finditer(body, 0, _META_BYTES):
        encoding = get_encoding(match.group(1).decode("ascii"))
        if encoding is not None:
            return _FROM_META.get(encoding, encoding)
    return None


def links_json(links: tuple[str, ...]) -> str:
    """``json.dumps(links, ensure_ascii=False)``, joined directly where no URL holds a
    character JSON escapes (a normalised URL never does: ada percent-encodes quotes, controls
    and spaces, and turns backslashes into slashes): a few times faster for a page's links."""
    if not links:
        return "[]"
    joined = '", "'.join(links)
    if joined.isascii() and joined.count('"') == 2 * len(links) - 2:
        raw = joined.encode("ascii")
        if len(raw.translate(None, _JSON_ESCAPED)) == len(raw):
            return f'["{joined}"]'
    return json.dumps(links, ensure_ascii=False)


def _robots_flags(*directives: str) -> tuple[bool, bool]:
    words = {w.strip() for d in directives for w in d.lower().split(",")}
    none = "none" in words
    return none or "noindex" in words, none or "nofollow" in words


def _document(job: ParseJob) -> LexborHTMLParser:
    """The body parsed (``_markup``)."""
    return LexborHTMLParser(_markup(job))


def _markup(job: ParseJob) -> bytes | str:
    """What lexbor is given: the body as bytes where lexbor reads them as the chosen encoding
    would (UTF-8, less its BOM; or only ASCII, in an encoding that is ASCII there), else
    decoded first."""
    body = job.body
    encoding = choose_charset(job.charset, body, detect=True)
    if encoding == "utf-8":
        return body[3:] if body.startswith(codecs.BOM_UTF8) else body
    if encoding in ASCII_COMPATIBLE and body.isascii():
        return body
    return decode(body, encoding)


def _detect(body: bytes) -> str:
    """Nothing declared the encoding: UTF-8 if the body is valid UTF-8, else a detector's guess,
    if it is one of the Encoding Standard's ASCII-compatible encodings (as browsers' detectors:
    never UTF-16), else windows-1252."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return "utf-8"
    from charset_normalizer import from_bytes

    best = from_bytes(body[:65536]).best()
    encoding = from_python(best.encoding) if best is not None else None
    return encoding if encoding in ASCII_COMPATIBLE else "windows-1252"


def _links(
    tree: LexborHTMLParser,
    base: str,
    max_links: int,
    terms: frozenset[str] = frozenset(),
    offered: dict[int, int] | None = None,
    depth: int = 0,
    invisible: list[LexborNode] | None = None,
    resolve: Callable[[Resolver, list[str]], list[str | None]] | None = None,
    walk: ModuleType | None = None,
    text_below: LexborNode | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, int] | None, str | None]:
    """(every outlink, those marked rel=nofollow, anchor hits), deduplicated, in document order,
    and the visible text of ``text_below`` where the C walk read it with the links (else
    ``None``: ``visible_text`` reads it).

    The hrefs are found by ``walk`` (``parsers.tree_walk.native``, C) if given, else by one
    selector pass in Python (``parsers.tree_walk.python_hrefs``); resolved in the C walk as it
    finds them (``parsers/_resolve.c``; ada for those it hands back), else all together
    (``parsers.hrefs.resolve_all``). ``terms``: query words to count in the anchor text of
    links at ``depth`` (reading anchor text is the costly part: only new links need it); with
    ``offered`` (``hash(url)`` -> the smallest depth this worker offered it at), only of those
    not offered at ``depth`` or less. ``invisible``: if given (and no ``walk``), the Python
    pass appends the script, style, noscript and template elements to it, in document order
    (for ``parsers.tree_walk.remove``). ``resolve``: how hrefs not resolved in the C walk
    are, ``resolve_all`` (numba) unless given. ``text_below``: ``tree_walk.text_root``, for
    the C walk to read the text in its pass over the tree.
    """
    most = HREFS_PER_LINK * max(max_links, 0)
    resolver = Resolver(base)
    urls: list[str | None] | None = None
    visible: str | None = None
    if walk is not None:
        root = tree.root
        if root is None:
            return (), (), {} if terms else None, None
        origin = resolver.origin
        if origin is not None:  # resolved in the walk, but for the hrefs it hands back
            context = f"{origin}{resolver.directory}{base}".encode("ascii")
            if text_below is not None:
                urls, fallbacks, rels, anchors, visible = walk.resolved_links_text(
                    root, text_below, most, ANCHOR_TEXT_VISITS, ANCHOR_TEXT_BYTES, context,
                    len(origin), len(resolver.directory),
                )  # fmt: skip
            else:
                urls, fallbacks, rels, anchors = walk.resolved_links(
                    root, most, ANCHOR_TEXT_VISITS, ANCHOR_TEXT_BYTES, context, len(origin),
                    len(resolver.directory),
                )  # fmt: skip
            for k in fallbacks:
                urls[k] = resolver.resolve(urls[k].strip())  # type: ignore[union-attr]
        else:
            hrefs, rels, anchors = walk.links(root, most, ANCHOR_TEXT_VISITS, ANCHOR_TEXT_BYTES)
        text_of: Callable[[int], str] = anchors.text
    else:
        hrefs, rels, text_of = python_hrefs(tree, most, invisible)
        anchors = None
    # All hrefs at once: in the C walk, or one numba call instead of Python for each. Then
    # no Python loop over every link but where it must look at each (anchor text, for a
    # query): the links deduplicated in C (an href that resolves to nothing is None).
    if urls is None:
        urls = (resolve or _kernels()[0])(resolver, hrefs)
    return (*_kept(urls, rels, max_links, terms, offered, depth, walk, anchors, text_of), visible)


def _kept(
    urls: list[str | None],
    rels: list[tuple[int, str]],
    max_links: int,
    terms: frozenset[str],
    offered: dict[int, int] | None,
    depth: int,
    walk: ModuleType | None,
    anchors: Any,
    text_of: Callable[[int], str],
) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, int] | None]:
    """``_links``' results from the resolved hrefs (the first ``max_links`` distinct URLs,
    those marked nofollow, the query's anchor hits), however the hrefs were read."""
    found = dict.fromkeys(filter(None, urls))
    if len(found) > max_links:
        found = dict.fromkeys(tuple(found)[: max(max_links, 0)])
    nofollow: dict[str, None] = {}
    for i, rel in rels:
        url = urls[i]
        if url is not None and url in found and "nofollow" in rel.lower().split():
            nofollow[url] = None
    hits = (
        anchor_hits(walk, anchors, text_of, urls, terms, offered, depth, found) if terms else None
    )
    return tuple(found), tuple(nofollow), hits


@dataclass(slots=True)
class _Head:
    title: str = ""
    base: str | None = None
    meta_robots: str = ""
    canonical: str | None = None


def _head(tree: LexborHTMLParser) -> _Head:
    """Title, ``<base href>``, ``<meta name=robots>`` and ``<link rel=canonical>``: the first
    of each in the head (what the selector ``title, base[href], meta[name="robots" i],
    link[rel~="canonical" i]`` would find first), by walking the head's few elements: a
    selector query costs more to set up than the walk."""
    head = _Head()
    scope = tree.head if tree.head is not None else tree.root
    if scope is None:
        return head
    title = base = meta = link = False
    for node in scope.traverse():
        tag = node.tag
        if tag == "title":
            if not title:
                title = True
                head.title = " ".join(node.text().split())
        elif tag == "meta":
            if not meta:
                attributes = node.attributes
                if (attributes.get("name") or "").lower() == "robots":
                    meta = True
                    head.meta_robots = (attributes.get("content") or "").strip()
        elif tag == "link":
            if not link:
                attributes = node.attributes
                if "canonical" in _ASCII_SPACE.split((attributes.get("rel") or "").lower()):
                    link = True
                    head.canonical = (attributes.get("href") or "").strip() or None
        elif tag == "base" and not base:
            attributes = node.attributes
            if "href" in attributes:
                base = True
                head.base = (attributes.get("href") or "").strip() or None
    return head


_extract: Callable[[LexborHTMLParser, str], Any] | None = None
"""The crawl's ``extract`` hook in this worker (``parsers.worker.init_worker``)."""


def set_extract(function: Callable[[LexborHTMLParser, str], Any] | None) -> None:
    global _extract
    _extract = function


def _run_extract(tree: LexborHTMLParser, url: str) -> tuple[str | None, str | None]:
    """(JSON of the hook's result, None) or (None, why it failed)."""
    assert _extract is not None
    try:
        # allow_nan=False: NaN and Infinity are no JSON (SQLite's json functions refuse them)
        return json.dumps(_extract(tree, url), ensure_ascii=False, allow_nan=False), None
    except Exception as exc:  # the user's code: any failure is the page's, not the crawl's
        return None, f"{type(exc).__name__}: {exc}"


@functools.cache
def _kernels() -> tuple[Callable[[Resolver, list[str]], list[str | None]], Callable[..., Any]]:
    """(``resolve_all``, ``page_terms``): the kernels (``parsers.native``), imported where
    they run (the workers; not the crawl process's own parses, ``parse_document`` with
    ``resolve_each``) and looked up once, not at every page."""
    from parsers.native import page_terms, resolve_all

    return resolve_all, page_terms


def parse_page(job: ParseJob, offered: dict[int, int] | None = None) -> Page:
    """Parse one HTML response into a ``Page``. ``offered``: see ``_links``."""
    resolve_all, page_terms = _kernels()
    page = parse_document(job, offered, resolve_all)
    utf8 = page.text.encode("utf-8", "surrogatepass")  # parsers.terms.utf8
    page.text_encoded = (page.text, utf8)
    terms = page_terms(page.text, job.query_ids, utf8=utf8)
    page.tokens, page.token_length = terms.blob, terms.length
    page.simhash, page.query_tf = terms.simhash, terms.query_tf
    return page


def parse_document(
    job: ParseJob,
    offered: dict[int, int] | None = None,
    resolve: Callable[[Resolver, list[str]], list[str | None]] | None = None,
) -> Page:
    """``parse_page`` but for the terms of the text (``tokens``, ``simhash``,
    ``token_length``, ``query_tf``: left empty). With ``resolve=resolve_each`` it needs no
    numba: what the crawl process runs while no parse worker is up yet."""
    markup = _markup(job)
    most = HREFS_PER_LINK * max(job.max_links, 0)
    # Read from the tokens alone where the tree would mirror them (page_scan): no tree to
    # build, walk and free. Never with the extract hook, which is given the tree.
    scanned = page_scan.scan(markup, most) if _extract is None else None
    tree = LexborHTMLParser(markup) if scanned is None else None
    extracted, extract_error = (None, None)
    if tree is not None and _extract is not None:
        extracted, extract_error = _run_extract(tree, job.final_url)
    head: _Head | page_scan.Head = _head(tree) if tree is not None else scanned.head  # type: ignore[union-attr]
    base = job.final_url
    if head.base is not None:
        base = resolve_url(job.final_url, head.base) or job.final_url
    title, meta_robots = head.title, head.meta_robots
    noindex, nofollow = _robots_flags(meta_robots, job.x_robots_tag)
    canonical = resolve_url(base, head.canonical) if head.canonical else None
    terms = frozenset(job.query_terms)
    if scanned is not None:
        lang, walk = scanned.lang, tree_walk.native
        urls = page_scan.resolve(Resolver(base), scanned.hrefs, resolve or _kernels()[0])
        anchors = scanned.anchors
        links, nofollow_links, anchor_hits = _kept(
            urls, scanned.rels, job.max_links, terms, offered, job.depth + 1, walk, anchors,
            anchors.text,
        )  # fmt: skip
        text = scanned.text
    else:
        assert tree is not None
        lang, links, nofollow_links, anchor_hits, text = _from_tree(
            tree, base, job, terms, offered, resolve
        )
    if noindex:
        text = ""
    return Page(
        url=job.url,
        final_url=job.final_url,
        status=job.status,
        content_type=job.content_type,
        title=title,
        text=text,
        links=links,
        meta_robots=meta_robots,
        canonical=canonical,
        lang=lang,
        content_hash=content_hash(job.body),
        body_bytes=len(job.body),
        noindex=noindex,
        nofollow=nofollow,
        links_json=links_json(links),
        nofollow_links=nofollow_links,
        anchor_hits=anchor_hits or None,
        extract=extracted,
        extract_error=extract_error,
    )


def _from_tree(
    tree: LexborHTMLParser,
    base: str,
    job: ParseJob,
    terms: frozenset[str],
    offered: dict[int, int] | None,
    resolve: Callable[[Resolver, list[str]], list[str | None]] | None,
) -> tuple[str | None, tuple[str, ...], tuple[str, ...], dict[str, int] | None, str]:
    """``<html lang>``, ``_links``' results and the visible text, read from the tree."""
    html = tree.root  # the document element: <html> (a CSS query for it walks the tree)
    lang = None
    if html is not None and html.tag == "html":
        lang = (html.attributes.get("lang") or "").strip() or None
    # A tree the extract hook may have changed is walked in Python: the C walk reads the
    # nodes that parsing makes, and an attribute set through selectolax on an svg or math
    # element is stored as parsing never stores one.
    walk = tree_walk.native if _extract is None else None
    invisible: list[LexborNode] | None = [] if walk is None else None
    links, nofollow_links, anchor_hits, text = _links(
        tree, base, job.max_links, terms, offered, job.depth + 1, invisible, resolve, walk,
        tree_walk.text_root(tree) if walk is not None else None,
    )  # fmt: skip
    if invisible:
        remove(invisible)
    if text is None:
        text = visible_text(tree, walk)
    return lang, links, nofollow_links, anchor_hits, text


def resolve_each(resolver: Resolver, hrefs: list[str]) -> list[str | None]:
    """``parsers.hrefs.resolve_all`` without numba: each href in Python (slower; the tests
    hold the two equal)."""
    resolve = resolver.resolve
    return [resolve(href.strip()) for href in hrefs]


_offered: dict[int, int] = {}
"""``hash()`` of the links this worker process offered to the frontier, with the smallest
depth offered at (hashes, not strings: half the memory)."""

_ranked = RankedMemo()
"""This worker process's memo for the pages of crawls with a query."""


def parse_batch(jobs: list[ParseJob]) -> list[Page | ParseFailure]:
    """Parse a batch in a worker: one pool task for many pages amortises the IPC round trip.

    Each page's ``follow`` is set to its links new to this worker, and its ``links`` and
    ``nofollow_links`` are left empty (``links_json`` holds them). A page that breaks the
    parser becomes a ``ParseFailure`` so the rest of the batch lives.
    """
    results: list[Page | ParseFailure] = []
    for job in jobs:
        try:
            page = parse_page(job, _ranked.depth if job.query_terms else None)
        except Exception as exc:  # any parser bug is confined to its page and reported
            results.append(ParseFailure(job.url, f"{type(exc).__name__}: {exc}"))
            continue
        # ``links`` and ``nofollow_links`` stay here: the crawl reads ``links_json`` and
        # ``follow``, and 50-odd URL strings a page cost pickling here and unpickling there.
        if job.query_terms:
            follow = ranked_new_links(page, job.depth + 1, _ranked)
        else:
            follow = new_links(page, job.depth + 1, _offered)
        page.follow, page.links, page.nofollow_links = follow, (), ()
        results.append(page)
    return results
