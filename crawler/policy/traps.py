"""Crawler-trap hygiene for discovered URLs: session ids out, endless URL spaces refused.

Owns: two cheap, pure checks the engine applies to every newly discovered (normalised) URL
before it reaches the frontier, and the budget of URL templates (``TemplateBudget``):
- ``strip_session_ids(url)`` removes parameters that name a session, not a resource, so that
  one page reached with many session ids is one URL;
- ``trap_reason(url, limits)`` names the shape of an endless URL space: very long URLs, very
  deep paths, and paths that repeat a segment (relative links resolved against themselves:
  ``/a/b/a/b/a/b/``, ``/x/x/x/``);
- ``TemplateBudget`` bounds the spaces no single URL gives away: an endless calendar
  (``/cal/2026/01`` linking the next month and year, forever), pagination past the last page,
  a soft 404 that answers every URL with the same page and a link to another one. Such a
  space is one URL template (``url_template``: digit runs, and hex runs of 8 or more, as
  ``N``; query values dropped, parameter names sorted) whose pages keep linking to more of
  themselves while saying nothing new. The rule: each fetched page of a template is
  *productive* (2xx HTML whose text is new), a *repeat* (a text within
  ``SIMHASH_NEAR_BITS`` of one of the template's ``RECENT_PAGES`` recent distinct SimHashes;
  for a text under ``SHORT_TEXT_CHARS``, the same text as one of its ``RECENT_SHORT_TEXTS``
  recent distinct ones once the numbers of each page's own URL are taken out of it:
  ``/cal/2026/01`` saying "January 2026"; the window outlasts a cycle of month names, in
  whatever order a crawl parses them), or neither:
  a page that is not parsed (a failure, a redirect, a body that is not HTML) links nowhere,
  and an exact duplicate gives the same links as its original, which lead nowhere new but
  through a growing path (``trap_reason``'s case; ``?ref=nav`` variants of a hub page are
  no trap, however many). A template is *closed* once its repeats exceed both
  ``budget`` and its productive pages (a calendar that names its month says something new
  twelve times, and then only repeats), its pages still being parsed counted as repeats
  once repeats are many (a fast site is fetched ahead of the parse); from then on its URLs are not fetched and the links
  of its pages not followed (skipped as ``url-template``): a trap feeds itself, directly or
  through another template (a soft 404 at ``/x/Na`` linking to ``/x/Nb`` and back). A
  template that says new things stays open whatever its size (a 10,000-page site of
  ``/pN.html``). One more bound, on links: a path (its template) takes at most
  ``MAX_QUERY_SHAPES`` sets of query parameter names; a URL with yet another set is not
  followed (``url-template``): filters that add a parameter a link, forever.

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
URL (``tests/crawler/policy/test_traps.py`` measures it).
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from dataclasses import dataclass, field

__all__ = [
    "PRODUCTIVE",
    "REPEAT",
    "TemplateBudget",
    "TrapLimits",
    "strip_session_ids",
    "trap_reason",
    "url_template",
]

SESSION_PARAMS = frozenset(
    {"jsessionid", "phpsessid", "sessionid", "session_id", "sessid", "cfid", "cftoken"}
)
SESSION_PREFIXES = ("aspsessionid",)
TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid"})
TRACKING_PREFIXES = ("utm_",)
_SID_MIN_CHARS = 16
_PATH_SESSION_PARAM = re.compile(";jsessionid=[^;/]*", re.IGNORECASE | re.ASCII)


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
    """Remove ``;jsessionid=...`` parameters (up to the next ``;`` or ``/``) from the path
    part of ``base``. One pass of a regex, left to right: a removal leaves the delimiter
    after it, so it cannot join what is left into a new parameter, and the result is the
    same as removing them one at a time until none is left (which was quadratic)."""
    path_start = base.find("/", base.find("//") + 2) if "//" in base else 0
    if path_start < 0:
        return base
    return base[:path_start] + _PATH_SESSION_PARAM.sub("", base[path_start:])


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


# -- URL templates ----------------------------------------------------------------------------

_NUMBERS = re.compile(r"[0-9a-fA-F]{8,}|[0-9]+")
_DIGIT_RUN = re.compile(r"[0-9]+")
SIMHASH_NEAR_BITS = 10
"""Two texts of one template whose SimHashes differ in at most this many of 64 bits say the
same thing (unrelated texts differ in ~32; fewer than 12 has odds of ~1e-7)."""
RECENT_PAGES = 8
"""A template's page is compared with this many of its recent SimHashes (distinct ones: a
repeat is not kept again)."""
RECENT_SHORT_TEXTS = 32
"""A template's short text is compared with this many of its recent distinct short texts:
more than a cycle of months (12), days (31) or hours (24), whatever order a crawl meets
them in."""
SHORT_TEXT_CHARS = 1000
"""Shorter texts have too few shingles for SimHash: they are compared without their digits."""
MAX_QUERY_SHAPES = 64
"""Sets of query parameter names one path (template) may be followed with."""
PRODUCTIVE, REPEAT = "productive", "repeat"
_MAX_TEMPLATES = 50_000
"""Templates whose state is kept (the oldest forgotten): a broad crawl meets many."""


def url_template(url: str) -> str:
    """The shape of a normalised URL: its origin and path with numbers as ``N`` (digit runs,
    and runs of 8 or more hex digits), and its query's parameter names, sorted, values
    dropped.

    >>> url_template("http://e.com/cal/2026/01?view=month&lang=en")
    'http://e.com/cal/N/N?lang&view'
    """
    path_start = url.find("/", url.find("//") + 2)
    if path_start < 0:
        return url
    query_start = url.find("?", path_start)
    if query_start < 0:
        return url[:path_start] + _NUMBERS.sub("N", url[path_start:])
    shape = url[:path_start] + _NUMBERS.sub("N", url[path_start:query_start])
    names = sorted({piece.partition("=")[0] for piece in url[query_start + 1 :].split("&")})
    return shape + "?" + "&".join(names)


@dataclass(slots=True)
class _Template:
    productive: int = 0
    repeats: int = 0
    pending: int = 0
    """Pages being parsed (``parsing``), not judged yet."""
    simhashes: deque[int] = field(default_factory=lambda: deque(maxlen=RECENT_PAGES))
    shorts: OrderedDict[int, None] = field(default_factory=OrderedDict)
    """Hashes of recent distinct short texts, the most recently met last."""


class TemplateBudget:
    """The state of a crawl's URL templates (see the module's docstring). Pure."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._templates: dict[str, _Template] = {}
        self._query_shapes: OrderedDict[str, set[str]] = OrderedDict()

    def admit(self, url: str) -> str | None:
        """For a newly found URL with a query: ``url-template`` when its path was already
        followed with ``MAX_QUERY_SHAPES`` other sets of parameter names, else ``None``."""
        template = url_template(url)
        path, _, names = template.partition("?")
        shapes = self._query_shapes.get(path)
        if shapes is None:
            shapes = self._query_shapes[path] = set()
            if len(self._query_shapes) > _MAX_TEMPLATES:
                self._query_shapes.popitem(last=False)
        else:
            self._query_shapes.move_to_end(path)
        if names in shapes:
            return None
        if len(shapes) >= MAX_QUERY_SHAPES:
            return "url-template"
        shapes.add(names)
        return None

    def parsing(self, url: str) -> str:
        """A page of ``url`` is being parsed (``page`` or ``abandon`` follows): until then it
        counts as a repeat in a template whose repeats are already many (``closed``), so that
        pages fetched while others are parsed do not carry a trap on. Returns the template."""
        template = url_template(url)
        templates = self._templates
        state = templates.get(template)
        if state is None:
            if len(templates) >= _MAX_TEMPLATES:  # forget the oldest: a trap is a busy one
                del templates[next(iter(templates))]
            state = templates[template] = _Template()
        state.pending += 1
        return template

    def abandon(self, template: str) -> None:
        """The page ``parsing`` announced was not parsed after all."""
        state = self._templates.get(template)
        if state is not None and state.pending:
            state.pending -= 1

    def page(
        self,
        template: str,
        url: str,
        text: str,
        simhash: int | None = None,
        duplicate_of: str | None = None,
    ) -> None:
        """Record the parsed page of ``url`` (``template``, from ``parsing``): its ``text``,
        its ``simhash``, the URL it is an exact ``duplicate_of``, if any."""
        state = self._templates.get(template)
        if state is None:  # forgotten meanwhile
            return
        if state.pending:
            state.pending -= 1
        if duplicate_of is not None:
            return  # the same page reached another way: nothing to learn
        if not _repeats(state, url, text, simhash):
            state.productive += 1
        else:
            state.repeats += 1

    def closed(self, template: str) -> bool:
        """Whether the template's URLs are no longer fetched, nor its pages' links followed."""
        state = self._templates.get(template)
        if state is None:
            return False
        repeats, productive = state.repeats, state.productive
        if repeats >= productive and 2 * repeats > self.budget:  # a likely trap
            repeats += state.pending
        return repeats > max(self.budget, productive)


def _repeats(state: _Template, url: str, text: str, simhash: int | None) -> bool:
    """Whether ``text`` (of ``url``) says what one of the template's recent pages said; it
    is filed as one of them."""
    if len(text) < SHORT_TEXT_CHARS:
        key = hash(_without_own_numbers(text, url))
        shorts = state.shorts
        if key in shorts:
            shorts.move_to_end(key)
            return True
        shorts[key] = None
        if len(shorts) > RECENT_SHORT_TEXTS:
            shorts.popitem(last=False)
        return False
    if simhash is None:
        return False
    recent = state.simhashes
    for other in recent:
        if (simhash ^ other).bit_count() <= SIMHASH_NEAR_BITS:
            return True
    recent.append(simhash)
    return False


def _without_own_numbers(text: str, url: str) -> str:
    """``text`` without the numbers (leading zeros aside: "01" is 1) that ``url``'s path and
    query hold: what is left of a page that only repeats its own address."""
    start = url.find("/", url.find("//") + 2)
    own = {_number(run) for run in _DIGIT_RUN.findall(url, start if start >= 0 else len(url))}
    if not own:
        return text
    return _DIGIT_RUN.sub(lambda run: "" if _number(run.group()) in own else run.group(), text)


def _number(digits: str) -> str:
    return digits.lstrip("0") or "0"
