"""Which proxy a request goes through: ``--proxy``, the environment as curl and Python read
it, and ``NO_PROXY``. No IO: the HTTP client (``crawler.net.http.client``) connects.

Sources, first that applies: ``--proxy URL`` (every scheme), else ``http_proxy`` /
``HTTP_PROXY`` for http targets and ``https_proxy`` / ``HTTPS_PROXY`` for https ones, else
``all_proxy`` / ``ALL_PROXY``; lower case first (as Python's ``urllib.request.getproxies``
and curl). Upper-case ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD`` is set: under CGI a
request's ``Proxy:`` header arrives as that variable ("httpoxy"). ``--no-proxy LIST``, else
``no_proxy`` / ``NO_PROXY``, names the hosts reached directly:

- ``*`` alone: every host;
- a name (a leading dot, or ``*.``, is ignored): that host and every host below it
  (``example.com`` covers ``www.example.com``, not ``badexample.com``);
- an IP address, or a range in CIDR form (``10.0.0.0/8``, ``fd00::/8``): targets written as
  such an address (no name is resolved to decide);
- any of those followed by ``:port``: only that port.

Proxy URLs: ``http://`` (targets in absolute form, https ones through ``CONNECT``),
``socks5://`` and ``socks4://`` (the crawl resolves the target's name, behind the SSRF
guard), ``socks5h://`` and ``socks4a://`` (the proxy resolves it). No scheme means
``http://``, no port 1080 (both as curl). ``user:password@`` in it becomes
``Proxy-Authorization: Basic`` (SOCKS: the protocol's own login); ``Proxy.url``, what is
logged and stored, never holds it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from crawler.errors import ConfigError

PROXY_SCHEMES = ("http", "socks5", "socks5h", "socks4", "socks4a")
DEFAULT_PROXY_PORT = 1080
"""A proxy URL's port when it names none (curl's default)."""
_IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Proxy:
    """One proxy. ``url`` is safe to show (no credentials); ``username`` / ``password``
    are decoded."""

    scheme: str
    host: str
    port: int
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def socks(self) -> bool:
        return self.scheme != "http"

    @property
    def remote_dns(self) -> bool:
        """The proxy, not the crawl, resolves target names (``socks5h``, ``socks4a``)."""
        return self.scheme in ("socks5h", "socks4a")

    @property
    def authorization(self) -> str:
        """``Proxy-Authorization``'s value (``""`` without credentials)."""
        if not self.username and not self.password:
            return ""
        from crawler.net.http.framing import basic_auth  # the client's package: when used

        return basic_auth(f"{_quote(self.username)}:{_quote(self.password)}")

    def __str__(self) -> str:
        return self.url


def _quote(text: str) -> str:
    return text.replace("%", "%25").replace(":", "%3A")


def parse_proxy(url: str, source: str = "--proxy") -> Proxy:
    """``url`` as a ``Proxy``; ``ConfigError`` naming ``source`` when it is not one."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{source}: not a proxy URL: {_safe(url)} ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme == "https":
        raise ConfigError(
            f"{source}: {_safe(url)}: HTTPS proxies (TLS to the proxy) are not supported; "
            "use an http:// or socks5:// proxy (https targets still go through CONNECT, "
            "TLS end to end)"
        )
    if scheme not in PROXY_SCHEMES:
        raise ConfigError(
            f"{source}: {_safe(url)}: unknown proxy scheme {scheme!r} "
            f"(one of {', '.join(PROXY_SCHEMES)})"
        )
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ConfigError(f"{source}: {_safe(url)}: no proxy host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{source}: {_safe(url)}: a proxy URL has no path or query")
    return Proxy(
        scheme, host, port or DEFAULT_PROXY_PORT,
        unquote(parts.username or ""), unquote(parts.password or ""),
    )  # fmt: skip


def _safe(url: str) -> str:
    """``url`` without its credentials, for a message."""
    scheme, sep, rest = url.strip().rpartition("://")
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{tail}"[:200]


@dataclass(frozen=True, slots=True)
class _Exemption:
    """One ``NO_PROXY`` entry."""

    name: str = ""
    """A host name: it and the hosts below it."""
    network: _IPNetwork | None = None
    port: int | None = None

    def covers(self, host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
               port: int) -> bool:  # fmt: skip
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address is not None and address in self.network
        return host == self.name or host.endswith("." + self.name)


class NoProxy:
    """The hosts reached without a proxy (see the module's docstring for the syntax)."""

    def __init__(self, text: str, source: str = "--no-proxy") -> None:
        self.everything = False
        self._entries: list[_Exemption] = []
        for raw in text.replace(",", " ").split():
            entry = raw.strip().lower()
            if entry == "*":
                self.everything = True
                continue
            self._entries.append(_exemption(entry, raw, source))

    def __bool__(self) -> bool:
        return self.everything or bool(self._entries)

    def covers(self, host: str, port: int) -> bool:
        """Whether ``host`` (as a URL writes it: lower case, IPv6 in brackets) on ``port``
        is reached directly."""
        if self.everything:
            return True
        if not self._entries:
            return False
        bare = host.strip("[]").rstrip(".")
        try:
            address = ipaddress.ip_address(bare)
        except ValueError:
            address = None
        return any(entry.covers(bare, address, port) for entry in self._entries)


def _exemption(entry: str, raw: str, source: str) -> _Exemption:
    port: int | None = None
    if entry.startswith("["):  # [::1] or [::1]:8080
        close = entry.find("]")
        if close < 0:
            raise ConfigError(f"{source}: {raw!r}: unclosed [")
        tail = entry[close + 1 :]
        if tail:
            port = _port(tail.removeprefix(":"), raw, source)
        entry = entry[1:close]
    elif entry.count(":") == 1:  # a name or IPv4 with a port (IPv6 has several colons)
        entry, _, digits = entry.partition(":")
        port = _port(digits, raw, source)
    if "/" in entry or _is_address(entry):
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError as exc:
            raise ConfigError(f"{source}: {raw!r}: not an address range ({exc})") from None
        return _Exemption(network=network, port=port)
    name = entry.removeprefix("*").lstrip(".").rstrip(".")
    if not name:
        raise ConfigError(f"{source}: {raw!r}: no host name")
    return _Exemption(name=name, port=port)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _port(digits: str, raw: str, source: str) -> int:
    if not (digits.isascii() and digits.isdigit()) or not 0 < int(digits) < 65536:
        raise ConfigError(f"{source}: {raw!r}: bad port")
    return int(digits)


class ProxyRules:
    """Which proxy, if any, each request goes through."""

    def __init__(self, by_scheme: Mapping[str, Proxy], no_proxy: NoProxy) -> None:
        self._by_scheme = dict(by_scheme)
        self._no_proxy = no_proxy

    def __bool__(self) -> bool:
        return bool(self._by_scheme) and not self._no_proxy.everything

    def select(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy for a request to ``scheme://host:port``; ``None``: connect directly."""
        proxy = self._by_scheme.get(scheme)
        if proxy is None or self._no_proxy.covers(host, port):
            return None
        return proxy

    def describe(self) -> str:
        """For the log: which proxy each scheme uses (no credentials)."""
        return ", ".join(f"{scheme} via {proxy.url}" for scheme, proxy in self._by_scheme.items())

    @classmethod
    def from_settings(
        cls, proxy: str | None, no_proxy: str | None, environ: Mapping[str, str]
    ) -> ProxyRules:
        """The rules of ``--proxy`` / ``--no-proxy`` (``None``: not given) and ``environ``."""
        by_scheme: dict[str, Proxy] = {}
        if proxy:
            chosen = parse_proxy(proxy, "--proxy")
            by_scheme = {"http": chosen, "https": chosen}
        else:
            every = _variable(environ, "all_proxy")
            for scheme in ("http", "https"):
                found = _variable(environ, f"{scheme}_proxy") or every
                if found is not None:
                    name, value = found
                    by_scheme[scheme] = parse_proxy(value, name)
        if no_proxy is not None:
            exempt = NoProxy(no_proxy, "--no-proxy")
        else:
            found = _variable(environ, "no_proxy")
            exempt = NoProxy(found[1], found[0]) if found else NoProxy("")
        return cls(by_scheme, exempt)


def _variable(environ: Mapping[str, str], lower: str) -> tuple[str, str] | None:
    """(the variable's name, its value) of ``lower`` or its upper-case form, if set and not
    empty."""
    names = [lower, lower.upper()]
    if lower == "http_proxy" and "REQUEST_METHOD" in environ:
        names.pop()  # httpoxy
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None
