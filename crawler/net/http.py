"""HTTP/1.1 client for the crawl: GET over pooled keep-alive connections, responses parsed by
llhttp (``httptools``), each body collected, capped, as it arrives.

Owns: connections (one pool per crawl: at most ``limit`` open, idle ones reused per origin,
least recently used closed first, none reused after ``KEEPALIVE_S`` idle), name resolution
(through ``GuardedResolver``, answers cached ``DNS_TTL_S``), TLS (verified against the
system's CAs, SNI), request bytes and response framing (Content-Length, chunked, or until
the connection closes). The Fetcher (``crawler.net.fetch``) does the rest: redirects, deadlines,
decoding, types, error mapping.

Why not aiohttp's client: in a fetch-only loop over the benchmark site it costs 110-170 us of
CPU a request here, this one ~25 us (the same uvloop transports, llhttp as aiohttp's own
parser): a crawl's event loop spent a third of its time in aiohttp's request path.

Invariants:
- a ``Response`` is complete only when its framing says so (or, unframed, at the close);
  a connection that ends early fails the response with ``IncompleteBody``;
- a connection goes back to the pool only after a complete response that allows keep-alive;
  a cancelled or failed request closes its connection;
- a reused connection that the server had closed, found out before any byte of the
  response arrived, is replaced and the request sent once more (a GET is idempotent);
- the raw body never grows past the request's cap (the connection is closed instead).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import re
import socket
import ssl
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from types import TracebackType
from urllib.parse import unquote

import aiohappyeyeballs
import httptools

from crawler.net.guard import GuardedResolver, HostAllowed, Resolver

KEEPALIVE_S = 15.0
"""An idle connection older than this is closed instead of reused (aiohttp's default)."""
DNS_TTL_S = 300.0
MAX_HEADER_BYTES = 64 * 1024
"""The most bytes a response may send without a byte of body: its status line and headers,
interim responses, chunk framing, trailers (a server could otherwise send them forever)."""
HAPPY_EYEBALLS_DELAY_S = 0.25
"""A host's next address is tried this long after the previous one (RFC 8305, as aiohttp)."""
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Request headers never recorded (``record=True``): they hold credentials."""
_DNS_CACHE_ENTRIES = 4096
_DEFAULT_PORTS = {"http": 80, "https": 443}
_BAD_CHARACTER = re.compile(r"[\x00-\x20\x7f]")
"""What a request target or Host must not hold (controls, space: they would split the request)."""


class HTTPError(Exception):
    """A request failed; the subclasses say how."""


class ConnectError(HTTPError):
    """No connection (refused, reset, unreachable, TLS failure); ``__cause__`` is the OS's."""


class ResolveError(ConnectError):
    """The host name did not resolve."""


class ConnectTimeout(HTTPError, TimeoutError):
    """No connection within the connect timeout."""


class ProtocolError(HTTPError):
    """A malformed request (bad URL) or response (not HTTP, headers too large ...)."""


class IncompleteBody(ProtocolError):
    """The connection ended before the response's framing said it was complete."""


class BodyTooLarge(HTTPError):
    """The body grew past the request's cap; ``limit`` is that cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"body exceeds {limit} bytes")
        self.limit = limit


class Response:
    """Status, headers and (once complete) body of one response.

    ``headers``: lower-case names, each to its first value (as aiohttp's ``get``); ``getall``
    and ``raw_headers``: every header as received, in order. Trailers are not kept. Call ``read`` for the body, then ``release`` (always: it
    returns the connection to the pool or closes it).
    """

    __slots__ = (
        "_body_waiter",
        "_chunks",
        "_conn",
        "_size",
        "cap",
        "complete",
        "error",
        "final",
        "header_bytes",
        "headers",
        "raw_headers",
        "reason",
        "request",
        "status",
        "url",
        "version",
    )

    def __init__(self, conn: _Connection, url: str, cap: int) -> None:
        self._conn: _Connection | None = conn
        self.url = url
        self.cap = cap
        self.status = 0
        self.reason = ""
        self.version = "1.1"
        self.headers: dict[str, str] = {}
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.request: list[tuple[str, str]] = []
        """The request's headers as sent (filled in only for ``HttpClient.get(record=True)``)."""
        self.header_bytes = 0
        self.complete = False
        self.final = False
        """The final response's headers are in (not an interim 1xx's)."""
        self.error: BaseException | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._body_waiter: asyncio.Future[None] | None = None

    def getall(self, name: str) -> list[str]:
        """Every value of header ``name`` (case-insensitive), in order."""
        wanted = name.lower().encode("latin-1")
        return [_text(v) for k, v in self.raw_headers if k.lower() == wanted]

    @property
    def content_type(self) -> str:
        """The media type, lower-case, without parameters; ``""`` when none was sent."""
        value = self.headers.get("content-type")
        return value.partition(";")[0].strip().lower() if value else ""

    @property
    def charset(self) -> str | None:
        """The Content-Type's ``charset`` parameter, unquoted; ``None`` when absent."""
        value = self.headers.get("content-type")
        if not value or ";" not in value:
            return None
        for parameter in value.split(";")[1:]:
            name, _, given = parameter.partition("=")
            if name.strip().lower() == "charset":
                return given.strip().strip('"').strip() or None
        return None

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None and value.strip().isdigit() else None

    async def read(self) -> bytes:
        """The whole body as received (not decoded); raises ``HTTPError`` if it cannot be."""
        if not self.complete and self.error is None:
            self._body_waiter = asyncio.get_running_loop().create_future()
            await self._body_waiter
        if self.error is not None:
            raise self.error
        chunks = self._chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def release(self) -> None:
        """Done with the response: its connection goes back to the pool if it can be reused
        (a complete response, keep-alive), else it is closed. Idempotent."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.finished(self)

    # called by the connection
    def _fail(self, error: BaseException) -> None:
        if self.error is None and not self.complete:
            self.error = error
            self._wake()

    def _wake(self) -> None:
        waiter = self._body_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


class _Connection(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection: one request at a time, responses parsed as bytes arrive.

    A buffered protocol: the event loop reads the socket into the client's read buffer,
    shared by its connections (each read is parsed at once, and nothing keeps a view of
    it: llhttp hands the body over as new ``bytes``), instead of a new ``bytes`` a read."""

    def __init__(self, client: HttpClient, key: tuple[str, str, int]) -> None:
        self.client = client
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        # What aiohttp's response parser forgives too: real servers are sloppy (bare LF line
        # ends, odd characters in header values, spaces after a chunk's size).
        self.parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_optional_cr_before_lf=True,
            lenient_spaces_after_chunk_size=True,
        )
        self.response: Response | None = None
        self.head: asyncio.Future[None] | None = None
        self.received = False
        """Any byte of the current response arrived (a stale connection shows none)."""
        self.closed = False
        self.keep_alive = False
        self.idle_since = 0.0
        self.quiet_bytes = 0
        """Bytes received since the request or the last byte of body (``MAX_HEADER_BYTES``)."""

    # asyncio.BufferedProtocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.client._read_view

    def buffer_updated(self, nbytes: int) -> None:
        with self.client._read_view[:nbytes] as data:
            self.data_received(data)

    def data_received(self, data: bytes | memoryview) -> None:
        self.received = True
        response = self.response
        if response is None or response.complete:  # bytes nobody asked for: out of step
            self.close()
            return
        self.quiet_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._broken(ProtocolError("unexpected protocol upgrade"))
        except httptools.HttpParserError as exc:
            self._broken(ProtocolError(f"malformed response: {exc}"))
        else:
            # llhttp buffers a header (or trailer, or chunk extension) until it ends: one that
            # never ends is caught here, not by on_header.
            if self.quiet_bytes > MAX_HEADER_BYTES and not response.complete:
                self._broken(ProtocolError(f"more than {MAX_HEADER_BYTES} bytes without a body"))

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.client._lost(self)
        response = self.response
        if response is not None and not response.complete and response.error is None:
            if self.head is not None and not self.head.done():
                error: BaseException = ConnectError(
                    "server closed the connection" if exc is None else str(exc) or repr(exc)
                )
                error.__cause__ = exc
                self._signal_head(error)
                response.error = error
            elif exc is None and self._until_close(response):  # unframed: the close ends it
                response.complete = True
                response._wake()
            else:
                error = IncompleteBody(
                    f"connection closed after {response._size} bytes of the body"
                    + (f" of {response.content_length}" if response.content_length else "")
                )
                error.__cause__ = exc
                response._fail(error)

    # httptools callbacks
    def on_message_begin(self) -> None:
        response = self.response
        if response is None:
            return
        if response.complete:  # a second answer to one request: the stream is out of step
            self.keep_alive = False
            return
        response.raw_headers.clear()  # an interim response's
        response.headers.clear()
        response.reason = ""

    def on_status(self, status: bytes) -> None:
        response = self.response
        if response is not None and not response.final:
            response.reason += status.decode("latin-1")  # it may come in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        response = self.response
        if response is None or response.final:  # after the final headers: a trailer
            return
        response.header_bytes += len(name) + len(value) + 4
        if response.header_bytes > MAX_HEADER_BYTES:
            self._broken(ProtocolError(f"response headers exceed {MAX_HEADER_BYTES} bytes"))
            return
        value = value.rstrip(b" \t")  # llhttp strips the space before a value, not after
        if b"\x00" in value:
            self._broken(ProtocolError(f"a NUL byte in the {name!r} header"))
            return
        response.raw_headers.append((name, value))
        key = name.decode("latin-1").lower()
        if key not in response.headers:
            response.headers[key] = _text(value)

    def on_headers_complete(self) -> None:
        response = self.response
        if response is None or response.final or response.error is not None:
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            return  # an interim response (100 Continue ...): the real one follows
        response.final = True
        response.status = status
        response.version = self.parser.get_http_version()
        # Known now, with the framing; after the message llhttp has reset what it reads.
        self.keep_alive = self.parser.should_keep_alive()
        self._signal_head(None)

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is None or response.complete or response.error is not None:
            return
        self.quiet_bytes = 0
        response._size += len(body)
        if response._size > response.cap:
            response._fail(BodyTooLarge(response.cap))
            self.close()
            return
        response._chunks.append(body)

    def on_message_complete(self) -> None:
        response = self.response
        if response is None or not response.final or response.complete:
            return  # the end of an interim response (or of one nobody asked for)
        response.complete = True
        response._wake()

    # the client's side
    async def send(self, request: bytes, response: Response) -> None:
        """Write ``request``; return when ``response``'s status and headers have arrived."""
        assert self.transport is not None
        self.response = response
        self.received = False
        self.keep_alive = False
        self.quiet_bytes = 0
        loop = asyncio.get_running_loop()
        self.head = head = loop.create_future()
        self.transport.write(request)
        await head  # raises what _signal_head was given

    def finished(self, response: Response) -> None:
        """The caller is done with ``response``: reuse the connection or close it."""
        reusable = (
            response.complete and response.error is None and not self.closed and self.keep_alive
        )
        self.response = None
        self.head = None
        if reusable:
            self.client._release(self)
        else:
            self.close()

    def close(self) -> None:
        response = self.response
        if response is not None and not response.complete:  # not a body the close ends
            error = ConnectError("the connection was closed before the response was complete")
            if self.head is not None and not self.head.done():
                response.error = error
                self._signal_head(error)
            else:
                response._fail(error)
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()
            self.client._lost(self)

    def _signal_head(self, error: BaseException | None) -> None:
        head = self.head
        if head is not None and not head.done():
            if error is None:
                head.set_result(None)
            else:
                head.set_exception(error)

    def _broken(self, error: BaseException) -> None:
        response = self.response
        if response is not None:
            if self.head is not None and not self.head.done():
                response.error = error
                self._signal_head(error)
            else:
                response._fail(error)
        self.close()

    @staticmethod
    def _until_close(response: Response) -> bool:
        headers = response.headers
        return (
            "content-length" not in headers
            and "chunked" not in headers.get("transfer-encoding", "").lower()
            and response.status not in (204, 304)
        )


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
    ) -> None:
        """``resolver``: where names are looked up (the system's by default), always behind
        the SSRF guard; ``tls``: makes the TLS context, on the first https connection;
        ``credentials``: ``user:password`` (percent-encoded, as in a URL) by origin
        (``http://host:port``), sent as Basic ``Authorization`` to that origin only."""
        self.limit = max(1, limit)
        self.connect_timeout = connect_timeout
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"a line break in the {name} header: {value[:200]!r}")
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._fixed_pairs = list(headers.items())
        self._credentials = {
            _split(origin + "/")[:3]: userinfo for origin, userinfo in (credentials or {}).items()
        }
        self._resolver = GuardedResolver(allowed, resolver)
        self._make_tls = tls
        self._tls: ssl.SSLContext | None = None
        self._dns: dict[tuple[str, str, int], tuple[float, list[tuple[str, int]]]] = {}
        """Answers by (scheme, host, port): what the guard let through depends on all three."""
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._lru: OrderedDict[_Connection, None] = OrderedDict()
        self._open: set[_Connection] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._read_view = memoryview(bytearray(READ_BYTES))
        """Where the event loop reads any of the connections' sockets (``_Connection``)."""

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
        """Close every connection (those in use too)."""
        self._closed = True
        for conn in list(self._open):
            conn.close()
        while self._waiters:  # each sees the client closed
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._idle.clear()
        self._lru.clear()
        await self._resolver.close()
        await asyncio.sleep(0)  # let the transports' connection_lost run

    async def get(
        self, url: str, headers: dict[str, str] | None = None, *, cap: int, record: bool = False
    ) -> Response:
        """GET ``url`` (absolute, http or https, ASCII as a URL serialiser writes it); return
        when the status and headers are in. The caller must ``release`` the response.
        ``cap``: the most bytes of body to take; ``record``: keep the request's headers in
        ``Response.request``."""
        scheme, host, port, authority, target, userinfo = _split(url)
        key = (scheme, host, port)
        if not userinfo and self._credentials:
            userinfo = self._credentials.get(key, "")
        request = self._request(target, authority, userinfo, headers)
        for attempt in (0, 1):
            conn, reused = await self._acquire(key, fresh=attempt > 0)
            response = Response(conn, url, cap)
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
            if record:
                response.request = self._request_pairs(authority, headers)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _request(
        self, target: str, authority: str, userinfo: str, headers: dict[str, str] | None
    ) -> bytes:
        extra = ""
        if userinfo:
            extra = f"Authorization: {_basic(userinfo)}\r\n"
        if headers:
            for name, value in headers.items():
                if "\r" in value or "\n" in value:
                    raise ProtocolError(f"a line break in the {name} header: {value[:200]!r}")
                extra += f"{name}: {value}\r\n"
        head = f"GET {target} HTTP/1.1\r\nHost: {authority}\r\n{self._fixed}{extra}\r\n"
        return head.encode("utf-8", "surrogateescape")  # a validator sent back as it came

    def _request_pairs(
        self, authority: str, headers: dict[str, str] | None
    ) -> list[tuple[str, str]]:
        """The request's headers as recorded (for WARC): all but credentials, which are
        never kept (``Authorization``, ``Proxy-Authorization``, ``Cookie``)."""
        pairs = [("Host", authority), *self._fixed_pairs]
        if headers:
            pairs += headers.items()
        return [(k, v) for k, v in pairs if k.lower() not in SECRET_HEADERS]

    # the pool
    async def _acquire(
        self, key: tuple[str, str, int], fresh: bool = False
    ) -> tuple[_Connection, bool]:
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
        conn = _Connection(self, key)
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

    def _take_idle(self, key: tuple[str, str, int]) -> _Connection | None:
        """The most recently idle live connection to ``key``'s origin, if any; the stale ones
        found on the way are closed."""
        idle = self._idle.get(key)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            conn = idle.pop()
            self._lru.pop(conn, None)
            if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                return conn
            conn.close()
        return None

    def _release(self, conn: _Connection) -> None:
        if self._closed:
            conn.close()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.setdefault(conn.key, []).append(conn)
        self._lru[conn] = None
        self._wake_one()

    def _lost(self, conn: _Connection) -> None:
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

    async def _connect(self, conn: _Connection) -> None:
        """Connect ``conn`` to one of its host's addresses: tried in the resolver's order, the
        next one started ``HAPPY_EYEBALLS_DELAY_S`` after the last (a host whose first address
        is unreachable is still reached), all within the connect timeout; then TLS."""
        scheme, host, port = conn.key
        loop = asyncio.get_running_loop()
        tls = self._context() if scheme == "https" else None
        try:
            async with asyncio.timeout(self.connect_timeout):
                addresses = await self._addresses(scheme, host, port)
                infos = [
                    (family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                     (address, port, 0, 0) if family == socket.AF_INET6 else (address, port))
                    for address, family in addresses
                ]  # fmt: skip
                try:
                    sock = await aiohappyeyeballs.start_connection(
                        infos, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY_S, interleave=1
                    )
                except OSError as exc:
                    raise ConnectError(_describe(exc, host, port)) from exc
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
            raise ConnectTimeout(
                f"no connection to {host}:{port} within {self.connect_timeout:g} s"
            ) from exc

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


def _describe(exc: OSError | None, host: str, port: int) -> str:
    if exc is None:
        return f"cannot connect to {host}:{port}"
    return f"cannot connect to {host}:{port}: {exc.strerror or exc}"


def _basic(userinfo: str) -> str:
    user, _, password = userinfo.partition(":")
    token = f"{unquote(user)}:{unquote(password)}".encode()
    return "Basic " + base64.b64encode(token).decode("ascii")


def _split(url: str) -> tuple[str, str, int, str, str, str]:
    """(scheme, host, port, Host header, request target, userinfo) of an absolute URL."""
    colon = url.find("://")
    scheme = url[:colon].lower() if colon > 0 else ""
    if scheme not in _DEFAULT_PORTS:
        raise ProtocolError(f"not an http(s) URL: {url[:200]}")
    start = colon + 3
    end = len(url)
    for stop in "/?#":
        position = url.find(stop, start)
        if 0 <= position < end:
            end = position
    authority = url[start:end]
    target = url[end:].partition("#")[0] or "/"
    if target[0] == "?":
        target = "/" + target
    userinfo = ""
    at = authority.rfind("@")
    if at >= 0:
        userinfo, authority = authority[:at], authority[at + 1 :]
    host, port = authority, _DEFAULT_PORTS[scheme]
    bracket = authority.rfind("]")
    separator = authority.rfind(":")
    if separator > bracket:
        host = authority[:separator]
        digits = authority[separator + 1 :]
        if not (digits.isascii() and digits.isdigit()) or not 0 < int(digits) < 65536:
            raise ProtocolError(f"bad port in URL: {url[:200]}")
        port = int(digits)
        if port == _DEFAULT_PORTS[scheme]:
            authority = host
    if not host or not url.isascii() or _BAD_CHARACTER.search(url, start) is not None:
        raise ProtocolError(f"not a valid URL: {url[:200]}")
    return scheme, host.lower(), port, authority.lower(), target, userinfo
