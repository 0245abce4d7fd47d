"""Fetcher: the only place that talks HTTP (aiohttp). One ``ClientSession`` per crawl.

Owns: request headers, deadlines, body size caps (counted on decompressed bytes while
reading), redirects (followed here, hop by hop, each hop vetted by the caller), and the
translation of aiohttp/asyncio/OS exceptions into ``FetchError``s (always chained).

Invariants:
- a ``FetchResult`` with a body holds the complete body: truncated or reset transfers raise;
- a body is never larger than ``max_body_bytes``;
- a request never outlives ``timeout`` seconds, however slowly the server drips;
- non-HTML bodies are not downloaded (the status and headers are kept).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from yarl import URL

from crawler.decoding import BadEncoding, BodyDecoder, BodyTooLarge, accept_encoding, codings
from crawler.errors import (
    BadResponse,
    Blocked,
    ConnectFailed,
    DNSFailed,
    FetchError,
    FetchTimeout,
    TooLarge,
)
from crawler.settings import Settings
from crawler.ssrf import GuardedResolver, HostAllowed, blocked_reason
from crawler.urls import resolve_url

log = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
SNIFFED_TYPES = frozenset({"", "text/plain", "application/octet-stream", "unknown/unknown"})
"""Types servers send for HTML by mistake: the body is downloaded and sniffed."""
_CHUNK_BYTES = 1 << 16
_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"

RedirectCheck = Callable[[str], str | None]
"""Given a redirect target (normalised), ``None`` to follow it or a reason to stop there."""


@dataclass(slots=True)
class FetchResult:
    """A response. ``body`` is ``None`` when it was not downloaded (not HTML, redirect).

    Not frozen, though read-only by convention: one is built per response, and a frozen
    dataclass's ``__init__`` costs ~10x as much (an ``object.__setattr__`` per field).
    """

    url: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes | None
    x_robots_tag: str = ""
    redirect_to: str | None = None
    stopped: str | None = None
    """Why a redirect was not followed (its target was out of scope, seen before ...)."""
    retry_after: str | None = None
    """The ``Retry-After`` header, if any."""
    etag: str | None = None
    last_modified: str | None = None
    raw: bytes | None = None
    """``--store-body``: the body as received (before Content-Encoding decoding)."""
    headers_json: str | None = None
    """``--store-body``: status line, response and request headers, as JSON."""

    @property
    def is_html(self) -> bool:
        """HTML to parse: declared and not binary, or undeclared/generic and sniffed as HTML."""
        body = self.body
        if body is None:
            return False
        if self.content_type in HTML_TYPES:
            return not looks_binary(body)
        return self.content_type in SNIFFED_TYPES and sniff_html(body)


def sniff_html(body: bytes) -> bool:
    """True if a body looks like HTML (WHATWG MIME sniffing's HTML patterns, simplified)."""
    head = body[:1024].lstrip(b" \t\r\n\x0c\xef\xbb\xbf").lower()
    return head.startswith(
        (b"<!doctype html", b"<html", b"<head", b"<body", b"<title", b"<p", b"<div", b"<!--")
    ) and not looks_binary(body)


def looks_binary(body: bytes) -> bool:
    """A NUL byte in the first KiB (not UTF-16 text): images, archives, executables."""
    head = body[:1024]
    return b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff"))


def open_session(settings: Settings, allowed: HostAllowed) -> aiohttp.ClientSession:
    """The crawl's one HTTP session: connector sized to the concurrency, DNS cached, no
    cookies, and a resolver that refuses private addresses for hosts not ``allowed``."""
    connector = aiohttp.TCPConnector(
        limit=settings.concurrency,
        limit_per_host=0,
        ttl_dns_cache=300,
        enable_cleanup_closed=False,
        resolver=GuardedResolver(allowed),
    )
    return aiohttp.ClientSession(
        connector=connector,
        # The whole request's deadline is the Fetcher's (``Deadlines``): aiohttp's ``total``
        # costs a timer armed and cancelled per request.
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=settings.connect_timeout),
        headers={
            "User-Agent": settings.user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": accept_encoding(),
        },
        cookie_jar=aiohttp.DummyCookieJar(),
        raise_for_status=False,
        auto_decompress=False,  # decoding.BodyDecoder does it, capped and stack-aware
    )


class _Deadline:
    __slots__ = ("at", "cancelling", "expired", "task")

    def __init__(self, task: asyncio.Task[object] | None, at: float) -> None:
        self.task = task
        self.at = at
        self.cancelling = task.cancelling() if task is not None else 0
        self.expired = False


class Deadlines:
    """Deadlines of the requests in flight, all ``timeout_s`` after their start, watched by
    one timer (what ``asyncio.timeout`` does, for many requests at once).

    aiohttp's own total timeout, like ``asyncio.timeout``, arms a timer when a request
    starts and cancels it when it ends: 20-40 us of the event loop's time a request
    (measured on a loop of 4,000 fetches). Here requests start in deadline order, so a
    FIFO keeps the deadlines sorted; a request that ends only drops its task, and the one
    timer, when it fires at the oldest deadline, cancels the overdue requests' tasks and
    sleeps until the next live deadline. ``expired`` tells the task why it was cancelled.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._entries: deque[_Deadline] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> _Deadline:
        """The current task's request starts now; call ``end`` when it is over."""
        loop = asyncio.get_running_loop()
        entries = self._entries
        while entries and entries[0].task is None:  # ended: forget them as we go
            entries.popleft()
        deadline = _Deadline(asyncio.current_task(), loop.time() + self.timeout_s)
        entries.append(deadline)
        if self._timer is None:
            self._timer = loop.call_at(deadline.at, self._expire)
        return deadline

    @staticmethod
    def end(deadline: _Deadline) -> None:
        deadline.task = None

    @staticmethod
    def timed_out(deadline: _Deadline) -> bool:
        """On a ``CancelledError``: whether it was this deadline's (only), which is then
        taken back; ``False`` for a cancellation from elsewhere, which goes on."""
        task = deadline.task
        return deadline.expired and task is not None and task.uncancel() <= deadline.cancelling

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Stop the timer (requests still in flight keep no deadline)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._entries.clear()

    def _expire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now, entries = loop.time(), self._entries
        while entries:
            deadline = entries[0]
            if deadline.task is not None:
                if deadline.at > now:
                    self._timer = loop.call_at(deadline.at, self._expire)
                    return
                deadline.expired = True
                deadline.task.cancel()
            entries.popleft()


class Fetcher:
    """Makes requests with the limits of ``settings``; ``fetch`` returns a ``FetchResult``."""

    def __init__(self, session: aiohttp.ClientSession, settings: Settings) -> None:
        self._session = session
        self._max_body_bytes = settings.max_body_bytes
        self._max_redirects = settings.max_redirects
        self._timeout_s = settings.timeout
        self._keep_raw = settings.store_body
        self.deadlines = Deadlines(settings.timeout)

    def close(self) -> None:
        """The crawl is over: leave no timer behind on the event loop (a library user's
        loop lives on)."""
        self.deadlines.close()

    async def fetch(
        self,
        url: str,
        check_redirect: RedirectCheck | None = None,
        *,
        any_type: bool = False,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> FetchResult:
        """GET ``url``, following redirects that ``check_redirect`` allows.

        ``any_type`` downloads the body whatever its type (robots.txt, sitemaps).
        ``etag`` / ``last_modified`` make it a conditional GET (a 304 when unchanged).
        Raises a ``FetchError`` for transport failures, timeouts and oversize bodies.
        """
        conditional: dict[str, str] | None = None
        if etag or last_modified:
            conditional = {}
            if etag:
                conditional["If-None-Match"] = etag
            if last_modified:
                conditional["If-Modified-Since"] = last_modified
        try:
            return await self._follow(url, check_redirect, any_type, conditional)
        except FetchError:
            raise
        except TimeoutError as exc:
            raise FetchTimeout(url, f"no complete response within {self._timeout_s:g} s") from exc
        except aiohttp.ClientPayloadError as exc:
            raise BadResponse(url, f"incomplete body: {exc}") from exc
        except (aiohttp.ClientConnectionError, OSError) as exc:
            reason = blocked_reason(exc)
            if reason is not None:
                raise Blocked(url, f"refused {reason} address") from exc
            if isinstance(exc, aiohttp.ClientConnectorDNSError):
                raise DNSFailed(url, str(exc) or "name not resolved") from exc
            raise ConnectFailed(url, str(exc) or type(exc).__name__) from exc
        except (aiohttp.ClientResponseError, aiohttp.InvalidURL, ValueError) as exc:
            raise BadResponse(url, str(exc) or type(exc).__name__) from exc

    async def _follow(
        self,
        url: str,
        check_redirect: RedirectCheck | None,
        any_type: bool,
        conditional: dict[str, str] | None,
    ) -> FetchResult:
        current, visited = url, {url}
        deadlines = self.deadlines
        for _ in range(self._max_redirects + 1):
            deadline = deadlines.start()  # each hop its own (body included)
            try:
                result = await self._get(url, current, any_type, conditional)
            except asyncio.CancelledError:
                if deadlines.timed_out(deadline):
                    raise TimeoutError from None
                raise
            finally:
                deadlines.end(deadline)
            if result.redirect_to is None:
                return result
            target = result.redirect_to
            if target in visited:
                raise BadResponse(url, f"redirect loop at {target}")
            stop = check_redirect(target) if check_redirect is not None else None
            if stop is not None:
                return _replace_stopped(result, stop)
            visited.add(target)
            current = target
        raise BadResponse(url, f"more than {self._max_redirects} redirects")

    async def _get(
        self, url: str, current: str, any_type: bool, conditional: dict[str, str] | None
    ) -> FetchResult:
        # URLs here are WHATWG-serialised by ada (ASCII, percent-encoded): yarl need not
        # re-quote them, which saves a parse per request.
        async with self._session.get(
            URL(current, encoded=True), allow_redirects=False, headers=conditional
        ) as resp:
            status = resp.status
            headers = resp.headers
            content_type = resp.content_type if "Content-Type" in headers else ""
            charset = resp.charset
            robots_tag = ",".join(headers.getall("X-Robots-Tag", ()))
            if status in REDIRECT_STATUSES and "Location" in headers:
                target = resolve_url(current, headers["Location"])
                if target is None:
                    raise BadResponse(url, f"unusable redirect target {headers['Location']!r}")
                return FetchResult(
                    url,
                    current,
                    status,
                    content_type,
                    charset,
                    None,
                    robots_tag,
                    redirect_to=target,
                )
            body: bytes | None = None
            raw: bytearray | None = bytearray() if self._keep_raw else None
            if status != 304 and (
                any_type or content_type in HTML_TYPES or content_type in SNIFFED_TYPES
            ):
                body = await self._read(url, resp, raw)
            return FetchResult(
                url, current, status, content_type, charset, body, robots_tag,
                retry_after=headers.get("Retry-After"), etag=headers.get("ETag"),
                last_modified=headers.get("Last-Modified"),
                raw=bytes(raw) if raw is not None and body is not None else None,
                headers_json=_headers_json(resp) if raw is not None else None,
            )  # fmt: skip

    async def _read(
        self, url: str, resp: aiohttp.ClientResponse, raw: bytearray | None = None
    ) -> bytes:
        """The decoded body; ``raw`` (if given) receives the bytes as they came."""
        cap = self._max_body_bytes
        length = resp.content_length
        if length is not None and length > cap:
            raise TooLarge(url, f"Content-Length {length} exceeds {cap} bytes")
        encoding = resp.headers.get("Content-Encoding", "")
        if length is not None and not codings(encoding):
            data = await resp.read()  # fast path: the size is known and the body is not encoded
            if raw is not None:
                raw += data
            return data
        body = bytearray()
        try:
            decoder = BodyDecoder(encoding, cap)
            while chunk := await resp.content.read(_CHUNK_BYTES):
                if raw is not None:
                    raw += chunk
                body += decoder.feed(chunk)
            body += decoder.finish()
        except BodyTooLarge as exc:
            raise TooLarge(url, str(exc)) from exc
        except BadEncoding as exc:
            raise BadResponse(url, str(exc)) from exc
        return bytes(body)


def _headers_json(resp: aiohttp.ClientResponse) -> str:
    """The exchange's header part, for WARC records: status line, response headers in order
    (as received), request headers as sent."""
    version = resp.version
    return json.dumps(
        {
            "http_version": f"{version.major}.{version.minor}" if version else "1.1",
            "status": resp.status,
            "reason": resp.reason or "",
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in resp.raw_headers],
            "request": {
                "method": resp.request_info.method,
                "url": str(resp.request_info.real_url),
                "headers": [[k, v] for k, v in resp.request_info.headers.items()],
            },
        },
        ensure_ascii=False,
    )


def _replace_stopped(result: FetchResult, reason: str) -> FetchResult:
    return FetchResult(
        result.url, result.final_url, result.status, result.content_type, result.charset,
        None, result.x_robots_tag, result.redirect_to, reason,
    )  # fmt: skip
