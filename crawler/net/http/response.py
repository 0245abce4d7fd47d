"""``Response``: one response's status, headers and body, as its connection frames them."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.net.http.connection import Connection


def header_text(value: bytes) -> str:
    """A header value as text: UTF-8, other bytes kept as surrogates (sent back as they came)."""
    return value.decode("utf-8", "surrogateescape")


class Response:
    """Status, headers and (once complete) body of one response.

    ``headers``: lower-case names, each to its first value (as aiohttp's ``get``); ``getall``
    and ``raw_headers``: every header as received, in order. Trailers are not kept. Call
    ``read`` for the body, then ``release`` (always: it returns the connection to the pool
    or closes it). Filled in by ``crawler.net.http.framing.ResponseFraming``.
    """

    __slots__ = (
        "_body_waiter",
        "_chunks",
        "_conn",
        "_size",
        "cap",
        "complete",
        "cut",
        "error",
        "final",
        "header_bytes",
        "headers",
        "raw_headers",
        "reason",
        "request",
        "status",
        "truncated",
        "url",
        "version",
    )

    def __init__(self, conn: Connection | None, url: str, cap: int, cut: bool = False) -> None:
        self._conn: Connection | None = conn
        self.url = url
        self.cap = cap
        self.cut = cut
        """A body over ``cap`` is cut there (``truncated``, the connection closed), not an
        error: what is read of it is a prefix (a robots.txt, of which only so much counts)."""
        self.truncated = False
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
        self._chunks: list[bytes | bytearray] = []
        self._size = 0
        self._body_waiter: asyncio.Future[None] | None = None

    def getall(self, name: str) -> list[str]:
        """Every value of header ``name`` (case-insensitive), in order."""
        wanted = name.lower().encode("latin-1")
        return [header_text(v) for k, v in self.raw_headers if k.lower() == wanted]

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
        if len(chunks) == 1 and type(chunks[0]) is bytes:
            return chunks[0]
        return b"".join(chunks)

    def release(self) -> None:
        """Done with the response: its connection goes back to the pool if it can be reused
        (a complete response, keep-alive), else it is closed. Idempotent."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.finished(self)

    # called by the framing and the connection
    def _fail(self, error: BaseException) -> None:
        if self.error is None and not self.complete:
            self.error = error
            self._wake()

    def _wake(self) -> None:
        waiter = self._body_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
