"""SSRF guard: the crawler never connects to private, loopback or cloud-metadata addresses.

Owns: the decision "may the crawler open a TCP connection to this IP address?" and its two
enforcement points.

1. ``GuardedResolver``, a resolver (aiohttp's interface) around the system's ``getaddrinfo``.
   Every host *name* the crawl's HTTP client (``crawler.net.http``) connects to goes through it;
   it drops the addresses ``classify_address`` flags and raises ``BlockedAddress`` when none
   remain. The client connects to exactly the addresses the resolver returned (and its DNS
   cache holds only what the resolver returned), so the check and the connection use the
   same answer: DNS rebinding between check and connect is impossible.
2. ``check_url_host(url, allowed)``, for hosts that are IP literals. The client connects to
   an IP literal directly (``http://127.0.0.1/``, ``http://[::1]/`` never reach
   ``GuardedResolver``), so the engine must call ``check_url_host`` before every request *and
   every redirect hop*. (Forms like ``0x7f.1`` are not literals to the client: they go
   through the resolver, where ``getaddrinfo`` turns them into ``127.0.0.1``, which is then
   refused.)

Invariants:
- ``classify_address`` fails closed: anything that is not a public unicast address, including
  strings that are not addresses at all, gets a reason word;
- an IPv6 address that embeds an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
  ``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo ``2001::/32``) is refused
  when the embedded IPv4 address would be;
- origins exempted by ``allowed`` (the seeds' origins, scheme, host and port; or all with an
  "allow private" setting) are compared in one canonical form (``canonical_host``, the
  scheme's default port filled in) at both enforcement points: a seed on a private address
  exempts that one server, not every port of its host.

Through a proxy (``crawler.net.proxy``): IP-literal targets are checked as ever (point 2, in
the engine); ``socks5://`` and ``socks4://`` targets' names are resolved here, through
``GuardedResolver``, and the proxy is given the address: fully covered. An http proxy, and
``socks5h://`` / ``socks4a://``, resolve target names themselves: the guard cannot see the
address a name leads to there, and does not try (a lookup here could disagree with the
proxy's, or fail where only the proxy can resolve). The proxy's own address is the user's
choice and is not checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable
from typing import Protocol, TypedDict

import ada_url

from crawler.errors import BlockedAddress

__all__ = [
    "BlockedAddress",
    "GuardedResolver",
    "HostAllowed",
    "ResolveResult",
    "Resolver",
    "ThreadedResolver",
    "allow_all",
    "allow_hosts",
    "allow_origins",
    "blocked_reason",
    "canonical_host",
    "check_url_host",
    "classify_address",
    "parse_host_as_ip",
]

log = logging.getLogger(__name__)

HostAllowed = Callable[[str, str, int], bool]
"""Given a request's scheme (lower case), canonical host (``canonical_host``) and port, whether
it is exempt from the guard."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


class ResolveResult(TypedDict):
    """One address of a host (the keys of aiohttp's resolvers' answers, so either fits)."""

    hostname: str
    host: str
    port: int
    family: int
    proto: int
    flags: int


class Resolver(Protocol):
    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]: ...

    async def close(self) -> None: ...


class ThreadedResolver:
    """The system's resolver: ``getaddrinfo`` off the event loop (the loop's executor; with
    uvloop, libuv's thread pool), as aiohttp's default resolver does it, without importing
    aiohttp (a large import: it would lengthen every crawl's start)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, family=family, flags=socket.AI_ADDRCONFIG
        )
        results: list[ResolveResult] = []
        for found, _, proto, _, address in infos:
            if found == socket.AF_INET6:
                if len(address) < 3:
                    continue  # an IPv6 address this Python cannot use
                if address[3]:  # a scope id: let getnameinfo write it (fe80::1%eth0)
                    ip, _ = socket.getnameinfo(address[:4], socket.NI_NUMERICHOST)  # type: ignore[arg-type]
                else:
                    ip = str(address[0])
            elif found == socket.AF_INET:
                ip = str(address[0])
            else:
                continue
            results.append(
                ResolveResult(
                    hostname=host, host=ip, port=int(address[1]), family=found, proto=proto,
                    flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                )
            )  # fmt: skip
        return results

    async def close(self) -> None:
        pass


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle instance metadata
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS VPC DNS
        "169.254.169.123",  # AWS time sync
        "100.100.100.200",  # Alibaba Cloud metadata
        "192.0.0.192",  # Oracle Cloud (classic) metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS time sync over IPv6
        "fd20:ce::254",  # GCP metadata over IPv6
    )
)

_V4_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")  # 0.x.y.z reaches this host on Linux
_V4_PRIVATE = tuple(
    ipaddress.IPv4Network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")  # + CGNAT
)
_V6_PRIVATE = (ipaddress.IPv6Network("fc00::/7"), ipaddress.IPv6Network("fec0::/10"))
_V6_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_V6_COMPAT = ipaddress.IPv6Network("::/96")


def classify_address(ip: str) -> str | None:
    """``None`` for a public unicast IP address, else why the crawler must not connect to it.

    Reasons: ``metadata``, ``unspecified``, ``loopback``, ``link-local``, ``multicast``,
    ``private``, ``reserved``, and ``invalid`` for a string that is not an IP address (fail
    closed). Accepts IPv6 with brackets or a zone (``[fe80::1]``, ``fe80::1%eth0``).

    >>> classify_address("8.8.8.8") is None, classify_address("::ffff:127.0.0.1")
    (True, 'loopback')
    """
    text = ip.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.partition("%")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return "invalid"
    if isinstance(address, ipaddress.IPv4Address):
        return _classify_v4(address)
    return _classify_v6(address)


def _classify_v4(address: ipaddress.IPv4Address) -> str | None:
    if address in METADATA_ADDRESSES:
        return "metadata"
    if address in _V4_THIS_NETWORK:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if any(address in network for network in _V4_PRIVATE):
        return "private"
    if address.is_reserved or not address.is_global:
        return "reserved"  # documentation, benchmarking, 240/4, broadcast, IETF ranges
    return None


def _classify_v6(address: ipaddress.IPv6Address) -> str | None:
    if address in METADATA_ADDRESSES:
        return "metadata"
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    embedded = _embedded_v4(address)
    if embedded is not None:
        reason = _classify_v4(embedded)
        if reason is not None:
            return reason
        if address in _V6_COMPAT:
            return "reserved"  # IPv4-compatible addresses are not routed any more
        if address.teredo is None:
            return None  # a public IPv4 address, mapped, behind a 6to4 relay or NAT64
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if any(address in network for network in _V6_PRIVATE):
        return "private"
    if address.is_reserved or not address.is_global:
        return "reserved"
    return None


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it embeds one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _V6_COMPAT or address in _V6_NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # the client's address (Python undoes the obfuscation)
    return None


def parse_host_as_ip(host: str) -> str | None:
    """The canonical IP address a host stands for if it is an IP literal, else ``None``.

    Accepts every IPv4 form the WHATWG URL standard and ``inet_aton`` accept: dotted decimal,
    one to four parts, each decimal, octal (leading ``0``) or hex (``0x``), the last part filling
    the remaining bytes (``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1``), with at most one
    trailing dot; and IPv6, bracketed or not (the canonical form is compressed, unbracketed).

    >>> parse_host_as_ip("0x7f.1"), parse_host_as_ip("[::FFFF:127.0.0.1]")
    ('127.0.0.1', '::ffff:7f00:1')
    >>> parse_host_as_ip("example.com") is None
    True
    """
    if ":" in host:
        text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        text, _, zone = text.partition("%")
        try:
            address = ipaddress.IPv6Address(text)
        except ValueError:
            return None
        canonical = _ipv6_text(address)
        return f"{canonical}%{zone}" if zone else canonical
    return _parse_ipv4(host)


def _ipv6_text(address: ipaddress.IPv6Address) -> str:
    """The WHATWG serialisation of an IPv6 address, as ada writes it (compressed hex, never
    an embedded IPv4 part). ``str(address)`` gives this before Python 3.13 only; 3.13 writes
    IPv4-mapped addresses as ``::ffff:127.0.0.1``."""
    return ada_url.URL(f"http://[{address}]/").hostname[1:-1]


def _parse_ipv4(host: str) -> str | None:
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()  # one trailing dot is allowed
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        number = _parse_ipv4_number(part)
        if number is None:
            return None
        numbers.append(number)
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return str(ipaddress.IPv4Address(value))


def _parse_ipv4_number(part: str) -> int | None:
    """One part of an IPv4 literal (WHATWG "IPv4 number parser"); ``None`` if not a number."""
    if not part or not part.isascii():
        return None
    base = 10
    if part[:2] in ("0x", "0X"):
        part, base = part[2:], 16
        if not part:
            return 0
    elif len(part) > 1 and part[0] == "0":
        part, base = part[1:], 8
    try:
        return int(part, base) if part.isalnum() else None
    except ValueError:
        return None


def canonical_host(host: str) -> str:
    """The form hosts are compared in: lower case, no IPv6 brackets, no trailing dot."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host[:-1] if host.endswith(".") and len(host) > 1 else host


def allow_hosts(hosts: Iterable[str]) -> HostAllowed:
    """A ``HostAllowed`` exempting ``hosts`` (names or literals, any case or form) on every
    scheme and port. A crawl exempts its seeds' origins instead (``allow_origins``)."""
    names = frozenset(canonical_host(host) for host in hosts)

    def allowed(scheme: str, host: str, port: int) -> bool:
        return host in names

    return allowed


def allow_origins(urls: Iterable[str]) -> HostAllowed:
    """A ``HostAllowed`` exempting exactly the origins of ``urls`` (absolute http(s) URLs):
    the seeds', to let a crawl of ``http://localhost:8080/`` work. Other ports and schemes of
    the same host are guarded like any address."""
    origins = frozenset(key for key in map(origin_key, urls) if key is not None)

    def allowed(scheme: str, host: str, port: int) -> bool:
        return (scheme, host, port) in origins

    return allowed


def allow_all(scheme: str, host: str, port: int) -> bool:
    """The ``HostAllowed`` of a crawl with the guard off (``--allow-private``)."""
    return True


def origin_key(url: str) -> tuple[str, str, int] | None:
    """(scheme, canonical host, port) of an absolute http(s) URL, the port filled in when it is
    the scheme's default; ``None`` for anything else."""
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        return None
    scheme = parsed.protocol[:-1]
    default = _DEFAULT_PORTS.get(scheme)
    if default is None:
        return None
    return scheme, canonical_host(parsed.hostname), int(parsed.port) if parsed.port else default


def check_url_host(url: str, allowed: HostAllowed) -> str | None:
    """``None`` if a request to ``url`` may go ahead as far as IP literals go, else the reason.

    Only hosts that are IP literals are judged here (host names are judged by
    ``GuardedResolver`` at connection time). Returns ``"invalid"`` for a URL ada cannot parse.
    Call it before every request and every redirect hop.

    >>> check_url_host("http://[::ffff:7f00:1]/", allow_hosts(()))
    'loopback'
    """
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        return "invalid"
    hostname = parsed.hostname
    address = parse_host_as_ip(hostname)
    if address is None:
        return None
    scheme = parsed.protocol[:-1]
    port = int(parsed.port) if parsed.port else _DEFAULT_PORTS.get(scheme, 0)
    if allowed(scheme, canonical_host(hostname), port):
        return None
    return classify_address(address)


def blocked_reason(exc: BaseException) -> str | None:
    """The reason of a ``BlockedAddress`` in ``exc``'s cause/context chain, else ``None``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BlockedAddress):
            return current.reason
        seen.add(id(current))
        os_error = getattr(current, "os_error", None)  # as aiohttp's connector errors hold it
        if isinstance(os_error, BlockedAddress):
            return os_error.reason
        current = current.__cause__ or current.__context__
    return None


class GuardedResolver:
    """A resolver that never returns an address ``classify_address`` flags.

    Wraps ``inner`` (``ThreadedResolver`` when not given; any object with aiohttp's resolver
    interface fits). Origins for which ``allowed(scheme, canonical_host(host), port)`` is true
    are resolved unfiltered (``scheme``: the request's, ``""`` when the caller has none). Mixed answers keep only their public addresses; an answer with none left raises
    ``BlockedAddress``. ``crawler.net.http.HttpClient`` makes one from its ``allowed``.
    """

    def __init__(self, allowed: HostAllowed, inner: Resolver | None = None) -> None:
        self._allowed = allowed
        self._inner = inner
        self._owns_inner = inner is None

    async def resolve(
        self,
        host: str,
        port: int = 0,
        family: socket.AddressFamily = socket.AF_INET,
        scheme: str = "",
    ) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = ThreadedResolver()
        results = await self._inner.resolve(host, port, family)
        if not results or self._allowed(scheme, canonical_host(host), port):
            return results
        kept: list[ResolveResult] = []
        refused: tuple[str, str] | None = None
        for result in results:
            reason = classify_address(result["host"])
            if reason is None:
                kept.append(result)
            else:
                refused = refused or (reason, result["host"])
                log.debug("%s: dropped %s address %s", host, reason, result["host"])
        if not kept:
            reason, address = refused or ("invalid", "none")
            raise BlockedAddress(host, reason, address)
        return kept

    async def close(self) -> None:
        if self._owns_inner and self._inner is not None:
            await self._inner.close()
