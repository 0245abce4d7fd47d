"""HTTP/1.1 framing, without IO: request bytes out, response bytes in.

``ResponseFraming`` is fed what a connection receives and fills in the ``Response`` being
read (status, headers, body chunks, completion), as llhttp (``httptools``) frames it:
Content-Length, chunked, or until the connection closes (``ends_at_close``). It never
touches a socket or an event loop: what it found is left in its attributes (``head_ready``,
``error``, ``close_now``) for the connection to act on, so it is tested on bytes alone.

Invariants:
- at most ``MAX_HEADER_BYTES`` arrive without a byte of body (status line, headers, interim
  responses, chunk framing, trailers): past that, ``error``;
- the body never grows past the response's cap: ``BodyTooLarge`` on the response (or, for
  a response that takes a prefix, ``cut``, the body cut at the cap and ``truncated``), and
  ``close_now``;
- bytes after the response's end, or before a request, are a stream out of step.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from urllib.parse import unquote

import httptools

from crawler.errors import BodyTooLarge, ProtocolError
from crawler.net.http.response import Response, header_text

MAX_HEADER_BYTES = 64 * 1024
"""The most bytes a response may send without a byte of body: its status line and headers,
interim responses, chunk framing, trailers (a server could otherwise send them forever)."""
WIRE_PER_BODY_BYTE = 8
"""A response may take at most this many bytes on the wire per byte of its body cap (plus
``MAX_HEADER_BYTES``): a chunked body of 1-byte chunks each behind 60 KB of chunk
extension never has 64 KiB without a body byte, yet would stream for the whole timeout."""
SMALL_PIECE = 4096
"""Body pieces smaller than this (a chunked body's tiny chunks) are gathered into one
``bytearray``: each ``bytes`` of its own costs ~33 bytes more than its data, so a body of
tiny chunks would weigh many times what the body cap allows."""
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Request headers never recorded (``record=True``): they hold credentials."""
DEFAULT_PORTS = {"http": 80, "https": 443}
_BAD_CHARACTER = re.compile(r"[\x00-\x20\x7f]")
"""What a request target or Host must not hold (controls, space: they would split the request)."""


class ResponseFraming:
    """One connection's response stream: ``begin`` a response, ``feed`` it bytes.

    After each ``feed``: ``head_ready`` when the final status and headers came in with it
    (interim 1xx responses are skipped; once a response, so the connection wakes its request
    once); ``error``, a ``ProtocolError`` that breaks the connection; ``close_now``, the body
    went over its cap (the response holds the error)."""

    __slots__ = ("close_now", "error", "head_ready", "keep_alive", "parser", "quiet_bytes",
                 "response", "wire_bytes")  # fmt: skip

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        # What aiohttp's response parser forgives too: real servers are sloppy (bare LF line
        # ends, odd characters in header values, spaces after a chunk's size).
        self.parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_optional_cr_before_lf=True,
            lenient_spaces_after_chunk_size=True,
        )
        self.response: Response | None = None
        self.head_ready = False
        self.error: ProtocolError | None = None
        self.close_now = False
        self.keep_alive = False
        """The final response allows the connection's reuse (known with its headers)."""
        self.quiet_bytes = 0
        """Bytes received since the request or the last byte of body (``MAX_HEADER_BYTES``)."""
        self.wire_bytes = 0
        """Bytes received since the request (``WIRE_PER_BODY_BYTE``)."""

    def begin(self, response: Response) -> None:
        """The next bytes answer the request ``response`` is for."""
        self.response = response
        self.head_ready = False
        self.error = None
        self.close_now = False
        self.keep_alive = False
        self.quiet_bytes = 0
        self.wire_bytes = 0

    def feed(self, data: bytes | memoryview) -> None:
        """Frame ``data``; see the attributes for what it held."""
        response = self.response
        assert response is not None
        self.head_ready = False
        self.quiet_bytes += len(data)
        self.wire_bytes += len(data)
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
            most = WIRE_PER_BODY_BYTE * response.cap + MAX_HEADER_BYTES
            if self.wire_bytes > most and not response.complete:
                self._broken(ProtocolError(f"more than {most} bytes on the wire for the body"))

    def _broken(self, error: ProtocolError) -> None:
        if self.error is None:
            self.error = error

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
        if response is None or response.final or self.error is not None:  # final: a trailer
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
            response.headers[key] = header_text(value)

    def on_headers_complete(self) -> None:
        response = self.response
        if response is None or response.final or response.error is not None:
            return
        if self.error is not None:
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            return  # an interim response (100 Continue ...): the real one follows
        response.final = True
        response.status = status
        response.version = self.parser.get_http_version()
        # Known now, with the framing; after the message llhttp has reset what it reads.
        self.keep_alive = self.parser.should_keep_alive()
        self.head_ready = True

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is None or response.complete or response.error is not None or self.error:
            return
        if not response.final:
            # An interim response's own body (llhttp frames one for a 1xx other than 100-103
            # that declares a length): dropped, as aiohttp drops it; it counts as bytes
            # without a body, so an endless one is cut off.
            return
        self.quiet_bytes = 0
        response._size += len(body)
        if response._size > response.cap:
            self.close_now = True
            if not response.cut:
                response._fail(BodyTooLarge(response.cap))
                return
            body = body[: len(body) - (response._size - response.cap)]
            response._size = response.cap
            response.truncated = response.complete = True
            response._chunks.append(body)
            response._wake()
            return
        chunks = response._chunks
        if len(body) < SMALL_PIECE:  # a chunked body of tiny chunks: one buffer, not
            if chunks and type(chunks[-1]) is bytearray:  # an object of ~40 bytes each
                chunks[-1] += body
            else:
                chunks.append(bytearray(body))
            return
        chunks.append(body)

    def on_message_complete(self) -> None:
        response = self.response
        if response is None or not response.final or response.complete:
            return  # the end of an interim response (or of one nobody asked for)
        if self.error is not None:
            return
        response.complete = True
        response._wake()


def ends_at_close(response: Response) -> bool:
    """Whether ``response``'s body is framed by the connection's close (no length, not
    chunked, and a status that has a body). Chunked as llhttp and RFC 9112 (6.1) read it:
    ``chunked`` is the last coding of all the Transfer-Encoding lines together, so
    ``gzip`` then ``chunked`` on two lines is chunked (a close before the last chunk is a
    truncated body), and ``chunked, gzip`` is not (its body ends at the close)."""
    if "content-length" in response.headers or response.status in (204, 304):
        return False
    codings = b",".join(v for k, v in response.raw_headers if k.lower() == b"transfer-encoding")
    last = codings.rsplit(b",", 1)[-1].strip().lower()
    return last != b"chunked"


def request_head(
    target: str,
    authority: str,
    fixed: str,
    userinfo: str,
    headers: Mapping[str, str] | None,
) -> bytes:
    """A GET's bytes: ``fixed``, the headers every request sends (already ``Name: value``
    lines), then Basic credentials from ``userinfo`` and this request's ``headers``."""
    extra = ""
    if userinfo:
        extra = f"Authorization: {basic_auth(userinfo)}\r\n"
    if headers:
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ProtocolError(f"a line break in the {name} header: {value[:200]!r}")
            extra += f"{name}: {value}\r\n"
    head = f"GET {target} HTTP/1.1\r\nHost: {authority}\r\n{fixed}{extra}\r\n"
    return head.encode("utf-8", "surrogateescape")  # a validator sent back as it came


def basic_auth(userinfo: str) -> str:
    """``Authorization``'s value for a URL's percent-encoded ``user:password``."""
    user, _, password = userinfo.partition(":")
    token = f"{unquote(user)}:{unquote(password)}".encode()
    return "Basic " + base64.b64encode(token).decode("ascii")


def split_url(url: str) -> tuple[str, str, int, str, str, str]:
    """(scheme, host, port, Host header, request target, userinfo) of an absolute URL."""
    colon = url.find("://")
    scheme = url[:colon].lower() if colon > 0 else ""
    if scheme not in DEFAULT_PORTS:
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
    host, port = authority, DEFAULT_PORTS[scheme]
    bracket = authority.rfind("]")
    separator = authority.rfind(":")
    if separator > bracket:
        host = authority[:separator]
        digits = authority[separator + 1 :]
        if not (digits.isascii() and digits.isdigit()) or not 0 < int(digits) < 65536:
            raise ProtocolError(f"bad port in URL: {url[:200]}")
        port = int(digits)
        if port == DEFAULT_PORTS[scheme]:
            authority = host
    if not host or not url.isascii() or _BAD_CHARACTER.search(url, start) is not None:
        raise ProtocolError(f"not a valid URL: {url[:200]}")
    return scheme, host.lower(), port, authority.lower(), target, userinfo
