"""``Connection``: one HTTP/1.1 connection as an asyncio protocol, one request at a time.

The socket's bytes go to its ``ResponseFraming`` (``crawler.net.http.framing``) as they
arrive; the connection acts on what the framing found: wakes the request when the head is
in, breaks off on a framing error, closes when a body goes over its cap, and tells the pool
(``HttpClient``) when it is free again or gone.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from crawler.errors import ConnectError, IncompleteBody
from crawler.net.http.framing import ResponseFraming, ends_at_close
from crawler.net.http.response import Response

if TYPE_CHECKING:
    from crawler.net.http.client import HttpClient, Route


class Connection(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection: one request at a time, responses parsed as bytes arrive.

    A buffered protocol: the event loop reads the socket into the client's read buffer,
    shared by its connections (each read is parsed at once, and nothing keeps a view of
    it: llhttp hands the body over as new ``bytes``), instead of a new ``bytes`` a read."""

    def __init__(self, client: HttpClient, key: Route) -> None:
        self.client = client
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.framing = ResponseFraming()
        self.response: Response | None = None
        self.head: asyncio.Future[None] | None = None
        self.received = False
        """Any byte of the current response arrived (a stale connection shows none)."""
        self.closed = False
        self.idle_since = 0.0

    @property
    def keep_alive(self) -> bool:
        return self.framing.keep_alive

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
        framing = self.framing
        framing.feed(data)
        if framing.head_ready:
            self._signal_head(None)
        if framing.error is not None:
            self._broken(framing.error)
        elif framing.close_now:
            self.close()

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
            elif exc is None and ends_at_close(response):  # unframed: the close ends it
                response.complete = True
                response._wake()
            else:
                error = IncompleteBody(
                    f"connection closed after {response._size} bytes of the body"
                    + (f" of {response.content_length}" if response.content_length else "")
                )
                error.__cause__ = exc
                response._fail(error)

    # the client's side
    async def send(self, request: bytes, response: Response) -> None:
        """Write ``request``; return when ``response``'s status and headers have arrived."""
        assert self.transport is not None
        self.response = response
        self.received = False
        self.framing.begin(response)
        self.head = head = self.client.loop().create_future()
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

    def close(self, *, abort: bool = False) -> None:
        """Close the connection; ``abort``: at once, without TLS's closing handshake (the
        client is closing: nothing waits for the peer's answer to it)."""
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
            if abort:
                self.transport.abort()
            else:
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
