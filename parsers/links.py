"""URL resolution and normalisation, the way browsers do it (WHATWG URL standard, via ada-url).

Owns: turning an ``href`` found on a page into the absolute, normalised URL string that the
crawler deduplicates on, and the cheap string helpers that read parts of such a URL.

Invariants:
- ``resolve_url`` returns ``None`` or an absolute ``http``/``https`` URL with no fragment.
- ``normalize_url`` is idempotent: ``normalize_url(normalize_url(u)) == normalize_url(u)``.
- A normalised URL is ada's serialisation: lower-case scheme and host, IDN as punycode, default
  port dropped, dot segments resolved, percent-encoding as the URL standard writes it; with the
  fragment removed, escaped unreserved characters (``%7E`` → ``~``) decoded and the hex
  digits of other escapes upper-cased (RFC 3986 §6.2.2).

This module is imported by parse workers: it must not import anything from ``crawler`` or
``storage``.
"""

from __future__ import annotations

import re

import ada_url

_HTTP_PREFIXES = ("http://", "https://")
_PERCENT_HEX = re.compile(r"%[0-9a-fA-F]{2}")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~")
# "." stays escaped: "%2E%2E" decoded would become a dot segment, which a second
# normalisation would then resolve (normalisation must be idempotent).


def _finish(href: str) -> str | None:
    """Drop the fragment and keep only http(s); ``href`` is an ada serialisation."""
    if not href.startswith(_HTTP_PREFIXES):
        return None
    cut = href.find("#")
    if cut >= 0:
        href = href[:cut]
    if "%" in href:
        href = _PERCENT_HEX.sub(_upper_escape, href)
    return href


def _upper_escape(match: re.Match[str]) -> str:
    """RFC 3986 §6.2.2: an escaped unreserved character is the character; other escapes
    get upper-case hex digits."""
    code = int(match.group(0)[1:], 16)
    return chr(code) if code in _UNRESERVED else match.group(0).upper()


def resolve_url(base: str, href: str) -> str | None:
    """Resolve ``href`` against ``base`` as a browser would; ``None`` if invalid or not http(s).

    >>> resolve_url("http://Example.com/a/b.html", "../c.html#top")
    'http://example.com/c.html'
    >>> resolve_url("http://example.com/", "mailto:x@example.com") is None
    True
    """
    try:
        joined = ada_url.join_url(base, href)
    except ValueError:
        return None
    return _finish(joined)


_SAFE_PATH = re.compile(r"[A-Za-z0-9._~/!$()*+,;=-]*")
_PLAIN = re.compile(r"[A-Za-z0-9._~/!$()*+,;=-]*(?:\?[A-Za-z0-9._~/=&!$()*+,;:@-]*)?")
"""A path of plain characters with an optional query of them, ``&`` and ``:@``: what ada
writes as it is (none is in WHATWG's path or special-query percent-encode sets, nor a
``%`` escape that ``_finish`` rewrites), so such an href needs no parse: ASCII letters and
digits, ``._~/-`` and the sub-delimiters ``!$()*+,;=`` (a path like ``/wiki/A_(b)``, a
query like ``?ids=1,2&at=10:00``), less ``&'`` in a path and ``'`` anywhere."""
_SAFE_QUERY = re.compile(r"[A-Za-z0-9._~/=&!$()*+,;:@-]*")


class Resolver:
    """``resolve_url`` for many hrefs against one base, with a string fast path.

    Most hrefs on a page are plain: a relative, root-relative or absolute URL made of
    letters, digits and ``-._~/`` (with maybe a ``?`` query of those and ``=&``, and any
    ``#fragment``, which resolution drops).
    For those, WHATWG resolution against an already-normalised base is string concatenation
    plus dot-segment removal, which this does without building a URL object (~10x cheaper).
    Anything else (other characters, escapes, schemes, ``//host``, an empty href) goes to
    ada. ``tests/parsers/test_links.py`` checks the two agree on generated hrefs.
    """

    __slots__ = ("_ancestors", "_dir", "_origin", "_prefix", "_seen", "_slash_origin", "base")

    def __init__(self, base: str) -> None:
        self.base = base
        self._origin: str | None = None
        self._slash_origin = ""
        self._dir = ""
        self._prefix = ""
        self._ancestors: list[int] = []
        self._seen: dict[str, str] = {}
        # A page's URL is normalised already (the crawl queues only normalised URLs): the
        # string check confirms it; ada otherwise (in a parse worker its call costs ~35 us
        # a page, cache-cold: py-spy, 3.5 % of the workers' time).
        normal = _fast_absolute(base)
        if normal != base:
            try:
                normal = ada_url.normalize_url(base)
            except ValueError:
                return
        if normal != base or not base.startswith(_HTTP_PREFIXES) or "#" in base or "%" in base:
            return  # not an already normalised plain base: ada does everything
        start = base.find("/", base.find("//") + 2)
        if start < 0:
            return
        self._origin = base[:start]
        self._slash_origin = self._origin + "/"
        path = base[start:]
        query = path.find("?")
        if query >= 0:
            path = path[:query]
        self._dir = path[: path.rfind("/") + 1]
        self._prefix = self._origin + self._dir
        # "../" climbs one directory (never above the root): _dir[: _ancestors[k]] is the
        # directory k levels up, the root last (ends, not strings: a base of n segments
        # would hold ~n^2/2 characters). A level is one path segment, an empty one too:
        # "//a/" climbs to "//", then "/" (WHATWG's path list ["", "a"]).
        end = len(self._dir)
        while end > 1:
            self._ancestors.append(end)
            end = self._dir.rfind("/", 0, end - 1) + 1
        self._ancestors.append(1)

    @property
    def origin(self) -> str | None:
        """``scheme://host[:port]`` of the base when the string fast path applies, else ``None``."""
        return self._origin

    @property
    def directory(self) -> str:
        """The base's directory (path up to its last ``/``) when ``origin`` is not ``None``."""
        return self._dir

    def resolve(self, href: str) -> str | None:
        """``resolve_url(self.base, href)``."""
        origin = self._origin
        if origin is not None and href:
            cut = href.find("#")
            if cut >= 0:  # the fragment is dropped anyway, and resolving ignores it
                if cut == 0:
                    return self.base  # "#top": this page (the base has no fragment)
                # What the fast path made of the part before a fragment is remembered: a
                # page often links to a few documents at many fragments (the Python docs:
                # 384 hrefs a page, 46 documents). Hrefs without one are not looked up:
                # on most pages they differ, and a look-up would cost more than it saves.
                plain = href[:cut]
                url = self._seen.get(plain)
                if url is not None:
                    return url
            else:
                plain, url = href, None
            # The commonest forms first, each one string test, one regex and one
            # concatenation: no dot segment anywhere ("/." never occurs, no leading "."
            # after the "../" climbed) and only plain characters, so nothing to normalise.
            first = plain[0]
            if first == "/":
                if plain[1:2] != "/" and "/." not in plain and _PLAIN.fullmatch(plain):
                    url = origin + plain
                elif not plain.startswith("//"):
                    url = self._fast(plain)
            elif first == ".":
                if plain.startswith("../"):
                    up = 1
                    while plain.startswith("../", 3 * up):
                        up += 1
                    rest = plain[3 * up :]
                    if rest[:1] != "." and "/." not in rest and _PLAIN.fullmatch(rest):
                        ancestors = self._ancestors
                        end = ancestors[min(up, len(ancestors) - 1)]
                        url = origin + self._dir[:end] + rest
                if url is None and ":" not in plain:
                    url = self._fast(self._dir + plain)
            elif plain.startswith(self._slash_origin):
                if "/." not in plain and _PLAIN.fullmatch(plain, len(origin)):
                    url = plain
                else:
                    url = self._fast(plain[len(origin) :])
            elif plain.startswith(_HTTP_PREFIXES):
                url = _fast_absolute(plain)
            elif first != "?" and ":" not in plain:
                if "/." not in plain and _PLAIN.fullmatch(plain):
                    url = self._prefix + plain
                else:
                    url = self._fast(self._dir + plain)
            if url is not None:
                if cut > 0:
                    self._seen[plain] = url
                return url
        return resolve_url(self.base, href)  # ada, on the whole href

    def _fast(self, path: str) -> str | None:
        """``origin + path`` normalised, for a ``path`` that starts with ``/``; ``None``
        when it holds anything but the plain characters."""
        return _plain_path(self._origin, path)


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_PLAIN_ORIGIN = re.compile(
    rf"(https?)://((?:[a-z0-9-]+\.)*[a-z][a-z0-9-]*|(?:{_OCTET}\.){{3}}{_OCTET})"
    r"(?::([1-9][0-9]{0,4}))?"
)
"""A lower-case DNS name whose last label starts with a letter, or an IPv4 address written
as ada writes it (four decimal octets, no leading zeros), and an optional port."""
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _fast_absolute(href: str) -> str | None:
    """An absolute http(s) URL to any host, when it is already in the form ada would write:
    a lower-case DNS name (no IPv4 look-alike, no punycode to validate, no trailing dot) or a
    canonical IPv4 address, an optional non-default port, then a plain path and query.
    ``None``: let ada do it."""
    match = _PLAIN_ORIGIN.match(href)
    if match is None:
        return None
    rest = href[match.end() :]
    if rest and rest[0] != "/":
        return None
    scheme, host, port = match.groups()
    if "xn--" in host:
        return None
    origin = match.group(0)
    if port is not None:
        if int(port) > 65535:
            return None
        if port == _DEFAULT_PORTS[scheme]:
            origin = f"{scheme}://{host}"
    return _plain_path(origin, rest or "/")


def _plain_path(origin: str | None, path: str) -> str | None:
    """``origin + path`` with dot segments removed, for a ``path`` of plain characters that
    starts with ``/`` (and an optional plain query); ``None`` otherwise."""
    query = path.find("?")
    if query >= 0:
        if not _SAFE_QUERY.fullmatch(path, query + 1):
            return None
        tail = path[query:]
        path = path[:query]
    else:
        tail = ""
    if not _SAFE_PATH.fullmatch(path):
        return None
    if "/." in path:
        path = _remove_dot_segments(path)
    return f"{origin}{path}{tail}"


def _remove_dot_segments(path: str) -> str:
    """WHATWG path parsing of ``.`` and ``..`` segments for a special-scheme path of plain
    characters starting with ``/`` (``..`` never climbs above the root)."""
    segments = path.split("/")[1:]
    last = len(segments) - 1
    out: list[str] = []
    for i, segment in enumerate(segments):
        if segment == "..":
            if out:
                out.pop()
            if i == last:
                out.append("")
        elif segment == ".":
            if i == last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


def normalize_url(url: str) -> str:
    """The form URLs are deduplicated on. Raises ``ValueError`` for an invalid or non-http(s) URL.

    >>> normalize_url("HTTP://EXAMPLE.com:80/a/./b/../c?q#frag")
    'http://example.com/a/c?q'
    """
    try:
        href = ada_url.normalize_url(url)
    except ValueError:
        raise ValueError(f"invalid URL: {url!r}") from None
    result = _finish(href)
    if result is None:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return result


def url_authority(url: str) -> str:
    """``host[:port]`` of a normalised URL, without user info, using string operations only.

    >>> url_authority("https://user:pw@example.com:8443/x")
    'example.com:8443'
    """
    start = url.find("//") + 2
    end = len(url)
    for stop in "/?":
        pos = url.find(stop, start)
        if 0 <= pos < end:
            end = pos
    authority = url[start:end]
    at = authority.rfind("@")
    return authority[at + 1 :] if at >= 0 else authority


def url_hostname(url: str) -> str:
    """Host name of a normalised URL (no port, IPv6 brackets kept).

    >>> url_hostname("http://[::1]:8080/x"), url_hostname("http://example.com/")
    ('[::1]', 'example.com')
    """
    authority = url_authority(url)
    colon = authority.rfind(":")
    if colon > authority.rfind("]"):
        return authority[:colon]
    return authority


_LAST_ORIGIN = ["\0"]
"""``url_origin``'s last answer: the URLs it is asked about come in runs of one origin."""


def url_origin(url: str) -> str:
    """``scheme://host[:port]`` of a normalised URL: the unit robots.txt applies to.

    A URL that starts with the last answer, followed by its path or query, has that origin:
    one ``startswith`` instead of the parse (~3.5x cheaper; a crawl asks for each URL it
    finds, stores or offers, mostly of one site). The memo is one string swapped whole, so
    a thread racing another reads either answer, and checks it before using it."""
    last = _LAST_ORIGIN[0]
    if url.startswith(last) and url[len(last) : len(last) + 1] in ("/", "?"):
        return last
    origin = url[: url.find("//") + 2] + url_authority(url)
    _LAST_ORIGIN[0] = origin
    return origin


def strip_userinfo(url: str) -> str:
    """``url`` without the userinfo of its authority (``http://user:pw@host/`` gives
    ``http://host/``): a URL stored, exported or logged never carries a seed's credentials.

    Only the authority's userinfo goes, the part between ``scheme://`` and the first ``/``,
    ``?`` or ``#``, up to its last ``@``; an ``@`` in the path, query or fragment stays.
    Text that is not an absolute URL comes back as it is.
    """
    if "@" not in url:
        return url  # the common case
    start = url.find("://")
    if start <= 0 or not url[0].isascii() or not url[0].isalpha():
        return url
    if not all(c.isascii() and (c.isalnum() or c in "+-.") for c in url[:start]):
        return url
    host_at = start + 3
    end = len(url)
    for delimiter in "/?#":
        found = url.find(delimiter, host_at)
        if found != -1:
            end = min(end, found)
    at = url.rfind("@", host_at, end)
    if at == -1:
        return url
    return url[:host_at] + url[at + 1 :]
