"""URL rules of a crawl: resolution and normalisation (re-exported) and the scope decision.

Owns: which URLs a crawl may follow, given its seeds and settings. Pure: no IO.
``--scope host`` keeps to the seeds' ``host[:port]`` authorities (a default port is dropped by
normalisation, so ``http://x`` and ``https://x`` are the same host); ``--scope domain`` keeps to
the seeds' host names and their subdomains, on any port.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from parsers.links import (
    normalize_url,
    resolve_url,
    strip_userinfo,
    url_authority,
    url_hostname,
    url_origin,
)

__all__ = [
    "Scope",
    "normalize_url",
    "resolve_url",
    "strip_userinfo",
    "url_authority",
    "url_hostname",
    "url_origin",
]


def _registrable_guess(hostname: str) -> str:
    """The domain a ``--scope domain`` crawl stays in: the seed host without a leading ``www.``.

    Without a public-suffix list we do not climb above the seed's own host: seeding
    ``https://www.example.com`` allows ``example.com`` and all of its subdomains, seeding
    ``https://docs.example.com`` allows ``docs.example.com`` and its subdomains.
    """
    return hostname[4:] if hostname.startswith("www.") else hostname


class Scope:
    """Decides whether a URL may be followed. ``check(url)`` returns ``None`` or the reason."""

    __slots__ = ("_domains", "_exclude", "_hosts", "_include", "_mode")

    def __init__(
        self,
        seeds: Iterable[str],
        mode: str = "host",
        include: Iterable[re.Pattern[str]] = (),
        exclude: Iterable[re.Pattern[str]] = (),
    ) -> None:
        self._mode = mode
        seeds = list(seeds)
        self._hosts = frozenset(url_authority(seed) for seed in seeds)
        self._domains = tuple(sorted({_registrable_guess(url_hostname(s)) for s in seeds}))
        self._include = tuple(include)
        self._exclude = tuple(exclude)

    def add_seed(self, seed: str) -> None:
        """Widen the scope with one more seed's host."""
        self._hosts = self._hosts | {url_authority(seed)}
        self._domains = tuple(sorted({*self._domains, _registrable_guess(url_hostname(seed))}))

    def url_allowed(self, url: str) -> bool:
        """Whether the URL's host is in scope (include/exclude not applied)."""
        if self._mode == "any" or url_authority(url) in self._hosts:
            return True
        if self._mode == "domain":
            hostname = url_hostname(url)
            return any(hostname == d or hostname.endswith("." + d) for d in self._domains)
        return False

    def check(self, url: str) -> str | None:
        """``None`` when ``url`` (normalised) is in scope, else ``"scope"``, ``"include"`` or
        ``"exclude"``."""
        if not self.url_allowed(url):
            return "scope"
        if self._include and not any(p.search(url) for p in self._include):
            return "include"
        if any(p.search(url) for p in self._exclude):
            return "exclude"
        return None
