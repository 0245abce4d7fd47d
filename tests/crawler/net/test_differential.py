"""Differential tests: the crawler's HTTP stack (``Fetcher`` over ``crawler.net.http``) and
aiohttp's client, the reference it replaced, run against the same local servers that write
exact bytes; each must see the same status, response headers (names lower-cased, repeated
ones in order), decoded body and final URL, or fail with the same kind of error.

Where the two differ on purpose, a test named for the difference asserts it, and says why.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import aiohttp
import brotli
import pytest
import zstandard
from aiohttp.compression_utils import HAS_ZSTD

from crawler.errors import FetchError
from crawler.net.fetch import Fetcher
from crawler.net.guard import allow_all
from crawler.net.session import open_session
from crawler.settings import Settings
from tests.crawler.net.test_http import Respond, Server, reply

TIMEOUT_S = 5.0


def response(
    body: bytes = b"",
    headers: Sequence[tuple[str, str]] = (),
    status: str = "200 OK",
    framing: str = "length",
) -> bytes:
    """A response's bytes: ``framing`` is ``length`` (Content-Length), ``chunked`` or
    ``close`` (neither: the body ends at the close)."""
    lines = [f"HTTP/1.1 {status}", *(f"{name}: {value}" for name, value in headers)]
    if framing == "length":
        lines.append(f"Content-Length: {len(body)}")
    elif framing == "chunked":
        lines.append("Transfer-Encoding: chunked")
        pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
        body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    else:
        assert framing == "close"
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def routes(table: dict[str, Callable[[bytes], bytes]], keep: bool = True) -> Respond:
    """Answer by request target; each entry is given the request's head (for its Host)."""

    async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
        target = head.split(b" ", 2)[1].decode()
        writer.write(table[target](head))
        return keep

    return respond


def host_of(head: bytes) -> str:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"host":
            return value.strip().decode()
    raise AssertionError("no Host header")


@dataclass(frozen=True)
class Outcome:
    """What one client saw of one request: a response, or the kind of its failure."""

    status: int | None = None
    headers: tuple[tuple[bytes, bytes], ...] | None = None
    body: bytes | None = None
    final_url: str | None = None
    error: str | None = None
    detail: str = field(default="", compare=False)
    """The failure's message (not compared: each client words its own)."""


def _lowered(pairs: Sequence[tuple[bytes, bytes]]) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((name.lower(), value) for name, value in pairs)


async def ours(urls: Sequence[str], pause_s: float = 0.0, timeout: float = TIMEOUT_S,
               keep_cookies: bool = False) -> list[Outcome]:  # fmt: skip
    """Fetch ``urls`` in turn through the crawler's Fetcher, on one client."""
    import json

    settings = Settings(store_body=True, timeout=timeout, connect_timeout=2.0, max_redirects=20,
                        keep_cookies=keep_cookies)  # fmt: skip
    outcomes = []
    async with open_session(settings, allow_all) as session:
        fetcher = Fetcher(session, settings)
        try:
            for i, url in enumerate(urls):
                if i and pause_s:
                    await asyncio.sleep(pause_s)
                try:
                    result = await fetcher.fetch(url, any_type=True)
                except FetchError as exc:
                    outcomes.append(Outcome(error=exc.reason, detail=str(exc)))
                    continue
                assert result.headers_json is not None
                pairs = json.loads(result.headers_json)["headers"]
                headers = _lowered([(k.encode("latin-1"), v.encode("latin-1")) for k, v in pairs])
                outcomes.append(Outcome(result.status, headers, result.body, result.final_url))
        finally:
            fetcher.close()
    return outcomes


def _aiohttp_kind(exc: BaseException) -> str:
    """aiohttp's exceptions as the crawler's error kinds (``FetchError.reason``)."""
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect"
    if isinstance(
        exc,
        (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError),
    ):
        return "bad-response"  # a malformed or cut-off answer; TooManyRedirects is one too
    return f"unmapped {type(exc).__name__}"


async def theirs(urls: Sequence[str], pause_s: float = 0.0, timeout: float = TIMEOUT_S,
                 keep_cookies: bool = False) -> list[Outcome]:  # fmt: skip
    """Fetch ``urls`` in turn through aiohttp, on one session (whose cookie jar always
    keeps cookies: ``keep_cookies`` is the crawler's setting only)."""
    outcomes = []
    client_timeout = aiohttp.ClientTimeout(total=timeout, connect=2.0)
    async with aiohttp.ClientSession(auto_decompress=True, timeout=client_timeout) as session:
        for i, url in enumerate(urls):
            if i and pause_s:
                await asyncio.sleep(pause_s)
            try:
                async with session.get(url, allow_redirects=True, max_redirects=20) as resp:
                    body = await resp.read()
                    outcomes.append(
                        Outcome(resp.status, _lowered(list(resp.raw_headers)), body, str(resp.url))
                    )
            except (TimeoutError, aiohttp.ClientError) as exc:
                outcomes.append(Outcome(error=_aiohttp_kind(exc), detail=repr(exc)))
    return outcomes


@dataclass
class Run:
    outcomes: list[Outcome]
    connections: int
    """Connections the server accepted from this client."""


def both(
    respond: Respond,
    paths: Sequence[str] = ("/",),
    *,
    pause_s: float = 0.0,
    idle_close_s: float | None = None,
    timeout: float = TIMEOUT_S,
    keep_cookies: bool = False,
) -> tuple[Run, Run]:
    """(ours, aiohttp's) runs of ``paths`` in turn, each client against its own server."""

    async def go() -> tuple[Run, Run]:
        runs = []
        for client in (ours, theirs):
            async with Server(respond, idle_close_s) as server:
                urls = [server.url(p) for p in paths]
                outcomes = await client(urls, pause_s, timeout, keep_cookies)
                runs.append(Run(outcomes, server.connections))
        return runs[0], runs[1]

    return asyncio.run(go())


def url_free(outcome: Outcome) -> Outcome:
    """``outcome`` without its final URL's port (each client had its own server)."""
    if outcome.final_url is None:
        return outcome
    scheme, _, rest = outcome.final_url.partition("://")
    authority, slash, path = rest.partition("/")
    host = authority.rpartition(":")[0]
    return Outcome(outcome.status, outcome.headers, outcome.body,
                   f"{scheme}://{host}:PORT{slash}{path}", outcome.error)  # fmt: skip


def assert_same(a: Run, b: Run) -> None:
    assert [url_free(o) for o in a.outcomes] == [url_free(o) for o in b.outcomes]


# framing


BODY = b"<!doctype html><title>same</title>" + bytes(range(256)) * 4
HEADERS = [
    ("Content-Type", "text/html; charset=utf-8"),
    ("Set-Cookie", "a=1; Path=/"),
    ("X-Robots-Tag", "noindex"),
    ("set-cookie", "b=2"),
    ("X-Robots-Tag", "nofollow"),
    ("X-Padded", "value with   inner spaces"),
]


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_framed_bodies(framing: str) -> None:
    mine, ref = both(reply(response(BODY, HEADERS, framing=framing)))
    assert_same(mine, ref)
    (outcome,) = mine.outcomes
    assert (outcome.status, outcome.body) == (200, BODY)
    assert [v for k, v in outcome.headers or () if k == b"set-cookie"] == [b"a=1; Path=/", b"b=2"]


def test_close_delimited_body() -> None:
    data = response(BODY, [*HEADERS, ("Connection", "close")], framing="close")
    mine, ref = both(reply(data, keep=False), ["/", "/"])
    assert_same(mine, ref)
    assert [o.body for o in mine.outcomes] == [BODY, BODY]
    assert (mine.connections, ref.connections) == (2, 2)  # the close ended each body


def test_padded_header_values() -> None:
    """Optional whitespace around a header's value is not part of it (RFC 9112 5.1)."""
    data = b"HTTP/1.1 200 OK\r\nX-A:   padded   \r\nX-B:\tx\t\r\nContent-Length: 2\r\n\r\nok"
    mine, ref = both(reply(data))
    assert_same(mine, ref)
    assert (mine.outcomes[0].headers or ())[:2] == ((b"x-a", b"padded"), (b"x-b", b"x"))


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_keep_alive_reuses_one_connection(framing: str) -> None:
    mine, ref = both(reply(response(BODY, HEADERS, framing=framing)), ["/1", "/2", "/3"])
    assert_same(mine, ref)
    assert [o.body for o in mine.outcomes] == [BODY] * 3
    assert (mine.connections, ref.connections) == (1, 1)


def test_server_closes_an_idle_keep_alive_connection() -> None:
    """The server drops the connection after 0.1 s idle; the client's next request, 0.3 s
    later, goes out on a new one and succeeds."""
    mine, ref = both(reply(response(BODY, HEADERS)), ["/1", "/2"], pause_s=0.3, idle_close_s=0.1)
    assert_same(mine, ref)
    assert [o.body for o in mine.outcomes] == [BODY] * 2
    assert (mine.connections, ref.connections) == (2, 2)


def test_server_closes_a_reused_connection_unanswered() -> None:
    """The race the test above avoids: the second request goes out on the pooled connection,
    which the server closes without answering. Both clients send it once more (a GET is
    idempotent) on a new connection."""
    answered = 0

    async def flaky(head: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal answered
        answered += 1
        if answered % 3 == 2:  # each client's second request (three heads per client)
            return False
        writer.write(response(BODY, HEADERS))
        return True

    mine, ref = both(flaky, ["/1", "/2"])
    assert_same(mine, ref)
    assert [o.body for o in mine.outcomes] == [BODY] * 2
    assert (mine.connections, ref.connections) == (2, 2)


# redirects


def _redirect(status: str, location: Callable[[bytes], str]) -> Callable[[bytes], bytes]:
    return lambda head: response(b"moved", [("Location", location(head))], status=status)


def _to(path: str) -> Callable[[bytes], str]:
    return lambda head: path


REDIRECTS = routes(
    {
        "/start": _redirect("301 Moved Permanently", lambda head: "/hop/two"),  # absolute path
        "/hop/two": _redirect(  # absolute URL
            "302 Found", lambda head: f"http://{host_of(head)}/hop/deeper/three"
        ),
        "/hop/deeper/three": _redirect("307 Temporary Redirect", lambda head: "../end?q=1"),
        "/hop/end?q=1": lambda head: response(BODY, HEADERS),
    }
)


def test_redirect_chain() -> None:
    mine, ref = both(REDIRECTS, ["/start"])
    assert_same(mine, ref)
    (outcome,) = mine.outcomes
    assert (outcome.status, outcome.body) == (200, BODY)
    assert (outcome.final_url or "").endswith("/hop/end?q=1")
    assert (mine.connections, ref.connections) == (1, 1)  # every hop on the one connection


def test_too_many_redirects() -> None:
    endless = routes({f"/{i}": _redirect("302 Found", _to(f"/{i + 1}")) for i in range(30)})
    mine, ref = both(endless, ["/0"])
    assert_same(mine, ref)
    assert mine.outcomes[0].error == "bad-response"


# content codings


TEXT = b"<!doctype html><p>" + b"compressible text, " * 500 + b"</p>"


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


CODINGS = {
    "gzip": gzip.compress(TEXT),
    "deflate": zlib.compress(TEXT),  # zlib-wrapped, as RFC 9110 says
    "deflate-raw": _raw_deflate(TEXT),  # as some servers send it
    "br": brotli.compress(TEXT),
    "GZip": gzip.compress(TEXT),  # codings are case-insensitive
}


@pytest.mark.parametrize("name", list(CODINGS))
@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_content_codings(name: str, framing: str) -> None:
    coding = "deflate" if name == "deflate-raw" else name
    headers = [("Content-Type", "text/html"), ("Content-Encoding", coding)]
    mine, ref = both(reply(response(CODINGS[name], headers, framing=framing)))
    assert_same(mine, ref)
    assert mine.outcomes[0].body == TEXT


def test_zstd() -> None:
    data = response(zstandard.ZstdCompressor().compress(TEXT),
                    [("Content-Type", "text/html"), ("Content-Encoding", "zstd")])  # fmt: skip
    mine, ref = both(reply(data))
    assert mine.outcomes[0].body == TEXT
    if not HAS_ZSTD:
        # aiohttp decodes zstd only with backports.zstd (or Python 3.14's compression.zstd);
        # without either it fails the response (ClientResponseError 400: "Can not decode
        # content-encoding: zstandard (zstd)"), which is no difference of the crawler's.
        assert ref.outcomes[0].error == "bad-response"
        pytest.skip("aiohttp cannot decode zstd here: backports.zstd is not installed")
    assert_same(mine, ref)


def test_stacked_codings_are_decoded_by_us_only() -> None:
    """``Content-Encoding: gzip, br`` (br over gzip): the crawler undoes both, as browsers
    and curl do; aiohttp decodes a single coding only, and hands a stacked body over as it
    came (still compressed), with no error. Not a bug of ours: aiohttp's limitation."""
    wire = brotli.compress(gzip.compress(TEXT))
    data = response(wire, [("Content-Type", "text/html"), ("Content-Encoding", "gzip, br")])
    mine, ref = both(reply(data))
    assert mine.outcomes[0].body == TEXT
    assert ref.outcomes[0].body == wire
    assert mine.outcomes[0].headers == ref.outcomes[0].headers
    assert mine.outcomes[0].status == ref.outcomes[0].status == 200


def test_x_gzip_is_decoded_by_us_only() -> None:
    """``x-gzip`` is gzip (RFC 9110 8.4.1.3: a recipient should treat it as such): the
    crawler decodes it; aiohttp knows only ``gzip`` and hands the body over compressed."""
    wire = gzip.compress(TEXT)
    data = response(wire, [("Content-Type", "text/html"), ("Content-Encoding", "x-gzip")])
    mine, ref = both(reply(data))
    assert (mine.outcomes[0].body, ref.outcomes[0].body) == (TEXT, wire)


# failures


def test_truncated_content_length_body() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\nshort"
    mine, ref = both(reply(data, keep=False))
    assert_same(mine, ref)
    assert mine.outcomes[0].error == "bad-response"


def test_truncated_chunked_body() -> None:
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n10\r\nshort"
    mine, ref = both(reply(data, keep=False))
    assert_same(mine, ref)
    assert mine.outcomes[0].error == "bad-response"


@pytest.mark.parametrize(
    ("lines", "error"),
    [([b"gzip", b"chunked"], "bad-response"), ([b"identity", b"chunked"], "bad-response"),
     ([b"chunked, gzip"], None)],
)  # fmt: skip
def test_chunked_is_read_from_every_transfer_encoding_line(
    lines: list[bytes], error: str | None
) -> None:
    """``chunked`` last across the lines: a close before the 0-size chunk truncates it;
    ``chunked`` not last: the body ends at the close."""
    head = b"".join(b"Transfer-Encoding: " + line + b"\r\n" for line in lines)
    data = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + head + b"\r\n5\r\nhello\r\n"
    mine, ref = both(reply(data, keep=False))
    assert_same(mine, ref)
    assert mine.outcomes[0].error == error


def test_an_interim_response_s_body_is_not_the_page_s() -> None:
    interim = b"HTTP/1.1 199 Odd\r\nContent-Length: 9\r\n\r\nINJECTED!"
    mine, ref = both(reply(interim + response(BODY, HEADERS)))
    assert_same(mine, ref)
    assert mine.outcomes[0].body == BODY


def test_a_truncated_compressed_body_is_an_error_to_us_only() -> None:
    """Complete framing, but a gzip stream cut short before its end marker: the crawler
    fails it (``bad-response``: the page is not all there, and a stored half page would
    pass for the whole one); aiohttp hands over what it could decompress, as a 200."""
    data = response(gzip.compress(TEXT)[:-20],
                    [("Content-Type", "text/html"), ("Content-Encoding", "gzip")])  # fmt: skip
    mine, ref = both(reply(data))
    assert mine.outcomes[0].error == "bad-response"
    assert ref.outcomes[0].status == 200 and TEXT.startswith(ref.outcomes[0].body or b"?")


@pytest.mark.parametrize(
    "data",
    [b"SPAM / HTTP/1.1\r\n\r\n", b"HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n"],
)  # fmt: skip
def test_malformed_responses(data: bytes) -> None:
    mine, ref = both(reply(data))
    assert_same(mine, ref)
    assert mine.outcomes[0].error == "bad-response"


def test_connection_refused() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"

        async def go() -> tuple[list[Outcome], list[Outcome]]:
            return await ours([url]), await theirs([url])

        mine, ref = asyncio.run(go())
    assert mine == ref == [Outcome(error="connect")]


def test_silent_server_times_out() -> None:
    async def silent(head: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(3)
        return False

    mine, ref = both(silent, timeout=0.5)
    assert_same(mine, ref)
    assert mine.outcomes[0].error == "timeout"


def test_a_close_without_an_answer_is_a_connect_failure_to_us() -> None:
    """A new connection that the server closes after reading the request, without a byte of
    answer: the crawler calls it ``connect`` (``ConnectError``: no response ever began, so
    the host counts as unreachable and the retry policy treats it as a connection error);
    aiohttp raises ``ServerDisconnectedError``, a ``bad-response`` in this mapping."""
    mine, ref = both(reply(b"", keep=False))
    assert mine.outcomes[0].error == "connect"
    assert ref.outcomes[0].error == "bad-response"


def _chain(hops: int) -> Respond:
    """``/0`` redirects (302) to ``/1`` ... to ``/{hops}``, which answers 200."""
    table: dict[str, Callable[[bytes], bytes]] = {
        f"/{i}": _redirect("302 Found", _to(f"/{i + 1}")) for i in range(hops)
    }
    table[f"/{hops}"] = lambda head: response(BODY, HEADERS)
    return routes(table)


@pytest.mark.parametrize("hops", [19, 21])
def test_the_redirect_limit_is_the_same(hops: int) -> None:
    """``max_redirects=20`` on both: 19 hops are followed by both, 21 by neither."""
    mine, ref = both(_chain(hops), ["/0"])
    assert_same(mine, ref)
    assert mine.outcomes[0].error == (None if hops < 20 else "bad-response")


def test_a_20th_redirect_is_followed_by_us_only() -> None:
    """``max_redirects=20`` and exactly 20 hops: the crawler follows them all (its setting
    counts hops followed, as the Fetch standard's redirect count of 20 and Chrome's
    limit do); aiohttp raises ``TooManyRedirects`` at the 20th redirect response
    (``redirects >= max_redirects`` after counting it), so it follows 19 at most."""
    mine, ref = both(_chain(20), ["/0"])
    assert (mine.outcomes[0].status, mine.outcomes[0].body) == (200, BODY)
    assert (mine.outcomes[0].final_url or "").endswith("/20")
    assert ref.outcomes[0].error == "bad-response"
    assert "TooManyRedirects" in ref.outcomes[0].detail


@pytest.mark.parametrize(
    "data",
    [response(BODY, [("Connection", "close")]),  # said so, with a length
     b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",  # HTTP/1.0: no keep-alive unless asked
     b"HTTP/1.0 200 OK\r\n\r\nok"],  # HTTP/1.0, the body ends at the close
)  # fmt: skip
def test_a_connection_the_server_will_close_is_not_reused(data: bytes) -> None:
    mine, ref = both(reply(data, keep=False), ["/1", "/2", "/3"])
    assert_same(mine, ref)
    assert mine.outcomes[0].error is None
    assert (mine.connections, ref.connections) == (3, 3)


# differences on purpose


def test_an_unknown_coding_is_an_error_to_us_only() -> None:
    """``Content-Encoding: foo``: the crawler cannot decode the body, so it has no page to
    parse (``bad-response``: "unsupported Content-Encoding 'foo'"); aiohttp hands the bytes
    over as they came, as a 200, and a caller would parse compressed bytes as text."""
    data = response(b"plain", [("Content-Type", "text/html"), ("Content-Encoding", "foo")])
    mine, ref = both(reply(data))
    assert mine.outcomes[0].error == "bad-response"
    assert (ref.outcomes[0].status, ref.outcomes[0].body) == (200, b"plain")


def test_bytes_after_a_deflate_stream_are_ignored_by_us_only() -> None:
    """Bytes after the end of a zlib stream: the crawler keeps the decoded stream and drops
    the rest (the ``deflate`` decoder stops at the stream's end marker); aiohttp fails the
    body (ClientPayloadError "Can not decode content-encoding: deflate"). After a gzip
    stream the same bytes are an error to both (taken for a next gzip member, whose header
    is wrong): the crawler's two zlib codings disagree here."""
    deflated = response(zlib.compress(TEXT) + b"garbage",
                        [("Content-Type", "text/html"), ("Content-Encoding", "deflate")])  # fmt: skip
    mine, ref = both(reply(deflated))
    assert (mine.outcomes[0].body, ref.outcomes[0].error) == (TEXT, "bad-response")
    gzipped = response(gzip.compress(TEXT) + b"garbage",
                       [("Content-Type", "text/html"), ("Content-Encoding", "gzip")])  # fmt: skip
    mine, ref = both(reply(gzipped))
    assert_same(mine, ref)
    assert mine.outcomes[0].error == "bad-response"


def test_a_long_header_is_refused_by_aiohttp_only() -> None:
    """A 10 000-byte header line: aiohttp's parser refuses any line over 8190 bytes
    (ClientResponseError 400 "Got more than 8190 bytes when reading"); the crawler's limit
    is on the whole head (``MAX_HEADER_BYTES``, 64 KiB), as browsers allow long cookies and
    CSP headers."""
    data = b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * 10_000 + b"\r\nContent-Length: 2\r\n\r\nok"
    mine, ref = both(reply(data))
    assert (mine.outcomes[0].status, mine.outcomes[0].body) == (200, b"ok")
    assert (mine.outcomes[0].headers or ())[0] == (b"x-big", b"x" * 10_000)
    assert ref.outcomes[0].error == "bad-response"


def test_a_body_sent_with_a_204_is_dropped_by_us_only() -> None:
    """A 204 has no body whatever its Content-Length (RFC 9110 15.3.5): both parsers frame
    it without one, and take the two bytes that follow for the next response. The crawler
    has the 204, then closes the connection (bytes nobody asked for: ``Connection``); aiohttp
    fails the request itself ("Bad status line ... b'ok'")."""
    data = b"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\nok"
    mine, ref = both(reply(data), ["/1", "/2"])
    assert [(o.status, o.body) for o in mine.outcomes] == [(204, b"")] * 2
    assert mine.connections == 2  # not reused: out of step with the server
    assert [o.error for o in ref.outcomes] == ["bad-response"] * 2


def test_a_304_has_no_body_to_us() -> None:
    """The Fetcher does not read a 304's body (``FetchResult.body`` is ``None``: nothing
    was downloaded, the stored copy stands); aiohttp reads an empty one. Same response."""
    mine, ref = both(reply(b'HTTP/1.1 304 Not Modified\r\nETag: "v"\r\n\r\n'))
    assert (mine.outcomes[0].status, mine.outcomes[0].body) == (304, None)
    assert (ref.outcomes[0].status, ref.outcomes[0].body) == (304, b"")
    assert mine.outcomes[0].headers == ref.outcomes[0].headers


def _location(location: str) -> Respond:
    """``/start`` redirects (302) to ``location`` (as latin-1 bytes); every other target
    answers 200 with the target it was asked for in ``X-Target``."""

    async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
        target = head.split(b" ", 2)[1].decode("latin-1")
        if target == "/start":
            writer.write(response(b"", [("Location", location)], status="302 Found"))
        else:
            writer.write(response(b"final", [("X-Target", target)]))
        return True

    return respond


def test_a_backslash_in_a_location_is_a_slash_to_us() -> None:
    """``Location: \\bs``: the crawler resolves it as the WHATWG URL standard (and so every
    browser) does, a backslash being a slash in an http URL: ``/bs``; aiohttp (yarl)
    percent-encodes it: ``/%5Cbs``."""
    mine, ref = both(_location("\\bs"), ["/start"])
    assert (mine.outcomes[0].final_url or "").endswith("/bs")
    assert (ref.outcomes[0].final_url or "").endswith("/%5Cbs")


def test_an_empty_location_is_a_redirect_loop_to_us() -> None:
    """``Location:`` with nothing in it: an empty reference resolves to the URL itself
    (the WHATWG URL standard, as browsers), a redirect loop to the crawler
    (``bad-response``); aiohttp sees no target and returns the 302 as the response."""
    mine, ref = both(_location(""), ["/start"])
    assert mine.outcomes[0].error == "bad-response"
    assert "redirect loop" in mine.outcomes[0].detail
    assert (ref.outcomes[0].status, ref.outcomes[0].body) == (302, b"")


def _cookie_gate(set_cookie: bool, via: str = "/b") -> Respond:
    """``/a`` → ``via`` → ``/a`` → 200 (``via`` ``/a``: ``/a`` → ``/a`` → 200): ``/a``
    redirects the first time each client comes (``set_cookie``: setting a cookie on the
    way, as a login, consent or cookie-check gate does) and answers 200 the second time."""
    visits = 0

    async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal visits
        if head.startswith(b"GET /b "):
            writer.write(response(b"", [("Location", "/a")], status="302 Found"))
        else:
            visits += 1
            if visits % 2:
                cookie = [("Set-Cookie", "gate=passed; Path=/")] if set_cookie else []
                writer.write(response(b"", [*cookie, ("Location", via)], status="302 Found"))
            else:
                writer.write(response(b"done"))
        return True

    return respond


@pytest.mark.parametrize("via", ["/b", "/a"])
def test_a_target_seen_before_in_the_chain_is_a_loop_to_us(via: str) -> None:
    """``/a`` → ``/b`` → ``/a`` → 200, or ``/a`` → ``/a`` → 200, with no cookie in play:
    the crawler stops at the first target it has seen before in the chain
    (``bad-response``, "redirect loop", ``Fetcher._follow``: nothing it sends has changed,
    so a server that answers by URL alone would loop for ever); aiohttp follows every hop
    within ``max_redirects`` and ends at the 200, as browsers do."""
    mine, ref = both(_cookie_gate(set_cookie=False, via=via), ["/a"])
    assert mine.outcomes[0].error == "bad-response"
    assert "redirect loop" in mine.outcomes[0].detail
    assert (ref.outcomes[0].status, ref.outcomes[0].body) == (200, b"done")


def test_a_cookie_gate_is_a_loop_to_us_without_keep_cookies() -> None:
    """``/a`` sets a cookie as it redirects, ``/b`` sends the client back: without
    ``--keep-cookies`` the crawler keeps no cookie, nothing it sends changes, and the
    chain is a loop; aiohttp's jar keeps the cookie and reaches the 200."""
    mine, ref = both(_cookie_gate(set_cookie=True), ["/a"])
    assert mine.outcomes[0].error == "bad-response"
    assert (ref.outcomes[0].status, ref.outcomes[0].body) == (200, b"done")


def test_a_cookie_set_on_the_way_to_a_target_lets_it_be_requested_again() -> None:
    """``/login`` sets the cookie and sends the client back to ``/a``, seen before the
    cookie was: with ``--keep-cookies`` both clients reach the 200."""
    visits = 0

    async def respond(head: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal visits
        if head.startswith(b"GET /login "):
            headers = [("Set-Cookie", "session=1; Path=/"), ("Location", "/a")]
            writer.write(response(b"", headers, status="302 Found"))
        else:
            visits += 1
            if visits % 2:
                writer.write(response(b"", [("Location", "/login")], status="302 Found"))
            else:
                writer.write(response(b"done"))
        return True

    mine, ref = both(respond, ["/a"], keep_cookies=True)
    assert_same(mine, ref)
    assert (mine.outcomes[0].status, mine.outcomes[0].body) == (200, b"done")


@pytest.mark.parametrize("via", ["/b", "/a"])
def test_a_cookie_gate_is_followed_with_keep_cookies(via: str) -> None:
    """``/a`` sets a cookie as it redirects (to ``/b``, which sends the client back, or to
    itself, a cookie check): with ``--keep-cookies`` the second request to ``/a`` carries
    the cookie, and the crawler should follow the chain to the 200, as aiohttp (whose jar
    always keeps cookies) and browsers do."""
    mine, ref = both(_cookie_gate(set_cookie=True, via=via), ["/a"], keep_cookies=True)
    assert (ref.outcomes[0].status, ref.outcomes[0].body) == (200, b"done")
    assert_same(mine, ref)


def test_a_latin1_byte_in_a_location_is_percent_encoded_by_us() -> None:
    """``Location: /caf\\xe9`` (a raw latin-1 byte, as old servers send): the crawler
    percent-encodes the byte as it came and follows it to ``/caf%E9``, as browsers do;
    aiohttp drops the byte and requests ``/caf``, another URL."""
    mine, ref = both(_location("/caf\xe9"), ["/start"])
    assert (mine.outcomes[0].final_url or "").endswith("/caf%E9"), mine.outcomes[0].detail
    assert (mine.outcomes[0].headers or ())[0] == (b"x-target", b"/caf%E9")
    assert (ref.outcomes[0].final_url or "").endswith("/caf")  # aiohttp: the byte is lost
