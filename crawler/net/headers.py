"""Request headers a user adds: ``--header "Name: value"`` and per-host ones in the config.

A header given replaces the crawl's own of that name (``User-Agent``, ``Accept``,
``Accept-Encoding``), case-insensitively; one whose value is empty (``--header "Accept:"``)
removes it, as curl does. Names that frame or route the request (``Host``,
``Content-Length``, ``Transfer-Encoding``, ``Connection`` and the other hop-by-hop headers
of RFC 9110 7.6.1, ``Proxy-Authorization``: the proxy URL carries those credentials) are
refused, and so are names that are not RFC 9110 tokens and values with a line break or NUL.

Per-host headers (a TOML table ``[host-headers."example.com"]``) apply to that host;
a key with a leading dot (``".example.com"``) to the domain and every host below it. The
most specific key wins; they are added over ``--header``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from crawler.errors import ConfigError

REFUSED = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive",
    "proxy-connection", "te", "trailer", "upgrade", "proxy-authorization",
})  # fmt: skip
"""Header names a user may not set: the client writes (or must never write) them."""
SECRET = frozenset({"authorization", "cookie", "proxy-authorization"})
"""Names whose values are credentials: never stored with the run's settings."""
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE = re.compile(r"[\x00\r\n]")


def parse_header(text: str, source: str = "--header") -> tuple[str, str]:
    """``"Name: value"`` as (name, value); ``ConfigError`` naming ``source``."""
    name, colon, value = text.partition(":")
    if not colon:
        raise ConfigError(f'{source} {text[:200]!r}: not "Name: value"')
    return check_header(name.strip(), value.strip(), source)


def check_header(name: str, value: str, source: str = "--header") -> tuple[str, str]:
    """(name, value) when a user may send it; else ``ConfigError`` naming ``source``."""
    if not isinstance(value, str):
        raise ConfigError(f"{source} {name}: the value must be text, got {value!r}")
    if not _TOKEN.fullmatch(name):
        raise ConfigError(f"{source} {name[:200]!r}: not a header name")
    if name.lower() in REFUSED:
        raise ConfigError(
            f"{source} {name}: the crawl's HTTP client sets this header itself "
            "(Host, framing and hop-by-hop headers cannot be given)"
        )
    if _BAD_VALUE.search(value):
        raise ConfigError(f"{source} {name}: a line break or NUL in the value")
    return name, value


def merge(base: Mapping[str, str], extra: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``base`` with ``extra`` over it: a name given replaces ``base``'s of any case; an
    empty value removes it."""
    merged = dict(base)
    for name, value in extra:
        for old in [k for k in merged if k.lower() == name.lower()]:
            del merged[old]
        if value:
            merged[name] = value
    return merged


class HostHeaders:
    """Per-host headers: ``for_host(host)`` gives the headers over the common ones."""

    def __init__(self, table: Iterable[tuple[str, tuple[tuple[str, str], ...]]]) -> None:
        self._exact: dict[str, tuple[tuple[str, str], ...]] = {}
        self._domains: dict[str, tuple[tuple[str, str], ...]] = {}
        for key, pairs in table:
            host = key.strip().lower().rstrip(".")
            if host.startswith("."):
                self._domains[host[1:]] = pairs
            else:
                self._exact[host] = pairs

    def __bool__(self) -> bool:
        return bool(self._exact or self._domains)

    def for_host(self, host: str) -> list[tuple[str, str]]:
        """The headers for ``host`` (lower case): every matching domain key, the least
        specific first, then the host's own."""
        host = host.strip("[]").rstrip(".")
        found: list[tuple[str, str]] = []
        if self._domains:
            labels = host.split(".")
            for start in range(len(labels)):
                pairs = self._domains.get(".".join(labels[start:]))
                if pairs:
                    found[:0] = pairs  # a shorter suffix is less specific: earlier
        found += self._exact.get(host, ())
        return found


def host_table(value: object, source: str) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """A config's ``host-headers`` table (host → {name: value}) checked, as the frozen
    form ``Settings`` keeps."""
    if isinstance(value, tuple):
        items: Iterable[tuple[object, object]] = value
    elif isinstance(value, Mapping):
        items = value.items()
    else:
        raise ConfigError(f"{source}: host-headers must be a table of host = {{name = value}}")
    table = []
    for host, headers in items:
        if not isinstance(host, str) or not host.strip():
            raise ConfigError(f"{source}: host-headers: {host!r} is not a host name")
        if isinstance(headers, tuple):
            pairs = headers
        elif isinstance(headers, Mapping):
            pairs = tuple(headers.items())
        else:
            raise ConfigError(f"{source}: host-headers.{host} must be a table of name = value")
        checked = tuple(check_header(str(n), v, f"{source}: host-headers.{host}") for n, v in pairs)
        table.append((host, checked))
    return tuple(table)


def redacted(name: str, value: str) -> str:
    """``Name: value`` for the run's settings: a credential's value hidden."""
    return f"{name}: ***" if name.lower() in SECRET else f"{name}: {value}"
