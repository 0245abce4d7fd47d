"""Crawler-trap hygiene for discovered URLs: session ids out, endless URL spaces refused.

Owns: two cheap, pure checks the engine applies to every newly discovered (normalised) URL
before it reaches the frontier:
- ``strip_session_ids(url)`` removes parameters that name a session, not a resource, so that
  one page reached with many session ids is one URL;
- ``trap_reason(url, limits)`` names the shape of an endless URL space: very long URLs, very
  deep paths, and paths that repeat a segment (relative links resolved against themselves:
  ``/a/b/a/b/a/b/``, ``/x/x/x/``).

Decisions:
- Removed query parameters (names compared case-insensitively): ``jsessionid``,
  ``phpsessid``, ``sessionid``, ``session_id``, ``sessid``, ``cfid``, ``cftoken``,
  ``aspsessionid*`` (ASP's name carries a random suffix); ``sid`` only when its value looks
  like a token (16+ letters and digits), because ``sid`` also names stories and sites
  (``article.pl?sid=03/05/01/123``). Removed path parameter: ``;jsessionid=...`` (Java's URL
  rewriting), the one session form seen in paths.
- Tracking parameters (``utm_*``, ``gclid``, ``fbclid``, ``msclkid``) are removed too, by
  default (``strip_tracking=True``): they never select content, and campaign links would
  otherwise multiply every page in the frontier. Pass ``strip_tracking=False`` to keep them.
- Anything not removed is kept byte for byte (order, encoding, empty pieces), so a
  normalised URL stays normalised and the function is idempotent.

Invariants (tested as properties): ``strip_session_ids`` is idempotent and never turns a valid
URL into an invalid one; both functions are plain string operations, a few microseconds per
URL (``tests/test_traps.py`` measures it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrapLimits", "strip_session_ids", "trap_reason"]

SESSION_PARAMS = frozenset(
    {"jsessionid", "phpsessid", "sessionid", "session_id", "sessid", "cfid", "cftoken"}
)
SESSION_PREFIXES = ("aspsessionid",)
TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid"})
TRACKING_PREFIXES = ("utm_",)
_SID_MIN_CHARS = 16
_PATH_SESSION = ";jsessionid="


@dataclass(frozen=True, slots=True)
class TrapLimits:
    """Where a URL stops looking like a page and starts looking like a trap."""

    max_url_chars: int = 2048
    """Longer URLs are refused (browsers and servers commonly stop near 2 KB)."""
    max_path_segments: int = 20
    """Deeper paths are refused."""
    max_segment_repeats: int = 2
    """A path segment occurring more often than this is a loop of relative links."""


DEFAULT_LIMITS = TrapLimits()


def strip_session_ids(url: str, *, strip_tracking: bool = True) -> str:
    """``url`` without session-id (and, by default, tracking) parameters.

    >>> strip_session_ids("http://e.com/a;jsessionid=0A1B?id=7&PHPSESSID=f00&utm_source=x")
    'http://e.com/a?id=7'
    """
    if "?" not in url and ";" not in url:
        return url  # the common case
    url, hash_, fragment = url.partition("#")
    base, question, query = url.partition("?")
    if ";" in base:
        base = _strip_path_session(base)
    if question:
        stripped = _strip_query(query, strip_tracking)
        if stripped != query:
            query, question = stripped, "?" if stripped else ""
    return base + question + query + hash_ + fragment


def _strip_path_session(base: str) -> str:
    """Remove ``;jsessionid=...`` parameters from the path part of ``base``."""
    path_start = base.find("/", base.find("//") + 2) if "//" in base else 0
    if path_start < 0:
        return base
    while True:
        at = base.lower().find(_PATH_SESSION, path_start)
        if at < 0:
            return base
        end = at + len(_PATH_SESSION)
        while end < len(base) and base[end] not in ";/":
            end += 1
        base = base[:at] + base[end:]


def _strip_query(query: str, strip_tracking: bool) -> str:
    pieces = query.split("&")
    kept = [piece for piece in pieces if not _drop_param(piece, strip_tracking)]
    return query if len(kept) == len(pieces) else "&".join(kept)


def _drop_param(piece: str, strip_tracking: bool) -> bool:
    name, _, value = piece.partition("=")
    name = name.lower()
    if name in SESSION_PARAMS or name.startswith(SESSION_PREFIXES):
        return True
    if name == "sid":
        return len(value) >= _SID_MIN_CHARS and value.isascii() and value.isalnum()
    return strip_tracking and (name in TRACKING_PARAMS or name.startswith(TRACKING_PREFIXES))


def trap_reason(url: str, limits: TrapLimits = DEFAULT_LIMITS) -> str | None:
    """Why ``url`` looks like a crawler trap, or ``None``.

    Reasons: ``url-too-long``, ``too-many-segments``, ``repeated-segment``. Empty segments
    (``//``) are not counted.

    >>> trap_reason("http://e.com/a/b/a/b/a/b/"), trap_reason("http://e.com/a/b/") is None
    ('repeated-segment', True)
    """
    if len(url) > limits.max_url_chars:
        return "url-too-long"
    scheme_end = url.find("//")
    path_start = url.find("/", scheme_end + 2) if scheme_end >= 0 else -1
    if path_start < 0:
        return None
    path_end = len(url)
    for stop in "?#":
        at = url.find(stop, path_start)
        if 0 <= at < path_end:
            path_end = at
    segments = [s for s in url[path_start + 1 : path_end].split("/") if s]
    if len(segments) > limits.max_path_segments:
        return "too-many-segments"
    if len(segments) > limits.max_segment_repeats and _has_repeats(segments, limits):
        return "repeated-segment"
    return None


def _has_repeats(segments: list[str], limits: TrapLimits) -> bool:
    if len(set(segments)) == len(segments):
        return False
    counts: dict[str, int] = {}
    for segment in segments:
        counts[segment] = count = counts.get(segment, 0) + 1
        if count > limits.max_segment_repeats:
            return True
    return False
