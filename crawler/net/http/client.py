"""``HttpClient``: a crawl's HTTP/1.1 connections, their pool, name resolution and TLS.

Owns: connections (at most ``limit`` open, idle ones reused per route, least recently used
closed first, none reused after ``KEEPALIVE_S`` idle), name resolution (through
``GuardedResolver``, answers cached ``DNS_TTL_S``), connecting (RFC 8305 happy eyeballs,
within the connect timeout), proxies (``crawler.net.proxy``) and TLS (verified against the
system's CAs or ``tls``'s, SNI), and what each request carries: the crawl's headers (per
host too), Basic credentials of their own origin or host, cookies (``CookieStore``). Foreign
errors (``OSError``, ``TimeoutError``, ``ssl`` and SOCKS errors) become ``HTTPError``s here.

A route is (scheme, host, port, proxy): a connection serves one. Direct, and through a
SOCKS proxy or an http proxy's ``CONNECT`` tunnel (https targets), a route is one origin;
http targets through an http proxy share one route, ``("http", "", 0, proxy)``: requests in
absolute form on keep-alive connections to the proxy.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING

import aiohappyeyeballs

from crawler.errors import ConnectError, ConnectTimeout, ProxyError, ResolveError
from crawler.net.guard import GuardedResolver, HostAllowed, Resolver
from crawler.net.http.connection import Connection
from crawler.net.http.framing import SECRET_HEADERS, request_head, split_url
from crawler.net.http.response import Response
from crawler.net.http.tunnel import open_tunnel, socks_connect
from parsers.links import strip_userinfo

if TYPE_CHECKING:
    from crawler.net.cookies import CookieStore
    from crawler.net.headers import HostHeaders
    from crawler.net.proxy import Proxy, ProxyRules

Route = tuple[str, str, int, "Proxy | None"]
"""(scheme, host, port, proxy): what a connection is to (the module's docstring)."""

KEEPALIVE_S = 15.0
"""An idle connection older than this is closed instead of reused (aiohttp's default)."""
DNS_TTL_S = 300.0
HAPPY_EYEBALLS_DELAY_S = 0.25
"""A host's next address is tried this long after the previous one (RFC 8305, as aiohttp)."""
_DNS_CACHE_ENTRIES = 4096

READ_BYTES = 256 << 10
"""The most a socket read takes (uvloop's own read size)."""


class HttpClient:
    """A crawl's connections. Use ``async with``; ``get`` makes a request."""

    def __init__(
        self,
        *,
        limit: int,
        connect_timeout: float,
        headers: dict[str, str],
        allowed: HostAllowed,
        tls: Callable[[], ssl.SSLContext] = ssl.create_default_context,
        resolver: Resolver | None = None,
        credentials: Mapping[str, str] | None = None,
        host_credentials: Mapping[str, str] | None = None,
        host_headers: HostHeaders | None = None,
        proxies: ProxyRules | None = None,
        cookies: CookieStore | None = None,
    ) -> None:
        """``resolver``: where names are looked up (the system's by default), always behind
        the SSRF guard; ``tls``: makes the TLS context, on the first https connection;
        ``credentials``: ``user:password`` (percent-encoded, as in a URL) by origin
        (``http://host:port``), sent as Basic ``Authorization`` to that origin only;
        ``host_credentials``: the same by host name (any port and scheme: ``.netrc``);
        ``host_headers``: headers over ``headers`` for some hosts; ``proxies``: which
        proxy each request goes through; ``cookies``: the crawl's cookies, if it keeps any."""
        self.limit = max(1, limit)
        self.connect_timeout = connect_timeout
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"a line break in the {name} header: {value[:200]!r}")
        self._headers = dict(headers)
        self._fixed = _lines(headers)
        self._fixed_pairs = list(headers.items())
        self._host_headers = host_headers or None
        self._host_fixed: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        """``host_headers``' hosts' own (header lines, pairs), made on their first request."""
        self._credentials = {
            split_url(origin + "/")[:3]: userinfo
            for origin, userinfo in (credentials or {}).items()
        }
        self._host_credentials = dict(host_credentials or {})
        self._proxies = proxies or None
        self._cookies = cookies
        self.cookies_set = 0
        """How many responses have set cookies (the Fetcher's redirect-loop check: a chain
        may come back to a URL once a cookie changed, as a login's does)."""
        self._allowed = allowed
        self._resolver = GuardedResolver(allowed, resolver)
        self._make_tls = tls
        self._tls: ssl.SSLContext | None = None
        self._dns: dict[tuple[str, str, int], tuple[float, list[tuple[str, int]]]] = {}
        """Answers by (scheme, host, port): what the guard let through depends on all three."""
        self._proxy_dns: dict[tuple[str, int], tuple[float, list[tuple[str, int]]]] = {}
        """Proxies' addresses (the user's choice: not behind the guard)."""
        self._idle: dict[Route, list[Connection]] = {}
        self._lru: OrderedDict[Connection, None] = OrderedDict()
        self._open: set[Connection] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._read_view = memoryview(bytearray(READ_BYTES))
        """Where the event loop reads any of the connections' sockets (``Connection``)."""
        self._bound: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the client works on, bound at its first use (a closed one is
        replaced): ``asyncio.get_running_loop`` makes a ``getpid`` system call each time,
        a few a request, which cost microseconds each in a VM."""
        loop = self._bound
        if loop is None or loop.is_closed():
            loop = self._bound = asyncio.get_running_loop()
        return loop

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection at once (those in use too), without TLS's closing
        handshake: one through a slow peer or a proxy could outlive the event loop and leave
        its socket to the garbage collector."""
        self._closed = True
        for conn in list(self._open):
            conn.close(abort=True)
        while self._waiters:  # each sees the client closed
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._idle.clear()
        self._lru.clear()
        await self._resolver.close()
        await asyncio.sleep(0)  # let the transports' connection_lost run

    async def get(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        cap: int,
        record: bool = False,
        cut: bool = False,
    ) -> Response:
        """GET ``url`` (absolute, http or https, ASCII as a URL serialiser writes it); return
        when the status and headers are in. The caller must ``release`` the response.
        ``cap``: the most bytes of body to take (more fail it, or with ``cut`` end it there:
        ``Response.truncated``); ``record``: keep the request's headers in
        ``Response.request``."""
        scheme, host, port, authority, target, userinfo = split_url(url)
        if not userinfo:
            if self._credentials:
                userinfo = self._credentials.get((scheme, host, port), "")
            if not userinfo and self._host_credentials:
                userinfo = self._host_credentials.get(host.strip("[]").rstrip("."), "")
        fixed = self._fixed
        if self._host_headers is not None:
            fixed = self._for_host(host)[0]
        cookies = self._cookies
        if cookies is not None:
            cookie = cookies.header(url if not userinfo else strip_userinfo(url))
            if cookie:
                headers = {**headers, "Cookie": cookie} if headers else {"Cookie": cookie}
        proxy = self._proxies.select(scheme, host, port) if self._proxies is not None else None
        key: Route = (scheme, host, port, proxy)
        forward = proxy is not None and scheme == "http" and not proxy.socks
        if forward:  # absolute form, to the proxy, on its shared connections
            assert proxy is not None
            key = ("http", "", 0, proxy)
            target = f"http://{authority}{target}"
            if proxy.authorization:
                fixed += f"Proxy-Authorization: {proxy.authorization}\r\n"
        request = request_head(target, authority, fixed, userinfo, headers)
        for attempt in (0, 1):
            conn, reused = await self._acquire(key, fresh=attempt > 0)
            response = Response(conn, url, cap, cut)
            try:
                await conn.send(request, response)
            except ConnectError:
                conn.close()
                if reused and attempt == 0 and not conn.received:
                    continue  # the server had closed it while idle: once more, on a new one
                raise
            except BaseException:
                conn.close()
                raise
            if forward and response.status == 407:
                response.release()
                assert proxy is not None
                raise ProxyError(f"proxy {proxy.url} refused the request: 407 {response.reason}")
            if cookies is not None and cookies.keep and "set-cookie" in response.headers:
                self.cookies_set += 1
                cookies.update(
                    strip_userinfo(url) if userinfo else url,
                    [v.decode("latin-1") for k, v in response.raw_headers
                     if k.lower() == b"set-cookie"],
                )  # fmt: skip
            if record:
                response.request = self._request_pairs(authority, headers, host)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _for_host(self, host: str) -> tuple[str, list[tuple[str, str]]]:
        """(header lines, pairs) a request to ``host`` sends: the crawl's headers with the
        host's own over them."""
        made = self._host_fixed.get(host)
        if made is None:
            from crawler.net.headers import merge

            assert self._host_headers is not None
            extra = self._host_headers.for_host(host)
            merged = merge(self._headers, extra) if extra else self._headers
            made = (_lines(merged), list(merged.items()))
            if len(self._host_fixed) >= _DNS_CACHE_ENTRIES:
                self._host_fixed.clear()
            self._host_fixed[host] = made
        return made

    def _request_pairs(
        self, authority: str, headers: dict[str, str] | None, host: str
    ) -> list[tuple[str, str]]:
        """The request's headers as recorded (for WARC): all but credentials, which are
        never kept (``Authorization``, ``Proxy-Authorization``, ``Cookie``)."""
        fixed = self._for_host(host)[1] if self._host_headers is not None else self._fixed_pairs
        pairs = [("Host", authority), *fixed]
        if headers:
            pairs += headers.items()
        return [(k, v) for k, v in pairs if k.lower() not in SECRET_HEADERS]

    # the pool
    async def _acquire(self, key: Route, fresh: bool = False) -> tuple[Connection, bool]:
        """An idle connection to ``key``'s origin (reused: True) or, always with ``fresh``, a
        new one."""
        if self._closed:
            raise ConnectError("the client is closed")
        reused = None if fresh else self._take_idle(key)
        if reused is not None:
            return reused, True
        while len(self._open) >= self.limit:
            if self._lru:  # make room: close the least recently used idle connection
                oldest, _ = self._lru.popitem(last=False)
                self._idle[oldest.key].remove(oldest)
                oldest.close()
                continue
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, then cancelled: the room goes to the next
                else:
                    waiter.cancel()
                raise
            if self._closed:
                raise ConnectError("the client is closed")
            reused = None if fresh else self._take_idle(key)
            if reused is not None:
                return reused, True
        conn = Connection(self, key)
        self._open.add(conn)
        try:
            await self._connect(conn)
        except BaseException:
            self._lost(conn)
            raise
        if self._closed:  # closed while this one connected
            conn.close()
            raise ConnectError("the client is closed")
        return conn, False

    def _take_idle(self, key: Route) -> Connection | None:
        """The most recently idle live connection to ``key``'s origin, if any; the stale ones
        found on the way are closed."""
        idle = self._idle.get(key)
        if not idle:
            return None
        now = self.loop().time()
        while idle:
            conn = idle.pop()
            self._lru.pop(conn, None)
            if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                return conn
            conn.close()
        return None

    def _release(self, conn: Connection) -> None:
        if self._closed:
            conn.close()
            return
        conn.idle_since = self.loop().time()
        self._idle.setdefault(conn.key, []).append(conn)
        self._lru[conn] = None
        self._wake_one()

    def _lost(self, conn: Connection) -> None:
        if conn in self._open:
            self._open.discard(conn)
            if self._lru.pop(conn, 0) is None:
                idle = self._idle.get(conn.key)
                if idle and conn in idle:
                    idle.remove(conn)
            self._wake_one()

    def _wake_one(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _connect(self, conn: Connection) -> None:
        """Connect ``conn`` along its route, all within the connect timeout: to one of its
        host's addresses, tried in the resolver's order, the next one started
        ``HAPPY_EYEBALLS_DELAY_S`` after the last (a host whose first address is
        unreachable is still reached); or to its proxy, then through it; then TLS."""
        scheme, host, port, proxy = conn.key
        loop = asyncio.get_running_loop()
        tls = self._context() if scheme == "https" else None
        try:
            async with asyncio.timeout(self.connect_timeout):
                if proxy is None:
                    sock = await self._dial(await self._addresses(scheme, host, port), host, port)
                elif proxy.socks:
                    sock = await self._through_socks(proxy, scheme, host, port)
                else:
                    sock = await self._to_proxy(proxy)
                    if scheme == "https":
                        try:
                            await open_tunnel(sock, proxy, host, port)
                        except BaseException:
                            sock.close()
                            raise
                try:
                    await loop.create_connection(
                        lambda: conn,
                        sock=sock,
                        ssl=tls,
                        # no brackets, no root label's dot: what certificates name
                        server_hostname=host.strip("[]").rstrip(".") if tls is not None else None,
                    )
                except BaseException as exc:
                    sock.close()
                    if isinstance(exc, OSError):  # ssl.SSLError is one too
                        raise ConnectError(_describe(exc, host, port)) from exc
                    raise
        except TimeoutError as exc:
            where = f"{host}:{port}" if proxy is None else f"{host}:{port} through {proxy.url}"
            raise ConnectTimeout(
                f"no connection to {where} within {self.connect_timeout:g} s"
            ) from exc

    @staticmethod
    async def _dial(addresses: list[tuple[str, int]], host: str, port: int) -> socket.socket:
        """A TCP connection to one of ``addresses`` (happy eyeballs)."""
        infos = [
            (family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
             (address, port, 0, 0) if family == socket.AF_INET6 else (address, port))
            for address, family in addresses
        ]  # fmt: skip
        try:
            return await aiohappyeyeballs.start_connection(
                infos, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY_S, interleave=1
            )
        except OSError as exc:
            raise ConnectError(_describe(exc, host, port)) from exc

    async def _to_proxy(self, proxy: Proxy) -> socket.socket:
        """A TCP connection to an http proxy; ``ProxyError`` when there is none."""
        now = asyncio.get_running_loop().time()
        cached = self._proxy_dns.get((proxy.host, proxy.port))
        if cached is not None and cached[0] > now:
            addresses = cached[1]
        else:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    proxy.host, proxy.port, type=socket.SOCK_STREAM
                )
            except OSError as exc:
                raise ProxyError(f"proxy {proxy.url}: cannot resolve {proxy.host}: {exc}") from exc
            addresses = [(str(info[4][0]), int(info[0])) for info in infos]
            self._proxy_dns[(proxy.host, proxy.port)] = (now + DNS_TTL_S, addresses)
        try:
            return await self._dial(addresses, proxy.host, proxy.port)
        except ConnectError as exc:
            raise ProxyError(f"proxy {proxy.url}: {exc}") from exc

    async def _through_socks(self, proxy: Proxy, scheme: str, host: str, port: int
                             ) -> socket.socket:  # fmt: skip
        """A connection to ``host:port`` through a SOCKS proxy. Unless the proxy resolves
        names (``socks5h``, ``socks4a``), the name is resolved here, behind the guard, and
        the proxy is given the address."""
        if proxy.remote_dns:
            return await socks_connect(proxy, host.strip("[]"), port)
        addresses = await self._addresses(scheme, host, port)
        error: BaseException | None = None
        for address, _family in addresses:
            try:
                return await socks_connect(proxy, address, port)
            except ProxyError as exc:
                error = exc
        assert error is not None
        raise error

    async def _addresses(self, scheme: str, host: str, port: int) -> list[tuple[str, int]]:
        """(address, family) to try in order: the literal itself, or the guarded resolver's
        answer (cached)."""
        literal = host.strip("[]")
        try:
            ip = ipaddress.ip_address(literal)
        except ValueError:
            pass
        else:
            return [(literal, socket.AF_INET6 if ip.version == 6 else socket.AF_INET)]
        now = asyncio.get_running_loop().time()
        cached = self._dns.get((scheme, host, port))
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            results = await self._resolver.resolve(host, port, socket.AF_UNSPEC, scheme)
        except UnicodeError as exc:  # a label longer than 63 characters, say
            raise ResolveError(f"cannot resolve {host}: {exc}") from exc
        except OSError as exc:
            if getattr(exc, "reason", None) is not None:  # BlockedAddress
                raise ConnectError(str(exc)) from exc
            raise ResolveError(f"cannot resolve {host}: {exc}") from exc
        addresses = [(result["host"], result["family"]) for result in results]
        if not addresses:
            raise ResolveError(f"cannot resolve {host}: no addresses")
        if len(self._dns) >= _DNS_CACHE_ENTRIES:  # a broad crawl: forget what has expired
            self._dns = {k: v for k, v in self._dns.items() if v[0] > now}
        self._dns[(scheme, host, port)] = (now + DNS_TTL_S, addresses)
        return addresses

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = self._make_tls()
        return self._tls


def _lines(headers: Mapping[str, str]) -> str:
    return "".join(f"{name}: {value}\r\n" for name, value in headers.items())


def _describe(exc: OSError | None, host: str, port: int) -> str:
    if exc is None:
        return f"cannot connect to {host}:{port}"
    return f"cannot connect to {host}:{port}: {exc.strerror or exc}"
