"""crawler.net.http.framing on bytes alone (no socket, no event loop), from RFC 9112."""

from __future__ import annotations

import asyncio

import pytest

from crawler.errors import BodyTooLarge, ProtocolError
from crawler.net.http.framing import (
    MAX_HEADER_BYTES,
    ResponseFraming,
    basic_auth,
    ends_at_close,
    request_head,
    split_url,
)
from crawler.net.http.response import Response


def framed(*pieces: bytes, cap: int = 1 << 20) -> tuple[ResponseFraming, Response]:
    framing, response = ResponseFraming(), Response(None, "http://e.com/", cap)
    framing.begin(response)
    for piece in pieces:
        framing.feed(piece)
    return framing, response


def body(response: Response) -> bytes:
    return asyncio.run(response.read())


def test_a_content_length_body_completes_the_message() -> None:
    framing, response = framed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello")
    assert framing.head_ready and framing.error is None and framing.keep_alive
    assert (response.status, response.reason, response.version) == (200, "OK", "1.1")
    assert response.complete and body(response) == b"hello"
    assert response.headers == {"content-length": "5", "x-a": "1"}


def test_split_at_every_byte_gives_the_same_response() -> None:
    wire = (b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=1\r\n"
            b"Set-Cookie: b=2\r\n\r\n4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nT: x\r\n\r\n")  # fmt: skip
    framing, response = framed(*(wire[i : i + 1] for i in range(len(wire))))
    assert framing.error is None and response.complete
    assert (response.status, response.reason) == (404, "Not Found")
    assert body(response) == b"Wikipedia"
    assert response.getall("set-cookie") == ["a=1", "b=2"]
    assert "t" not in response.headers  # a trailer is not a header (RFC 9112 7.1.2)


def test_every_two_piece_split_gives_the_same_response() -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Type: text/html\r\n\r\nhello world"
    for cut in range(len(wire) + 1):
        framing, response = framed(wire[:cut], wire[cut:])
        assert framing.error is None and framing.keep_alive and response.complete, cut
        assert response.headers["content-type"] == "text/html" and body(response) == b"hello world"


def test_a_body_of_tiny_chunks_is_held_in_few_buffers() -> None:
    """A server can send its body in 1-byte chunks: held as a ``bytes`` each, 100 KB of
    body took ~3.4 MB; now the pieces share buffers, and the body reads the same."""
    pieces = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
    pieces += [b"1\r\n" + bytes([65 + i % 26]) + b"\r\n" for i in range(100_000)]
    pieces += [b"5000\r\n" + b"z" * 0x5000 + b"\r\n", b"2\r\nok\r\n0\r\n\r\n"]
    framing, response = framed(b"".join(pieces))
    assert framing.error is None and response.complete
    assert len(response._chunks) <= 3
    expected = bytes(65 + i % 26 for i in range(100_000)) + b"z" * 0x5000 + b"ok"
    got = body(response)
    assert type(got) is bytes and got == expected


def test_a_body_of_exactly_the_cap_is_taken() -> None:
    framing, response = framed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" + b"x" * 10, cap=10)
    assert not framing.close_now and response.error is None and body(response) == b"x" * 10


def test_a_body_in_parts_stays_incomplete_until_its_length() -> None:
    framing, response = framed(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabc")
    assert framing.head_ready and not response.complete and not ends_at_close(response)
    framing.feed(b"def")
    assert response.complete and body(response) == b"abcdef"


def test_interim_responses_are_skipped() -> None:
    _, response = framed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"
                               b"Link: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")  # fmt: skip
    assert response.status == 200 and response.complete and "link" not in response.headers


def test_connection_close_and_http_1_0_end_keep_alive() -> None:
    framing, _ = framed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert framing.head_ready and not framing.keep_alive
    framing, _ = framed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert not framing.keep_alive


def test_a_body_without_length_ends_at_the_close() -> None:
    framing, response = framed(b"HTTP/1.1 200 OK\r\n\r\npart")
    assert framing.head_ready and not response.complete and ends_at_close(response)
    _, no_body = framed(b"HTTP/1.1 304 Not Modified\r\n\r\n")
    assert not ends_at_close(no_body)  # 304 has no body whatever its headers say (6.3)


def test_a_malformed_status_line_is_an_error() -> None:
    framing, _ = framed(b"HTTP/1.1 2x0 OK\r\n\r\n")
    assert isinstance(framing.error, ProtocolError) and not framing.head_ready


def test_headers_over_the_cap_are_an_error() -> None:
    many = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 1000) for i in range(80))
    framing, _ = framed(b"HTTP/1.1 200 OK\r\n" + many + b"\r\n")
    assert isinstance(framing.error, ProtocolError) and "exceed" in str(framing.error)
    endless = ResponseFraming()
    endless.begin(Response(None, "http://e.com/", 100))
    endless.feed(b"HTTP/1.1 200 OK\r\nX: ")
    endless.feed(b"v" * (MAX_HEADER_BYTES + 1))  # one header that never ends
    assert isinstance(endless.error, ProtocolError) and "without a body" in str(endless.error)


def test_a_body_over_the_cap_fails_the_response_and_closes() -> None:
    framing, response = framed(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n" + b"x" * 20, cap=10)
    assert framing.close_now and isinstance(response.error, BodyTooLarge)
    assert response.error.limit == 10 and b"".join(response._chunks) == b""
    with pytest.raises(BodyTooLarge):
        body(response)


@pytest.mark.parametrize("framing_kind", ["length", "chunked", "close"])
def test_a_cut_response_over_the_cap_ends_there_as_a_prefix(framing_kind: str) -> None:
    """A response that takes a prefix (``cut``, a robots.txt) is complete at its cap, its
    body the first ``cap`` bytes, ``truncated``; the connection still closes (the rest of
    the body is in the way of any next response)."""
    head = {"length": b"Content-Length: 5000\r\n", "chunked": b"Transfer-Encoding: chunked\r\n",
            "close": b"Connection: close\r\n"}[framing_kind]  # fmt: skip
    data = bytes(range(256)) * 20
    payload = b"".join(b"%x\r\n%s\r\n" % (100, data[i : i + 100]) for i in range(0, 5000, 100))
    sent = payload if framing_kind == "chunked" else data[:5000]
    framing, response = ResponseFraming(), Response(None, "http://e.com/", 1234, cut=True)
    framing.begin(response)
    framing.feed(b"HTTP/1.1 200 OK\r\n" + head + b"\r\n")
    for start in range(0, len(sent), 333):
        framing.feed(sent[start : start + 333])
    assert framing.close_now and framing.error is None and response.error is None
    assert response.complete and response.truncated and body(response) == data[:1234]


def test_a_nul_in_a_header_value_is_refused() -> None:
    framing, _ = framed(b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n")
    assert isinstance(framing.error, ProtocolError)


def test_request_bytes_and_urls() -> None:
    assert split_url("http://u:p%40@Example.COM:80/a?b#c") == (
        "http", "example.com", 80, "example.com", "/a?b", "u:p%40")  # fmt: skip
    assert split_url("https://[::1]:8443?q")[1:5] == ("[::1]", 8443, "[::1]:8443", "/?q")
    for bad in ("ftp://e.com/", "http://e.com:0/", "http://e.com/a b", "http://é.com/"):
        with pytest.raises(ProtocolError):
            split_url(bad)
    head = request_head("/x", "e.com", "User-Agent: t\r\n", "u:p", {"If-None-Match": '"1"'})
    assert head == (b"GET /x HTTP/1.1\r\nHost: e.com\r\nUser-Agent: t\r\n"
                    b"Authorization: Basic dTpw\r\nIf-None-Match: \"1\"\r\n\r\n")  # fmt: skip
    assert basic_auth("a%3Ab:c") == "Basic YTpiOmM="
    with pytest.raises(ProtocolError, match="line break"):
        request_head("/", "e.com", "", "", {"X": "a\r\nY: b"})
