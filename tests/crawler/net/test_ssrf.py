"""crawler.net.guard: address classification, IP-literal parsing, and the resolver in a real session."""

from __future__ import annotations

import asyncio
import pickle
import socket
from collections.abc import Iterator

import ada_url
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from hypothesis import given
from hypothesis import strategies as st

from crawler.net.guard import (
    BlockedAddress,
    GuardedResolver,
    HostAllowed,
    ThreadedResolver,
    allow_all,
    allow_hosts,
    allow_origins,
    blocked_reason,
    canonical_host,
    check_url_host,
    classify_address,
    parse_host_as_ip,
)
from crawler.net.http import ConnectError, HttpClient
from tests.sites import SiteServer, html_handler

# -- classify_address -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("93.184.215.14", None),
        ("2606:4700:4700::1111", None),
        ("2001:4860:4860::8888", None),
        ("127.0.0.1", "loopback"),
        ("127.255.1.2", "loopback"),
        ("::1", "loopback"),
        ("[::1]", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),  # carrier-grade NAT / shared address space
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("169.254.169.254", "metadata"),
        ("169.254.170.2", "metadata"),
        ("100.100.100.200", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("fd20:ce::254", "metadata"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "reserved"),  # TEST-NET-1
        ("198.18.0.1", "reserved"),  # benchmarking
        ("2001:db8::1", "reserved"),  # documentation
        ("not-an-ip", "invalid"),
        ("", "invalid"),
        ("127.1", "invalid"),  # not canonical: parse_host_as_ip first
    ],
)
def test_classify_address(ip: str, reason: str | None) -> None:
    assert classify_address(ip) == reason


@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:7f00:1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:8.8.8.8", None),
        ("::127.0.0.1", "loopback"),  # IPv4-compatible (deprecated)
        ("::8.8.8.8", "reserved"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64
        ("64:ff9b::a9fe:a9fe", "metadata"),
        ("64:ff9b::808:808", None),
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:c0a8:101::1", "private"),  # 6to4 of 192.168.1.1
        ("2002:808:808::1", None),  # 6to4 of 8.8.8.8
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1
    ],
)
def test_classify_embedded_ipv4(ip: str, reason: str | None) -> None:
    assert classify_address(ip) == reason


@given(st.ip_addresses())
def test_classify_never_raises_and_agrees_with_is_global(address: object) -> None:
    reason = classify_address(str(address))
    assert reason is None or isinstance(reason, str)
    if reason is None:  # a public verdict is never given to a non-global address ...
        assert getattr(address, "is_global", False) or _embeds_public_v4(str(address))


def _embeds_public_v4(text: str) -> bool:
    """Mapped / 6to4 / NAT64 addresses of public IPv4 addresses are public too."""
    import ipaddress

    address = ipaddress.ip_address(text)
    assert isinstance(address, ipaddress.IPv6Address)
    v4 = address.ipv4_mapped or address.sixtofour
    if v4 is None and address in ipaddress.IPv6Network("64:ff9b::/96"):
        v4 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return v4 is not None and v4.is_global


# -- parse_host_as_ip -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "ip"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0X7F.0.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1.1", "10.1.0.1"),
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("169.254.43518", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[::FFFF:127.0.0.1]", "::ffff:7f00:1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("fe80::1%eth0", "fe80::1%eth0"),
        ("example.com", None),
        ("localhost", None),
        ("1.2.3.4.5", None),
        ("256.1.1.1", None),
        ("1.2.3.256", None),
        ("1.2.65536", None),
        ("4294967296", None),
        ("09.1.1.1", None),
        ("1.2.3.4..", None),
        ("", None),
        ("1e3", None),
        ("0x1g", None),
        ("١٢٧.0.0.1", None),  # non-ASCII digits
        ("[not:ipv6]", None),
        ("1_0.0.0.1", None),
    ],
)
def test_parse_host_as_ip(host: str, ip: str | None) -> None:
    assert parse_host_as_ip(host) == ip


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x7f.0.0.1.", "0xa9.0376.43518", "3232235777"],
)
def test_parse_host_as_ip_agrees_with_ada(host: str) -> None:
    """ada (WHATWG) normalises these to dotted decimal; we parse them to the same address."""
    assert parse_host_as_ip(host) == ada_url.URL(f"http://{host}/").hostname


@given(st.integers(0, 2**32 - 1), st.sampled_from(["{}", "{:#x}", "0{:o}"]))
def test_parse_host_as_ip_integer_forms(value: int, form: str) -> None:
    host = form.format(value)
    assert parse_host_as_ip(host) == ada_url.URL(f"http://{host}/").hostname


@given(st.ip_addresses(v=4))
def test_parse_host_as_ip_round_trips_dotted(address: object) -> None:
    assert parse_host_as_ip(str(address)) == str(address)
    assert socket.inet_aton(str(address)) == socket.inet_aton(parse_host_as_ip(str(address)) or "")


# -- check_url_host ---------------------------------------------------------------------------

NOBODY = allow_hosts(())


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/", "loopback"),
        ("http://2130706433/", "loopback"),  # ada normalises these itself ...
        ("http://0x7f.1/", "loopback"),
        ("http://0177.0.0.1/x", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("https://10.0.0.1/", "private"),
        ("http://0.0.0.0:80/", "unspecified"),
        ("http://8.8.8.8/", None),
        ("http://example.com/", None),  # names are the resolver's job
        ("http://localhost/", None),
        ("not a url", "invalid"),
    ],
)
def test_check_url_host(url: str, reason: str | None) -> None:
    assert check_url_host(url, NOBODY) == reason


def test_check_url_host_allowed_hosts() -> None:
    allowed = allow_hosts(["127.0.0.1", "[::1]", "Example.COM."])
    assert check_url_host("http://127.0.0.1:9/", allowed) is None
    assert check_url_host("http://2130706433/", allowed) is None
    assert check_url_host("http://[::1]:9/", allowed) is None
    assert check_url_host("http://127.0.0.2/", allowed) == "loopback"
    assert allowed("http", canonical_host("EXAMPLE.com."), 80)
    assert check_url_host("http://10.0.0.1/", allow_all) is None


def test_canonical_host() -> None:
    assert canonical_host("[::1]") == "::1"
    assert canonical_host("WWW.Example.com.") == "www.example.com"
    assert canonical_host(".") == "."


# -- BlockedAddress ---------------------------------------------------------------------------


def test_blocked_address_is_an_oserror_that_pickles() -> None:
    exc = BlockedAddress("evil.test", "loopback", "127.0.0.1")
    assert isinstance(exc, OSError)
    assert "loopback" in str(exc) and "127.0.0.1" in str(exc)
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.host, copy.reason, copy.address) == ("evil.test", "loopback", "127.0.0.1")


def test_blocked_reason_walks_the_chain() -> None:
    try:
        try:
            raise BlockedAddress("h", "private", "10.0.0.1")
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert blocked_reason(outer) == "private"
    assert blocked_reason(ValueError("x")) is None


# -- GuardedResolver --------------------------------------------------------------------------


class FixedResolver(AbstractResolver):
    """Answers every name with fixed addresses (stands for a DNS server under test)."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(hostname=host, host=a, port=port, family=socket.AF_INET6 if ":" in a
                          else socket.AF_INET, proto=0, flags=socket.AI_NUMERICHOST)
            for a in self.addresses
        ]  # fmt: skip

    async def close(self) -> None:
        pass


def resolve(resolver: GuardedResolver, host: str) -> list[str]:
    async def go() -> list[str]:
        return [r["host"] for r in await resolver.resolve(host, 80, socket.AF_UNSPEC)]

    return asyncio.run(go())


def test_resolver_drops_private_addresses_from_mixed_answers() -> None:
    inner = FixedResolver("93.184.215.14", "127.0.0.1", "::ffff:10.0.0.1", "2606:2800::1")
    assert resolve(GuardedResolver(NOBODY, inner), "rebind.test") == [
        "93.184.215.14",
        "2606:2800::1",
    ]


def test_resolver_refuses_when_nothing_public_remains() -> None:
    resolver = GuardedResolver(NOBODY, FixedResolver("169.254.169.254", "10.0.0.1"))
    with pytest.raises(BlockedAddress) as info:
        resolve(resolver, "metadata.test")
    assert info.value.reason == "metadata" and info.value.host == "metadata.test"


def test_resolver_passes_allowed_hosts_unfiltered() -> None:
    resolver = GuardedResolver(allow_hosts(["intranet.test"]), FixedResolver("10.0.0.1"))
    assert resolve(resolver, "INTRANET.test.") == ["10.0.0.1"]


def test_resolver_passes_empty_answers_through() -> None:
    assert resolve(GuardedResolver(NOBODY, FixedResolver()), "nothing.test") == []


def test_threaded_resolver_answers_as_aiohttps_did() -> None:
    """The system's resolver, without aiohttp: numeric addresses, the port, the family."""
    answers = asyncio.run(ThreadedResolver().resolve("localhost", 8080, socket.AF_INET))
    assert answers and all(
        (a["hostname"], a["port"], a["family"]) == ("localhost", 8080, socket.AF_INET)
        for a in answers
    )
    assert "127.0.0.1" in {a["host"] for a in answers}
    with pytest.raises(OSError):
        asyncio.run(ThreadedResolver().resolve("no such host name", 80))


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer({"/": html_handler("<title>local</title>")}) as site:
        yield site


async def _get(url: str, allowed: HostAllowed) -> int:
    """One GET with the crawl's own client (``crawler.net.http``), guarded by ``allowed``."""
    async with HttpClient(limit=1, connect_timeout=5, headers={}, allowed=allowed) as client:
        response = await client.get(url, cap=1 << 20)
        try:
            await response.read()
            return response.status
        finally:
            response.release()


def test_real_session_blocks_a_name_resolving_to_loopback(server: SiteServer) -> None:
    hits = len(server.hits)
    with pytest.raises(ConnectError) as info:
        asyncio.run(_get(f"http://localhost:{server.port}/", NOBODY))
    assert blocked_reason(info.value) == "loopback"
    assert isinstance(info.value.__cause__, BlockedAddress)
    assert len(server.hits) == hits  # the request never reached the server


def test_real_session_fetches_an_allowed_name(server: SiteServer) -> None:
    assert asyncio.run(_get(f"http://localhost:{server.port}/", allow_hosts(["localhost"]))) == 200


def test_real_session_blocks_the_hex_form_via_the_resolver(server: SiteServer) -> None:
    """``0x7f.1`` is not an IP literal to the client: it is resolved, and getaddrinfo yields
    127.0.0.1, which the resolver refuses."""
    with pytest.raises(ConnectError) as info:
        asyncio.run(_get(f"http://0x7f.1:{server.port}/", NOBODY))
    assert blocked_reason(info.value) == "loopback"


def test_literal_ips_bypass_the_resolver_so_check_url_host_is_needed(server: SiteServer) -> None:
    """The client does not resolve IP literals (nor did aiohttp's): this is why the engine
    must call ``check_url_host`` for each request and redirect hop."""
    url = f"http://127.0.0.1:{server.port}/"
    assert asyncio.run(_get(url, NOBODY)) == 200
    assert check_url_host(url, NOBODY) == "loopback"
    assert check_url_host(url, allow_hosts(["127.0.0.1"])) is None


@given(st.ip_addresses(v=6))
def test_ipv6_literals_read_as_ada_writes_them(address: object) -> None:
    """The canonical IPv6 form is WHATWG's on every Python (3.13's ``str`` writes
    IPv4-mapped addresses with an IPv4 part)."""
    written = ada_url.URL(f"http://[{address}]/").hostname
    assert f"[{parse_host_as_ip(f'[{address}]')}]" == written


def test_seed_origins_exempt_their_own_port_and_scheme_only() -> None:
    """A seed on a private address exempts that server (scheme, host, port), not every port
    of its host: a redirect or link to another port of 127.0.0.1 is guarded like any."""
    allowed = allow_origins(["http://127.0.0.1:8080/start", "https://[::1]/", "http://Intra.test/"])
    assert check_url_host("http://127.0.0.1:8080/other", allowed) is None
    assert check_url_host("http://127.0.0.1:8081/", allowed) == "loopback"
    assert check_url_host("https://127.0.0.1:8080/", allowed) == "loopback"
    assert check_url_host("https://[::1]:443/x", allowed) is None
    assert check_url_host("http://[::1]/", allowed) == "loopback"
    assert allowed("http", canonical_host("INTRA.test."), 80)
    assert not allowed("http", "intra.test", 8080)


def test_resolver_exempts_a_seed_origin_not_its_other_ports() -> None:
    allowed = allow_origins(["http://intranet.test:8080/"])
    resolver = GuardedResolver(allowed, FixedResolver("10.0.0.1"))
    answers = asyncio.run(resolver.resolve("intranet.test", 8080, socket.AF_INET, "http"))
    assert [a["host"] for a in answers] == ["10.0.0.1"]
    with pytest.raises(BlockedAddress):
        asyncio.run(resolver.resolve("intranet.test", 9090, socket.AF_INET, "http"))
