"""crawler.net.http: the crawl's HTTP/1.1 client against real local servers that write exact bytes
(framing, keep-alive, stale connections, limits, caps, malformed answers, TLS)."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from crawler.errors import BadResponse, Blocked, ConnectFailed, TooLarge
from crawler.net import http
from crawler.net.fetch import Fetcher
from crawler.net.guard import allow_all
from crawler.settings import Settings
from tests.sites import make_certificate, server_tls

Respond = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]
"""Given a request's head, write the answer; False closes the connection."""

OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello"


class Server:
    """An asyncio server on 127.0.0.1 on the test's own loop: ``respond`` answers each
    request; ``connections`` counts the connections it accepted, ``requests`` holds heads.
    ``idle_close_s``: close a connection that stays this long without a request."""

    def __init__(self, respond: Respond, idle_close_s: float | None = None) -> None:
        self.respond = respond
        self.idle_close_s = idle_close_s
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    async with asyncio.timeout(self.idle_close_s):
                        head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                    break
                self.requests.append(head)
                if not await self.respond(head, writer):
                    break
                await writer.drain()
        finally:
            self.open -= 1
            writer.close()


def reply(data: bytes, keep: bool = True) -> Respond:
    async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(data)
        return keep

    return respond


def client(**options: object) -> http.HttpClient:
    settings: dict[str, object] = {
        "limit": 8, "connect_timeout": 5.0, "headers": {"User-Agent": "t"},
        "allowed": allow_all,
    }  # fmt: skip
    settings.update(options)
    return http.HttpClient(**settings)  # type: ignore[arg-type]


async def get(c: http.HttpClient, url: str, cap: int = 1 << 20, **kw: object) -> tuple[int, bytes]:
    response = await c.get(url, cap=cap, **kw)  # type: ignore[arg-type]
    try:
        return response.status, await response.read()
    finally:
        response.release()


def test_keep_alive_reuses_one_connection() -> None:
    async def go() -> None:
        async with Server(reply(OK)) as server, client() as c:
            for _ in range(5):
                assert await get(c, server.url("/a?b=1")) == (200, b"hello")
            assert server.connections == 1
            assert server.requests[0].startswith(b"GET /a?b=1 HTTP/1.1\r\n")
            assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in server.requests[0]

    asyncio.run(go())


def test_chunked_and_unframed_bodies() -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")  # fmt: skip
    unframed = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nuntil the end"

    async def go() -> None:
        async with Server(reply(chunked)) as server, client() as c:
            assert await get(c, server.url()) == (200, b"abcdefg")
            assert await get(c, server.url()) == (200, b"abcdefg")
            assert server.connections == 1
        async with Server(reply(unframed, keep=False)) as server, client() as c:
            assert await get(c, server.url()) == (200, b"until the end")
            assert await get(c, server.url()) == (200, b"until the end")
            assert server.connections == 2  # the close ended each body: no reuse

    asyncio.run(go())


def test_an_unframed_body_cut_by_a_reset_fails() -> None:
    """Without a length, only a clean close ends the body: a reset leaves it incomplete."""

    async def reset(head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\npart of it")
        await writer.drain()
        await asyncio.sleep(0.05)  # the client has read the head and the first bytes
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # linger 0: a reset, not a clean close
        return False

    async def go() -> None:
        async with Server(reset) as server, client() as c:
            response = await c.get(server.url(), cap=100)
            with pytest.raises(http.IncompleteBody, match="after 10 bytes"):
                await response.read()
            response.release()

    asyncio.run(go())


def test_interim_responses_are_skipped() -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\n" + OK

    async def go() -> None:
        async with Server(reply(data)) as server, client() as c:
            response = await c.get(server.url(), cap=100)
            assert (response.status, response.reason, await response.read()) == (
                200,
                "OK",
                b"hello",
            )
            assert response.headers["content-type"] == "text/html"
            response.release()

    asyncio.run(go())


def test_an_interim_response_s_own_body_is_dropped() -> None:
    """llhttp frames a body for a 1xx (other than 100-103) that declares one: it is not the
    page's (aiohttp skips it with its message); an endless one is cut off."""
    odd = b"HTTP/1.1 199 Odd\r\nContent-Length: 9\r\n\r\nINJECTED!"
    chunked = b"HTTP/1.1 199 Odd\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nINJECTED!\r\n0\r\n\r\n"
    huge = b"HTTP/1.1 199 Odd\r\nContent-Length: 200000\r\n\r\n" + b"x" * 200_000

    async def go() -> None:
        for interim in (odd, chunked):
            async with Server(reply(interim + OK)) as server, client() as c:
                assert await get(c, server.url()) == (200, b"hello")
        async with Server(reply(huge + OK)) as server, client() as c:
            with pytest.raises(http.ProtocolError, match="without a body"):
                await get(c, server.url())

    asyncio.run(go())


@pytest.mark.parametrize(
    ("codings", "body"),
    [
        ([b"gzip", b"chunked"], None),
        ([b"identity", b"chunked"], None),
        ([b"chunked, gzip"], b"5\r\nhello\r\n"),
    ],
)
def test_chunked_is_the_last_coding_of_every_transfer_encoding_line(
    codings: list[bytes], body: bytes | None
) -> None:
    """Two Transfer-Encoding lines are one list (RFC 9112 6.1): chunked last is a chunked
    body, and a close before its last chunk is a truncated one (aiohttp and curl agree);
    chunked not last is a body that ends at the close."""
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(b"Transfer-Encoding: " + c + b"\r\n" for c in codings)
    data = head + b"\r\n5\r\nhello\r\n"  # no 0-size chunk: then the server closes

    async def go() -> None:
        async with Server(reply(data, keep=False)) as server, client() as c:
            if body is None:
                with pytest.raises(http.IncompleteBody):
                    await get(c, server.url())
            else:
                assert await get(c, server.url()) == (200, body)

    asyncio.run(go())


def test_headers_repeated_and_parsed() -> None:
    data = (b"HTTP/1.1 404 Not Here\r\nX-Robots-Tag: noindex\r\nx-robots-tag: nofollow\r\n"
            b"Content-Type: Text/HTML; Charset=\"ISO-8859-1\"\r\nContent-Length: 0\r\n\r\n")  # fmt: skip

    async def go() -> None:
        async with Server(reply(data)) as server, client() as c:
            response = await c.get(server.url(), cap=100)
            assert (response.status, response.reason) == (404, "Not Here")
            assert response.getall("X-Robots-Tag") == ["noindex", "nofollow"]
            assert response.headers["x-robots-tag"] == "noindex"  # the first, as aiohttp's get
            assert (response.content_type, response.charset) == ("text/html", "ISO-8859-1")
            assert await response.read() == b""
            response.release()

    asyncio.run(go())


def test_sloppy_servers_are_forgiven_as_aiohttp_did() -> None:
    """Bare LF line ends, trailing spaces after a value, a space after a chunk's size."""
    data = (b"HTTP/1.1 200 OK\nContent-Type: text/html  \nTransfer-Encoding: chunked\n\n"
            b"5 \r\nhello\r\n0\r\n\r\n")  # fmt: skip

    async def go() -> None:
        async with Server(reply(data)) as server, client() as c:
            response = await c.get(server.url(), cap=100)
            assert (response.content_type, await response.read()) == ("text/html", b"hello")
            response.release()

    asyncio.run(go())


def test_a_stale_idle_connection_is_replaced() -> None:
    """The server closes after each answer without saying so: the next request finds the
    pooled connection dead before any byte came back, and goes again on a new one."""

    async def go() -> None:
        async with Server(reply(OK, keep=False)) as server, client() as c:
            assert await get(c, server.url()) == (200, b"hello")
            await asyncio.sleep(0.05)  # the close reaches the client while the connection idles
            assert await get(c, server.url()) == (200, b"hello")
            assert server.connections == 2

    asyncio.run(go())


def test_a_reused_connection_closed_unanswered_is_retried_once() -> None:
    """The race the test above avoids: the request went out on a pooled connection that the
    server closes without answering. A GET can go again, once, on a new connection; on a new
    connection the same close is an error."""
    answered = 0

    async def flaky(head: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal answered
        answered += 1
        if answered == 2:
            return False  # read the request, close without a byte
        writer.write(OK)
        return True

    async def go() -> None:
        async with Server(flaky) as server, client() as c:
            assert await get(c, server.url()) == (200, b"hello")
            assert await get(c, server.url()) == (200, b"hello")
            assert (server.connections, len(server.requests)) == (2, 3)
        async with Server(reply(b"", keep=False)) as server, client() as c:
            with pytest.raises(http.ConnectError, match="closed the connection"):
                await get(c, server.url())
            assert server.connections == 1

    asyncio.run(go())


def test_a_truncated_body_fails() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\nshort"

    async def go() -> None:
        async with Server(reply(data, keep=False)) as server, client() as c:
            with pytest.raises(http.IncompleteBody, match="5 bytes of the body of 100"):
                await get(c, server.url())

    asyncio.run(go())


@pytest.mark.parametrize(
    "data",
    [b"SPAM / HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nX-Nul: a\x00b\r\n\r\n",
     b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"x" * (http.MAX_HEADER_BYTES + 10) + b"\r\n\r\n"],
)  # fmt: skip
def test_malformed_responses_fail(data: bytes) -> None:
    async def go() -> None:
        async with Server(reply(data)) as server, client() as c:
            with pytest.raises(http.ProtocolError):
                await get(c, server.url())
            assert not c._open  # the broken connection was closed

    asyncio.run(go())


def test_an_answer_nobody_asked_for_ends_the_connection() -> None:
    """Two answers to one request: the first is the response, intact; the connection is not
    reused (the second would be taken for the next request's)."""
    second = b"HTTP/1.1 200 OK\r\nX-Second: 1\r\nContent-Length: 6\r\n\r\nsecond"

    async def go() -> None:
        async with Server(reply(OK + second)) as server, client() as c:
            response = await c.get(server.url(), cap=100)
            assert (await response.read(), "x-second" in response.headers) == (b"hello", False)
            response.release()
            assert await get(c, server.url()) == (200, b"hello")
            assert server.connections == 2

    asyncio.run(go())


def test_line_breaks_in_header_values_are_refused() -> None:
    async def go() -> None:
        async with client() as c:
            with pytest.raises(http.ProtocolError, match="line break"):
                await c.get("http://127.0.0.1:9/", {"If-None-Match": 'a"\r\nX-Evil: 1'}, cap=1)
        with pytest.raises(ValueError, match="line break"):
            client(headers={"User-Agent": "a\nb"})

    asyncio.run(go())


@pytest.mark.parametrize(
    "head",
    [b"HTTP/1.1 200 OK\r\nX-Endless: ", b"HTTP/1.1 200 OK",
     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-Trailer: "],
)  # fmt: skip
def test_a_head_or_trailer_that_never_ends_is_cut_off(head: bytes) -> None:
    """llhttp holds an unfinished header (or status line, or trailer) until it ends: the
    client stops it at MAX_HEADER_BYTES without a byte of body, not at the deadline."""

    async def endless(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(head)
        for _ in range(100):  # ~400 KB: past the limit, whatever the reads' sizes
            writer.write(b"y" * 4096)
            await writer.drain()
        await asyncio.sleep(1)
        return False

    async def go() -> None:
        async with Server(endless) as server, client() as c:
            with pytest.raises(http.ProtocolError, match="without a body"):
                async with asyncio.timeout(5):
                    await get(c, server.url())

    asyncio.run(go())


def test_trailers_are_not_headers() -> None:
    data = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: \"a\"\r\n\r\n"
            b"2\r\nok\r\n0\r\nContent-Encoding: gzip\r\nETag: \"b\"\r\n\r\n")  # fmt: skip

    async def go() -> None:
        async with Server(reply(data)) as server, client() as c:
            response = await c.get(server.url(), cap=100)
            assert await response.read() == b"ok"
            assert (response.headers.get("etag"), "content-encoding" in response.headers) == (
                '"a"', False)  # fmt: skip
            assert response.getall("ETag") == ['"a"']
            response.release()
            assert await get(c, server.url()) == (200, b"ok")  # and the connection is reused
            assert server.connections == 1

    asyncio.run(go())


def test_status_zero_is_a_response_like_any_other() -> None:
    async def go() -> None:
        data = b"HTTP/1.1 000 Odd\r\nContent-Length: 2\r\n\r\nok"
        async with Server(reply(data)) as server, client() as c:
            async with asyncio.timeout(5):
                assert await get(c, server.url()) == (0, b"ok")

    asyncio.run(go())


class _Fixed:
    """A resolver answering every name with ``addresses``, in order."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[dict[str, object]]:
        return [{"hostname": host, "host": a, "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": 0} for a in self.addresses]  # fmt: skip

    async def close(self) -> None:
        pass


def test_an_address_that_hangs_does_not_stall_its_host() -> None:
    """The host's first address takes connections it never accepts (its accept queue is full,
    so the SYNs are dropped); the second is tried 0.25 s later and answers, as aiohttp's
    happy eyeballs did."""

    async def go() -> None:
        async with Server(reply(OK)) as server:
            hanging = socket.socket()
            hanging.bind(("127.0.0.2", server.port))
            hanging.listen(0)
            fillers = [socket.socket() for _ in range(4)]
            try:
                for filler in fillers:  # fill the accept queue: later SYNs are dropped
                    filler.setblocking(False)
                    filler.connect_ex(("127.0.0.2", server.port))
                resolver = _Fixed("127.0.0.2", "127.0.0.1")
                async with client(resolver=resolver, connect_timeout=3.0) as c:
                    started = asyncio.get_running_loop().time()
                    assert await get(c, f"http://multi.test:{server.port}/") == (200, b"hello")
                    assert asyncio.get_running_loop().time() - started < 2.0
            finally:
                hanging.close()
                for filler in fillers:
                    filler.close()

    asyncio.run(go())


def test_body_cap_closes_the_connection() -> None:
    data = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"400\r\n"
        + b"x" * 1024
        + b"\r\n"
    )

    async def go() -> None:
        async with Server(reply(data * 1 + b"0\r\n\r\n")) as server, client() as c:
            with pytest.raises(http.BodyTooLarge, match="exceeds 1000 bytes"):
                await get(c, server.url(), cap=1000)
            assert await get(c, server.url(), cap=2000) == (200, b"x" * 1024)
            assert server.connections == 2

    asyncio.run(go())


def test_connection_limit_queues_requests() -> None:
    async def slow(head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        writer.write(OK)
        return True

    async def go() -> None:
        async with Server(slow) as server, client(limit=2) as c:
            results = await asyncio.gather(*(get(c, server.url(f"/{i}")) for i in range(6)))
            assert results == [(200, b"hello")] * 6
            assert server.most_open == 2 and server.connections == 2

    asyncio.run(go())


def test_closing_the_client_fails_the_requests_that_wait_for_room() -> None:
    async def hold(head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(5)
        return False

    async def go() -> None:
        async with Server(hold) as server:
            c = client(limit=1)
            first = asyncio.create_task(get(c, server.url("/1")))
            second = asyncio.create_task(get(c, server.url("/2")))
            await asyncio.sleep(0.1)  # the first holds the one connection, the second waits
            await c.close()
            for task in (first, second):
                with pytest.raises(http.ConnectError):
                    await task
            assert [head.split(b"\r\n")[0] for head in server.requests] == [b"GET /1 HTTP/1.1"]

    asyncio.run(go())


def test_idle_connections_make_room_for_other_origins() -> None:
    async def go() -> None:
        async with Server(reply(OK)) as one, Server(reply(OK)) as two, client(limit=1) as c:
            assert await get(c, one.url()) == (200, b"hello")
            assert await get(c, two.url()) == (200, b"hello")  # one's idle connection closed
            await asyncio.sleep(0.05)
            assert (one.open, two.open, len(c._open)) == (0, 1, 1)

    asyncio.run(go())


def test_a_cancelled_request_closes_its_connection() -> None:
    async def drip(head: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"GET /slow" not in head:
            writer.write(OK)
            return True
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nab")
        await asyncio.sleep(5)
        return False

    async def go() -> None:
        async with Server(drip) as server, client() as c:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await get(c, server.url("/slow"))
            assert not c._open
            assert await get(c, server.url("/fast")) == (200, b"hello")
            assert server.connections == 2

    asyncio.run(go())


def test_request_headers_userinfo_and_record() -> None:
    """Userinfo becomes Basic credentials on the wire; the recorded request (for WARC)
    keeps every header but those credentials."""

    async def go() -> None:
        async with Server(reply(OK)) as server, client() as c:
            url = f"http://us%40er:p%3Aw@127.0.0.1:{server.port}/x"
            response = await c.get(url, {"If-None-Match": '"v1"'}, cap=100, record=True)
            response.release()
            head = server.requests[0].decode()
            token = base64.b64encode(b"us@er:p:w").decode()
            assert f"Authorization: Basic {token}\r\n" in head
            assert 'If-None-Match: "v1"\r\n' in head and "User-Agent: t\r\n" in head
            assert ("Host", f"127.0.0.1:{server.port}") in response.request
            assert all(name != "Authorization" for name, _ in response.request)  # never kept

    asyncio.run(go())


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/", "http://127.0.0.1:99999/", "http://127.0.0.1/a b", "http:///x"]
)
def test_unusable_urls_are_refused_before_connecting(url: str) -> None:
    async def go() -> None:
        async with client() as c:
            with pytest.raises(http.ProtocolError):
                await c.get(url, cap=100)

    asyncio.run(go())


def test_names_resolve_through_the_guard() -> None:
    """``localhost`` resolves (to ::1 and 127.0.0.1: the server listens on the second only,
    so the first address's refusal falls through to it); not allowed, it is blocked."""

    async def go() -> None:
        async with Server(reply(OK)) as server:
            url = f"http://localhost:{server.port}/"
            async with client(allowed=lambda scheme, host, port: host == "localhost") as c:
                assert await get(c, url) == (200, b"hello")
            async with client(allowed=lambda scheme, host, port: False) as c:
                config = Settings()
                with pytest.raises(Blocked, match="loopback"):
                    await Fetcher(c, config).fetch(url)
            assert server.connections == 1

    asyncio.run(go())


def test_fetcher_maps_the_clients_errors() -> None:
    async def go() -> None:
        truncated = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9\r\n\r\nab"
        chunked = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked"
                   b"\r\n\r\n800\r\n" + b"x" * 2048 + b"\r\n0\r\n\r\n")  # fmt: skip
        config = Settings(max_body_bytes=1000)
        async with Server(reply(truncated, keep=False)) as server, client() as c:
            with pytest.raises(BadResponse, match="incomplete body"):
                await Fetcher(c, config).fetch(server.url())
        async with Server(reply(chunked)) as server, client() as c:
            with pytest.raises(TooLarge, match="exceeds 1000 bytes"):
                await Fetcher(c, config).fetch(server.url())
        async with client() as c:
            with pytest.raises(ConnectFailed, match="cannot connect"):
                await Fetcher(c, config).fetch("http://127.0.0.1:9/")

    asyncio.run(go())


def test_tls_is_verified(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    server_context = server_tls(cert, key)

    def trusting() -> ssl.SSLContext:
        context = ssl.create_default_context()
        context.load_verify_locations(cert)
        return context

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def go() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_context)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        async with server:
            async with client() as c:  # the system's CAs: this certificate is nobody's
                with pytest.raises(http.ConnectError, match=r"(?i)certificate"):
                    await get(c, url)
            async with client(tls=trusting) as c:
                assert await get(c, url) == (200, b"hello")
                assert await get(c, url) == (200, b"hello")
                assert len(c._open) == 1

    asyncio.run(go())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_bodies_read_at_once_on_many_connections_stay_apart(loop: str) -> None:
    """The connections share the client's read buffer (the event loop reads each socket into
    it): bodies larger than the buffer, on many connections at once, each arrive exact, on
    asyncio's loop and on uvloop's."""
    import random

    import uvloop

    bodies = [random.Random(i).randbytes(http.READ_BYTES * 2 + i * 977) for i in range(12)]

    async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
        i = int(head.split(b" ")[1].strip(b"/"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(bodies[i]))
        for start in range(0, len(bodies[i]), 40_000):  # in pieces, as a server sends
            writer.write(bodies[i][start : start + 40_000])
            await writer.drain()
        return True

    async def go() -> None:
        async with Server(respond) as server, client(limit=12) as c:
            for _ in range(2):
                got = await asyncio.gather(*(get(c, server.url(f"/{i}"), cap=1 << 23)
                                             for i in range(12)))  # fmt: skip
                assert got == [(200, body) for body in bodies]
            assert server.most_open == 12

    if loop == "uvloop":
        uvloop.run(go())
    else:
        asyncio.run(go())


def test_chunk_framing_cannot_outweigh_the_body_cap_by_far() -> None:
    """1-byte chunks, each behind 60 KB of chunk extension: never 64 KiB without a body
    byte, so only a bound on the wire bytes per byte of body cap stops it before the
    timeout."""
    chunk = b"1;" + b"x" * 60_000 + b"\r\na\r\n"
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 40 + b"0\r\n\r\n"

    async def go() -> None:
        async with Server(reply(data)) as server, client() as c:
            with pytest.raises(http.ProtocolError, match="bytes on the wire for the body"):
                await get(c, server.url(), cap=100)
            assert await get(c, server.url(), cap=1 << 20) == (200, b"a" * 40)

    asyncio.run(go())
