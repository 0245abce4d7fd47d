"""Sitemap parsing (sitemaps.org protocol): XML ``urlset`` and ``sitemapindex``, plain text, gzip.

Owns: turning a downloaded sitemap body into the page URLs and child-sitemap URLs it lists.
Pure and safe on hostile input; imports nothing from ``crawler`` or ``storage`` (it may run in
parse workers).

Invariants:
- ``parse_sitemap`` never raises on any ``bytes``: a malformed document, a broken gzip stream
  or a cap yields what was read before the problem, with ``error`` / ``truncated`` set;
- memory stays flat whatever the input: gzip is inflated incrementally (``zlib.decompressobj``
  with an output limit per call) and at most ``max_bytes`` decompressed bytes are ever
  produced, in 64 KiB pieces fed straight to the parser; a gzip bomb costs ``max_bytes`` of
  CPU, not of memory. Element nesting is tracked with a counter, not a stack, and capped at
  ``MAX_SITEMAP_DEPTH`` (expat keeps each open element, so a document of nothing but start
  tags would otherwise cost memory many times its size): deeper, parsing stops with ``error``;
- no entity expansion: a document with a ``<!DOCTYPE`` (and so any ``<!ENTITY``) is refused
  before a single declaration is processed (sitemaps never need one). Expat >= 2.4.1 guards
  against "billion laughs" as well, and ``pyexpat`` never fetches external entities unless a
  handler asks for them: three layers;
- only absolute ``http``/``https`` URLs without whitespace, at most ``MAX_LOC_CHARS`` long,
  are returned, stripped of surrounding whitespace, in document order. Deciding whether they
  are in scope (the protocol wants the sitemap's own host) is the caller's job;
- at most ``max_urls`` entries in all (``urls`` plus ``sitemaps``).

A ``<loc>`` counts when its parent is a ``<url>`` (a page) or a ``<sitemap>`` (a child
sitemap) in the same namespace, whatever that namespace is (real sitemaps use several, or
none), so extension elements such as ``<image:loc>`` are not mistaken for pages.
Not handled: RSS/Atom feeds (which the protocol also allows) and UTF-16 documents.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "MAX_LOC_CHARS",
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_DEPTH",
    "MAX_SITEMAP_URLS",
    "Sitemap",
    "parse_sitemap",
]

MAX_SITEMAP_BYTES = 50 * 1024 * 1024
"""The protocol's limit on an uncompressed sitemap."""
MAX_SITEMAP_URLS = 50_000
"""The protocol's limit on the entries of one sitemap."""
MAX_LOC_CHARS = 8192
"""Longer ``<loc>`` values (or text lines) are dropped."""
MAX_SITEMAP_DEPTH = 64
"""The deepest element nesting parsed (a sitemap's ``<loc>`` is 3 deep, an extension's 4)."""

_CHUNK_BYTES = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_NS_SEP = " "  # cannot occur in a namespace URI
_ENTRY_KINDS = frozenset({"url", "sitemap"})

_Flag = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class Sitemap:
    """What a sitemap lists. ``error`` says why parsing stopped early, if it did."""

    urls: tuple[str, ...] = ()
    """Page URLs (``<url><loc>``, or the lines of a text sitemap)."""
    sitemaps: tuple[str, ...] = ()
    """Child sitemap URLs (``<sitemap><loc>`` of a sitemap index)."""
    truncated: bool = False
    """A cap (``max_bytes`` decompressed, or ``max_urls``) cut the document short."""
    error: str | None = None
    """Malformed XML, a broken gzip stream, a refused DOCTYPE or elements nested deeper than
    ``MAX_SITEMAP_DEPTH``; ``None`` when all went well."""


def parse_sitemap(
    body: bytes,
    max_bytes: int = MAX_SITEMAP_BYTES,
    max_urls: int = MAX_SITEMAP_URLS,
    *,
    cut: bool = False,
) -> Sitemap:
    """Parse a sitemap body (XML or text, gzipped or not, told apart by content, not headers).
    ``cut``: the body is a prefix (cut as it was received): its last text line, as the one
    before a cap or a broken gzip stream, is no URL.

    >>> xml = b'<urlset><url><loc> https://example.com/a </loc></url></urlset>'
    >>> parse_sitemap(xml).urls
    ('https://example.com/a',)
    """
    source = _Source(body, max_bytes)
    collector = _Collector(max_urls)
    chunks = source.chunks()
    parts = []  # up to the first chunk that is not all blanks: one look at each
    for chunk in chunks:
        parts.append(chunk)
        if chunk.lstrip(_BOM + b" \t\r\n"):
            break
    head = b"".join(parts)
    rest = _prepend(head, chunks)
    if head.lstrip(_BOM + b" \t\r\n").startswith(b"<"):
        _parse_xml(rest, collector, truncated=lambda: source.truncated)
    else:
        _parse_text(rest, collector,
                    truncated=lambda: cut or source.truncated or source.error is not None)  # fmt: skip
    return Sitemap(
        urls=tuple(collector.urls),
        sitemaps=tuple(collector.sitemaps),
        truncated=cut or source.truncated or collector.full,
        error=collector.error or source.error,
    )


def _prepend(head: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from chunks


class _Source:
    """The document's bytes in pieces: gunzipped when gzip, at most ``max_bytes`` in all."""

    def __init__(self, body: bytes, max_bytes: int) -> None:
        self.body = body
        self.remaining = max(max_bytes, 0)
        self.truncated = False
        self.error: str | None = None

    def chunks(self) -> Iterator[bytes]:
        if self.body[:2] == _GZIP_MAGIC:
            yield from self._gunzip(self.body)
            return
        for start in range(0, len(self.body), _CHUNK_BYTES):
            piece = self._take(self.body[start : start + _CHUNK_BYTES])
            if piece:
                yield piece
            if self.truncated:
                return

    def _take(self, piece: bytes) -> bytes:
        """``piece``, cut to what the cap still allows (setting ``truncated`` if cut)."""
        if len(piece) > self.remaining:
            piece, self.truncated = piece[: self.remaining], True
        self.remaining -= len(piece)
        return piece

    def _gunzip(self, data: bytes) -> Iterator[bytes]:
        while data[:2] == _GZIP_MAGIC:  # each member of a multi-member file
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            pending = data
            while not inflater.eof:
                try:
                    out = inflater.decompress(pending, _CHUNK_BYTES)
                except zlib.error as exc:
                    self.error = f"bad gzip data: {exc}"
                    return
                pending = inflater.unconsumed_tail
                piece = self._take(out)
                if piece:
                    yield piece
                if self.truncated:
                    return
                if not out and not pending and not inflater.eof:
                    self.error = "gzip data ends early"
                    return
            data = inflater.unused_data


class _Stop(Exception):
    """Ends parsing from inside an expat handler."""


class _Collector:
    """Receives expat events (or text lines) and keeps the URLs that count."""

    def __init__(self, max_urls: int) -> None:
        self.max_urls = max(max_urls, 0)
        self.urls: list[str] = []
        self.sitemaps: list[str] = []
        self.full = False
        self.error: str | None = None
        self._depth = 0
        self._entry: tuple[int, str, str] | None = None  # depth, kind, namespace of <url>
        self._loc_depth = -1
        self._text: list[str] = []
        self._text_chars = 0

    def add(self, kind: str, text: str) -> None:
        url = _http_url(text)
        if url is None:
            return
        if len(self.urls) + len(self.sitemaps) >= self.max_urls:
            self.full = True
            raise _Stop
        (self.urls if kind == "url" else self.sitemaps).append(url)

    def start(self, name: str, attributes: object) -> None:
        self._depth += 1
        if self._depth > MAX_SITEMAP_DEPTH:
            self.error = f"elements nested deeper than {MAX_SITEMAP_DEPTH}"
            raise _Stop
        namespace, _, local = name.rpartition(_NS_SEP)
        entry = self._entry
        if entry is None:
            if local in _ENTRY_KINDS:
                self._entry = (self._depth, local, namespace)
        elif local == "loc" and self._depth == entry[0] + 1 and namespace == entry[2]:
            self._loc_depth = self._depth
            self._text.clear()
            self._text_chars = 0

    def end(self, name: str) -> None:
        entry = self._entry
        if self._depth == self._loc_depth and entry is not None:
            self._loc_depth = -1
            if self._text_chars <= MAX_LOC_CHARS:
                self.add(entry[1], "".join(self._text))
        elif entry is not None and self._depth == entry[0]:
            self._entry = None
        self._depth -= 1

    def data(self, text: str) -> None:
        if self._loc_depth == self._depth:
            self._text_chars += len(text)
            if self._text_chars <= MAX_LOC_CHARS:
                self._text.append(text)

    def refuse_doctype(self, *args: object) -> None:
        self.error = "DOCTYPE refused (sitemaps need none; entities are not expanded)"
        raise _Stop


def _parse_xml(chunks: Iterator[bytes], collector: _Collector, truncated: _Flag) -> None:
    from xml.parsers import expat  # here: most crawls parse no sitemap in this process

    parser = expat.ParserCreate(namespace_separator=_NS_SEP)
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = collector.refuse_doctype
    parser.EntityDeclHandler = collector.refuse_doctype
    parser.StartElementHandler = collector.start
    parser.EndElementHandler = collector.end
    parser.CharacterDataHandler = collector.data
    try:
        for chunk in chunks:
            parser.Parse(chunk, False)
        if not truncated():
            parser.Parse(b"", True)
    except _Stop:
        pass
    except expat.ExpatError as exc:
        collector.error = f"malformed XML: {exc}"


def _parse_text(chunks: Iterator[bytes], collector: _Collector, truncated: _Flag) -> None:
    carry, skipping = b"", False
    try:
        for chunk in chunks:
            lines = (carry + chunk).replace(b"\r", b"\n").split(b"\n")  # CR-only ends too
            carry = lines.pop()
            if skipping and lines:  # the end of an over-long line
                lines[0], skipping = b"", False
            if len(carry) > MAX_LOC_CHARS:
                carry, skipping = b"", True  # no URL is this long; do not let it grow
            for line in lines:
                collector.add("url", line.decode("utf-8", "replace"))
        if carry and not skipping and not truncated():  # a cut last line is not a URL
            collector.add("url", carry.decode("utf-8", "replace"))
    except _Stop:
        pass


def _http_url(text: str) -> str | None:
    """``text`` stripped, if it is an absolute http(s) URL with no inner whitespace."""
    url = text.strip().lstrip("\ufeff")
    if len(url) > MAX_LOC_CHARS or not url[:8].lower().startswith(("http://", "https://")):
        return None
    if len(url.split(maxsplit=1)) != 1:
        return None
    return url
