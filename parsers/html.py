"""HTML parsing in worker processes: bytes in, a plain ``Page`` out (selectolax / lexbor).

Owns: charset decision, title, visible text (no script/style/noscript/template), outlinks
(resolved against ``<base href>`` or the final URL), meta robots, canonical and ``<html lang>``.

Invariants: pure CPU work, no IO; never returns parser nodes; importable without the engine.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re

from selectolax.lexbor import LexborHTMLParser

from parsers.links import resolve_url
from parsers.page import Page, ParseFailure, ParseJob

_INVISIBLE_TAGS = ["script", "style", "noscript", "template"]
_LINK_SELECTOR = "a[href], area[href]"
_FRAME_SELECTOR = "frame[src], iframe[src]"
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_UTF8_NAMES = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


def choose_charset(header_charset: str | None, body: bytes, *, detect: bool = False) -> str:
    """The encoding to decode ``body`` with: BOM, then the HTTP header, then ``<meta>``, then
    UTF-8 (or, with ``detect``, detection: UTF-8 if valid, else charset-normalizer's guess).

    A BOM wins over the header, as the HTML standard's encoding sniffing says.
    """
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    for candidate in (header_charset, _meta_charset(body)):
        if candidate:
            try:
                return codecs.lookup(candidate).name
            except LookupError:
                continue
    return _detect(body) if detect else "utf-8"


def _meta_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body, 0, 2048)
    return match.group(1).decode("ascii", "replace") if match else None


def _robots_flags(*directives: str) -> tuple[bool, bool]:
    words = {w.strip() for d in directives for w in d.lower().split(",")}
    none = "none" in words
    return none or "noindex" in words, none or "nofollow" in words


def _document(job: ParseJob) -> LexborHTMLParser:
    encoding = choose_charset(job.charset, job.body, detect=True)
    if encoding.replace("_", "-") in _UTF8_NAMES:
        return LexborHTMLParser(job.body)
    return LexborHTMLParser(job.body.decode(encoding, errors="replace"))


def _detect(body: bytes) -> str:
    """Nothing declared the encoding: UTF-8 if the body is valid UTF-8, else a detector's guess."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return "utf-8"
    from charset_normalizer import from_bytes

    best = from_bytes(body[:65536]).best()
    return best.encoding if best is not None else "cp1252"


def _links(
    tree: LexborHTMLParser, base: str, max_links: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every outlink, those marked rel=nofollow), each deduplicated, in document order."""
    found: dict[str, None] = {}
    nofollow: dict[str, None] = {}
    for selector, attribute in ((_LINK_SELECTOR, "href"), (_FRAME_SELECTOR, "src")):
        for node in tree.css(selector):
            href = node.attributes.get(attribute)
            if not href:
                continue
            url = resolve_url(base, href.strip())
            if url is None:
                continue
            if len(found) < max_links:
                found[url] = None
            rel = node.attributes.get("rel")
            if rel and "nofollow" in rel.lower().split():
                nofollow[url] = None
    return tuple(found), tuple(u for u in nofollow if u in found)


def _base_url(tree: LexborHTMLParser, page_url: str) -> str:
    node = tree.css_first("base[href]")
    if node is not None:
        href = node.attributes.get("href")
        if href:
            resolved = resolve_url(page_url, href.strip())
            if resolved is not None:
                return resolved
    return page_url


def _attribute(tree: LexborHTMLParser, selector: str, name: str) -> str | None:
    node = tree.css_first(selector)
    if node is None:
        return None
    value = node.attributes.get(name)
    return value.strip() if value else None


def parse_page(job: ParseJob) -> Page:
    """Parse one HTML response into a ``Page``."""
    tree = _document(job)
    base = _base_url(tree, job.final_url)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    meta_robots = _attribute(tree, 'meta[name="robots" i]', "content") or ""
    noindex, nofollow = _robots_flags(meta_robots, job.x_robots_tag)
    canonical_href = _attribute(tree, 'link[rel="canonical" i]', "href")
    canonical = resolve_url(base, canonical_href) if canonical_href else None
    lang = _attribute(tree, "html", "lang")
    links, nofollow_links = _links(tree, base, job.max_links)
    tree.strip_tags(_INVISIBLE_TAGS)
    root = tree.body if tree.body is not None else tree.root
    text = root.text(separator=" ", strip=True) if root is not None else ""
    return Page(
        url=job.url,
        final_url=job.final_url,
        status=job.status,
        content_type=job.content_type,
        title=title,
        text="" if noindex else text,
        links=links,
        meta_robots=meta_robots,
        canonical=canonical,
        lang=lang,
        content_hash=content_hash(job.body),
        body_bytes=len(job.body),
        noindex=noindex,
        nofollow=nofollow,
        links_json=json.dumps(links, ensure_ascii=False),
        nofollow_links=nofollow_links,
    )


def content_hash(body: bytes) -> str:
    """A 128-bit BLAKE2b digest of the body, hex: equal bodies, equal hashes."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def parse_batch(jobs: list[ParseJob]) -> list[Page | ParseFailure]:
    """Parse a batch: one pool task for many pages amortises the IPC round trip.

    A page that breaks the parser becomes a ``ParseFailure`` so the rest of the batch lives.
    """
    results: list[Page | ParseFailure] = []
    for job in jobs:
        try:
            results.append(parse_page(job))
        except Exception as exc:  # any parser bug is confined to its page and reported
            results.append(ParseFailure(job.url, f"{type(exc).__name__}: {exc}"))
    return results
