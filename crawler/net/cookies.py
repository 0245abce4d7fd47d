"""Cookies for a crawl that asks for them: ``--cookies FILE`` and ``--keep-cookies``.

A crawler is stateless unless asked: without either flag no request carries a ``Cookie``
and ``Set-Cookie`` is ignored. The matching (domain, host-only, path, expiry, ``Secure``,
``Max-Age``, per-domain and total limits) is aiohttp's ``CookieJar``, an RFC 6265 jar: the
same one the reference client of the differential tests uses, so both send the same
cookies. Two things are added here, before a cookie reaches the jar:

- ``cookies.txt`` (Netscape format, what curl ``-c``, wget ``--save-cookies`` and browser
  extensions write: seven tab-separated fields a line, ``#HttpOnly_`` before the domain of
  an HttpOnly one): its domain, include-subdomains flag (or a leading dot; a host-only
  cookie otherwise), path, secure flag and expiry (0: a session cookie) go into the jar as
  a response from that domain would have set them; expired ones are dropped. (The standard
  library's ``MozillaCookieJar`` drops curl's session cookies and rejects a whole file over
  one line whose flag and dot disagree);
- a ``Set-Cookie`` whose ``Domain`` is a public suffix (``com``, ``co.uk``, ``github.io``,
  by the Public Suffix List of ``publicsuffixlist``) is refused, as browsers do (RFC 6265
  5.3 step 5): it would go to every site under that suffix. ``Domain`` equal to the
  response's host is a host-only cookie then.

One departure from the jar, by RFC 6265's rule: an ``Expires`` date of the Unix epoch, the
usual way to delete a cookie, deletes it (the jar's date parser returns 0 for it, which it
then takes for no date: a session cookie). Cookies are sent sorted by name, as aiohttp's
client sends them.

``SameSite`` does not apply to a crawler (it has no "site for cookies"), and ``HttpOnly``
is only about scripts. Cookies are never stored, exported or logged: the ``Cookie``
request header is one of ``crawler.net.http.SECRET_HEADERS``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from crawler.errors import ConfigError

if TYPE_CHECKING:
    from http.cookies import Morsel

    from aiohttp import CookieJar

log = logging.getLogger(__name__)

HTTPONLY_PREFIX = "#HttpOnly_"
"""How curl and browsers' exporters mark an HttpOnly cookie's line (not a comment)."""
MAX_COOKIES_FILE_BYTES = 64 << 20
MAX_SET_COOKIES = 50
"""The most ``Set-Cookie`` headers of one response honoured (aiohttp's parser takes 50)."""


Loaded = tuple[str, "Morsel[str]", str, str]
"""A cookie of a ``cookies.txt``: (name, morsel, scheme, host) as a response from
``scheme://host`` would have set it."""


def read_cookies_txt(path: str) -> list[Loaded]:
    """The unexpired cookies of the ``cookies.txt`` at ``path``; ``ConfigError`` naming the
    file and line when it cannot be read or a line is not a cookie."""
    # The standard library's, imported by the crawls that load cookies, not at every start.
    from email.utils import formatdate
    from http.cookies import CookieError, Morsel

    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as file:
            lines = file.read(MAX_COOKIES_FILE_BYTES + 1).splitlines()
    except OSError as exc:
        raise ConfigError(f"--cookies {path}: cannot read: {exc.strerror or exc}") from None
    now = time.time()
    loaded: list[Loaded] = []
    for number, line in enumerate(lines, 1):
        if line.startswith(HTTPONLY_PREFIX):
            line = line[len(HTTPONLY_PREFIX) :]
        elif line.startswith("#") or not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) == 6:  # a cookie without a value: the last tab dropped
            fields.append("")
        if len(fields) != 7:
            raise ConfigError(f"--cookies {path}:{number}: not a cookies.txt line (7 fields "
                              "separated by tabs: domain, subdomains, path, secure, expiry, "
                              "name, value)")  # fmt: skip
        domain, subdomains, cookie_path, secure, expires, name, value = fields
        try:
            expiry = int(float(expires or 0))
        except ValueError:
            raise ConfigError(f"--cookies {path}:{number}: expiry {expires!r} is not "
                              "a number") from None  # fmt: skip
        host = domain.strip().lstrip(".").lower()
        if (expiry and expiry <= now) or not host or not name:
            continue  # expired (0: a session cookie, kept)
        morsel: Morsel[str] = Morsel()
        try:
            morsel.set(name, value, value)
        except CookieError:
            raise ConfigError(f"--cookies {path}:{number}: {name[:100]!r} is not a cookie "
                              "name") from None  # fmt: skip
        if subdomains.upper() == "TRUE" or domain.startswith("."):
            morsel["domain"] = host
        morsel["path"] = cookie_path or "/"
        if secure.upper() == "TRUE":
            morsel["secure"] = True
        if expiry:
            morsel["expires"] = formatdate(min(expiry, 253402300799), usegmt=True)
        loaded.append((name, morsel, "https" if morsel["secure"] else "http", host))
    return loaded


class CookieStore:
    """The crawl's cookies. ``header(url)`` is a request's ``Cookie`` (``""``: none);
    ``update(url, values)`` takes a response's ``Set-Cookie`` values when ``keep``.
    Made inside the running event loop (aiohttp's jar asks for it)."""

    def __init__(self, *, keep: bool, initial: Iterable[Loaded] = ()) -> None:
        from aiohttp import CookieJar  # only a crawl with cookies pays for aiohttp's import
        from yarl import URL

        self.keep = keep
        self._jar: CookieJar = CookieJar(unsafe=True)  # unsafe: hosts that are IP addresses
        self._url = URL
        self._suffixes: Any = None
        for name, morsel, scheme, host in initial:
            origin = URL.build(scheme=scheme, host=host, path=morsel["path"], encoded=True)
            self._jar.update_cookies([(name, morsel)], origin)

    def __len__(self) -> int:
        return len(self._jar)

    def header(self, url: str) -> str:
        """The ``Cookie`` header for a request to ``url`` (absolute, encoded)."""
        if not len(self._jar):
            return ""
        found = self._jar.filter_cookies(self._url(url, encoded=True))
        # by name, as aiohttp's client writes them (the jar's answer keeps no paths to
        # order them as RFC 6265 5.4 suggests; servers must not depend on the order)
        return "; ".join(f"{found[name].key}={found[name].coded_value}" for name in sorted(found))

    def update(self, url: str, values: Iterable[str]) -> None:
        """Honour a response's ``Set-Cookie`` values (from ``url``), when ``keep``."""
        if not self.keep:
            return
        response_url = self._url(url, encoded=True)
        host = (response_url.raw_host or "").lower()
        kept = []
        for name, morsel in _parse(list(values)[:MAX_SET_COOKIES]):
            domain = morsel["domain"].lstrip(".").lower()
            if domain and self._public(domain):
                if domain != host:
                    log.debug("%s: refused cookie %r for the public suffix %s", url, name, domain)
                    continue
                del morsel["domain"]  # the host itself: host-only
            if morsel["expires"] and not morsel["max-age"] and self._past(morsel["expires"]):
                morsel["max-age"] = "0"  # the jar reads the epoch itself as no date at all
            kept.append((name, morsel))
        if kept:
            self._jar.update_cookies(kept, response_url)

    def _past(self, expires: str) -> bool:
        """Whether an ``Expires`` date (RFC 6265 5.1.1, the jar's own parser) has passed."""
        parse = getattr(type(self._jar), "_parse_date", None)
        when = parse(expires) if parse is not None else None
        return when is not None and when <= time.time()

    def _public(self, domain: str) -> bool:
        if self._suffixes is None:
            from publicsuffixlist import PublicSuffixList

            self._suffixes = PublicSuffixList()
        return bool(self._suffixes.is_public(domain))


def _parse(values: list[str]) -> list[tuple[str, Morsel[str]]]:
    """``Set-Cookie`` values as (name, morsel), with aiohttp's own parser (what its client
    does); the standard library's where that private helper is missing."""
    try:
        from aiohttp._cookie_helpers import parse_set_cookie_headers
    except ImportError:  # pragma: no cover - an aiohttp that moved it
        from http.cookies import CookieError, SimpleCookie

        parsed: list[tuple[str, Morsel[str]]] = []
        for value in values:
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(value)
            except CookieError:
                continue
            parsed.extend(cookie.items())
        return parsed
    return parse_set_cookie_headers(values)
