"""The values that cross the process-pool boundary: what a parse worker is given and returns.

Invariants: plain, slotted, picklable, read-only by convention; no parser nodes, no sockets, no
clocks. ``ParseJob`` and ``Page`` are not frozen: one of each is built per page on both sides
of the boundary, and a frozen dataclass's ``__init__`` costs ~10x as much (an
``object.__setattr__`` per field: ~4.5 us for a ``Page``, ~0.5 us not frozen).
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass, field
from operator import attrgetter

from blake3 import blake3

HASH_PREFIX = "b3:"
"""Marks a ``content_hash`` as BLAKE3; hashes stored before it (unprefixed) are BLAKE2b."""


def content_hash(body: bytes) -> str:
    """``b3:`` and the body's 128-bit BLAKE3 digest in hex: equal bodies, equal hashes.

    BLAKE3 rather than BLAKE2b: cryptographic as well (a site cannot make a page collide with
    another site's), and SIMD-parallel: 13 against 51 us for a 27 KB page on a 2-core EPYC.
    """
    return HASH_PREFIX + blake3(body).hexdigest(16)


def same_content(body: bytes, stored: str) -> bool:
    """Whether ``body`` is the body ``stored`` was computed from: a ``content_hash``, or the
    unprefixed BLAKE2b-128 hex that versions before BLAKE3 stored (a page keeps it until it
    changes, so recrawls of an older database still recognise unchanged pages)."""
    if stored.startswith(HASH_PREFIX):
        return content_hash(body) == stored
    return hashlib.blake2b(body, digest_size=16).hexdigest() == stored


@dataclass(slots=True)
class ParseJob:
    """A fetched HTML response to parse. ``body`` is the decoded-transfer (decompressed) body."""

    url: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    x_robots_tag: str = ""
    max_links: int = 10_000
    """Outlinks kept per page (the first ones in document order): a trap defence."""
    depth: int = 0
    """The page's depth: its links are at ``depth + 1``."""
    query_terms: tuple[str, ...] = ()
    """Lower-cased query words: anchors holding them are counted (``Page.anchor_hits``)."""
    query_ids: tuple[int, ...] = ()
    """Token ids of the query (``parsers.tokens.query_ids``): their counts in the text are
    returned in ``Page.query_tf``, so that the main process scores without the token blob."""

    def __reduce_ex__(self, protocol: int) -> tuple[object, tuple[object, ...]]:  # type: ignore[override]
        # As ``Page.__reduce__``: every fetched page crosses the process boundary in one.
        # From protocol 5 the body is offered as a buffer, which ``parsers.wire`` sends
        # beside the pickle instead of copying it in (any other pickling copies it as bytes).
        fields = _job_fields(self)
        if protocol >= 5 and type(self.body) is bytes:
            fields = (*fields[:_BODY], pickle.PickleBuffer(self.body), *fields[_BODY + 1 :])
        return (_job, fields)


@dataclass(slots=True)
class Page:
    """A parsed HTML page.

    ``links`` holds every http(s) outlink, resolved (WHATWG, honouring ``<base href>``),
    normalised, fragment-free, deduplicated, in document order. ``nofollow`` says the page
    (meta robots or X-Robots-Tag) forbids following them; ``noindex`` forbids storing its text.
    """

    url: str
    final_url: str
    status: int
    content_type: str
    title: str
    text: str
    links: tuple[str, ...]
    meta_robots: str
    canonical: str | None
    lang: str | None
    content_hash: str
    body_bytes: int
    noindex: bool = False
    nofollow: bool = False
    links_json: str = "[]"
    """``links`` as a JSON array, serialised in the worker (it is what the store writes)."""
    nofollow_links: tuple[str, ...] = ()
    """The subset of ``links`` marked ``rel=nofollow`` (recorded, not followed)."""
    tokens: bytes = b""
    """Token ids and counts of ``text`` (``parsers.tokens.encode_counts``), for scoring."""
    simhash: int = 0
    """64-bit SimHash of the tokens (near-duplicate detection), unsigned."""
    token_length: int = 0
    """Tokens in ``text`` (with repeats): the document length BM25 needs."""
    query_tf: tuple[int, ...] = ()
    """How often each of ``ParseJob.query_ids`` occurs in ``text`` (aligned with them)."""
    anchor_hits: dict[str, int] | None = None
    """For a crawl with a query: outlinks whose anchor text holds query words, with how many."""
    extract: str | None = None
    """JSON of the crawl's ``extract`` hook's result for this page (``None``: no hook, or
    it failed: then ``extract_error`` says why)."""
    extract_error: str | None = None
    follow: tuple[str, ...] | None = None
    """Set by ``parse_batch``: the links worth offering to the frontier. A link this worker
    already offered at the same or a smaller depth is left out (the frontier has seen it),
    which spares the main process most of its per-link work. ``None``: all followable links."""

    @property
    def followable(self) -> tuple[str, ...]:
        """Links that may be followed: ``follow`` if set, else ``links`` without nofollow ones."""
        if self.follow is not None:
            return self.follow
        if self.nofollow or not self.links:
            return () if self.nofollow else self.links
        if not self.nofollow_links:  # the usual case: every link
            return self.links
        refused = frozenset(self.nofollow_links)
        return tuple(url for url in self.links if url not in refused)

    text_encoded: tuple[str, bytes] | None = field(default=None, compare=False, repr=False)
    """(the text, its UTF-8 bytes with ``surrogatepass``) where a worker has them (it
    tokenizes the bytes): the form the text travels back in (``__reduce_ex__``) while it is
    still that text. Never kept by the trip."""

    def __reduce_ex__(self, protocol: int) -> tuple[object, tuple[object, ...]]:  # type: ignore[override]
        # A plain tuple pickles and loads about twice as fast as the dataclass state dict,
        # and every page crosses the process boundary once. From protocol 5 the text (as
        # its UTF-8 bytes) and the tokens are offered as buffers, which ``parsers.wire``
        # moves beside the pickle, uncopied by the pickler (through a ring: copied once in
        # all on the way); ``_page`` turns them back into a ``str`` and ``bytes``.
        values = list(_page_fields(self))
        values[_ENCODED] = None
        if protocol >= 5:
            encoded = self.text_encoded
            if encoded is not None and encoded[0] is self.text:  # not if the text changed
                values[_TEXT] = pickle.PickleBuffer(encoded[1])
            if type(self.tokens) is bytes and self.tokens:
                values[_TOKENS] = pickle.PickleBuffer(self.tokens)
        return (_page, tuple(values))


_job_fields = attrgetter(*ParseJob.__slots__)
_BODY = ParseJob.__slots__.index("body")
_page_fields = attrgetter(*Page.__slots__)
"""Every field's value, as a tuple in ``__init__``'s order (one C call)."""


_TEXT = Page.__slots__.index("text")
_TOKENS = Page.__slots__.index("tokens")
_ENCODED = Page.__slots__.index("text_encoded")


def _page(*fields: object) -> Page:
    """Unpickles a ``Page``: a text that came as UTF-8 (bytes, or a buffer that
    ``parsers.wire`` handed over) is decoded; tokens that came as a buffer are copied out.
    Nothing of the page refers to the message it came in, which is then reused."""
    text, tokens = fields[_TEXT], fields[_TOKENS]
    if type(text) is not str or type(tokens) is not bytes:
        values = list(fields)
        if type(text) is not str:
            values[_TEXT] = str(text, "utf-8", "surrogatepass")  # type: ignore[call-overload]
        if type(tokens) is not bytes:
            values[_TOKENS] = bytes(tokens)  # type: ignore[call-overload]
        fields = tuple(values)
    return Page(*fields)  # type: ignore[arg-type]


def _job(*fields: object) -> ParseJob:
    """Unpickles a ``ParseJob``: a body that came as a buffer (``parsers.wire``) is copied
    out into ``bytes``, what the parser takes."""
    body = fields[_BODY]
    if type(body) is not bytes and body is not None:
        fields = (*fields[:_BODY], bytes(body), *fields[_BODY + 1 :])  # type: ignore[call-overload]
    return ParseJob(*fields)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """A page the worker could not parse; travels back instead of an exception."""

    url: str
    message: str
    timed_out: bool = False
    """Not parsed because it would take too long (``crawler.errors.ParseTimeout``)."""
