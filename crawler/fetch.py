"""Fetcher: the only place that makes requests (``crawler.http``). One ``HttpClient`` per crawl.

Owns: request headers, deadlines, body size caps (on the bytes received, and on the
decompressed bytes while decoding), redirects (followed here, hop by hop, each hop vetted by
the caller), and the translation of the client's and OS exceptions into ``FetchError``s
(always chained).

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

from crawler import http
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
from crawler.ssrf import HostAllowed, blocked_reason
from crawler.urls import resolve_url

log = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
SNIFFED_TYPES = frozenset({"", "text/plain", "application/octet-stream", "unknown/unknown"})
"""Types servers send for HTML by mistake: the body is downloaded and sniffed."""
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


def open_session(settings: Settings, allowed: HostAllowed) -> http.HttpClient:
    """The crawl's one HTTP client: at most ``concurrency`` connections, DNS cached, no
    cookies, and a resolver that refuses private addresses for hosts not ``allowed``."""
    return http.HttpClient(
        limit=settings.concurrency,
        connect_timeout=settings.connect_timeout,
        headers={
            "User-Agent": settings.user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": accept_encoding(),
        },
        allowed=allowed,
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

    def __init__(self, session: http.HttpClient, settings: Settings) -> None:
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
        except http.ConnectTimeout as exc:
            raise FetchTimeout(url, str(exc)) from exc
        except TimeoutError as exc:
            raise FetchTimeout(url, f"no complete response within {self._timeout_s:g} s") from exc
        except http.IncompleteBody as exc:
            raise BadResponse(url, f"incomplete body: {exc}") from exc
        except http.BodyTooLarge as exc:
            raise TooLarge(url, f"body exceeds {exc.limit} bytes") from exc
        except (http.ConnectError, OSError) as exc:
            reason = blocked_reason(exc)
            if reason is not None:
                raise Blocked(url, f"refused {reason} address") from exc
            if isinstance(exc, http.ResolveError):
                raise DNSFailed(url, str(exc) or "name not resolved") from exc
            raise ConnectFailed(url, str(exc) or type(exc).__name__) from exc
        except (http.HTTPError, ValueError) as exc:
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
        resp = await self._session.get(
            current, conditional, cap=self._max_body_bytes, record=self._keep_raw
        )
        try:
            status = resp.status
            headers = resp.headers
            content_type = resp.content_type
            charset = resp.charset
            robots_tag = ",".join(resp.getall("X-Robots-Tag")) if "x-robots-tag" in headers else ""
            if status in REDIRECT_STATUSES and "location" in headers:
                target = resolve_url(current, headers["location"])
                if target is None:
                    raise BadResponse(url, f"unusable redirect target {headers['location']!r}")
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
            raw: bytes | None = None
            if status != 304 and (
                any_type or content_type in HTML_TYPES or content_type in SNIFFED_TYPES
            ):
                body, raw = await self._read(url, resp)
            return FetchResult(
                url, current, status, content_type, charset, body, robots_tag,
                retry_after=headers.get("retry-after"), etag=headers.get("etag"),
                last_modified=headers.get("last-modified"),
                raw=raw if self._keep_raw and body is not None else None,
                headers_json=_headers_json(resp) if self._keep_raw else None,
            )  # fmt: skip
        finally:
            resp.release()

    async def _read(self, url: str, resp: http.Response) -> tuple[bytes, bytes]:
        """(the decoded body, the bytes as they came)."""
        cap = self._max_body_bytes
        length = resp.content_length
        if length is not None and length > cap:
            raise TooLarge(url, f"Content-Length {length} exceeds {cap} bytes")
        data = await resp.read()
        encoding = resp.headers.get("content-encoding", "")
        if not codings(encoding):
            return data, data
        try:
            decoder = BodyDecoder(encoding, cap)
            body = decoder.feed(data) + decoder.finish()
        except BodyTooLarge as exc:
            raise TooLarge(url, str(exc)) from exc
        except BadEncoding as exc:
            raise BadResponse(url, str(exc)) from exc
        return body, data


def _headers_json(resp: http.Response) -> str:
    """The exchange's header part, for WARC records: status line, response headers in order
    (as received), request headers as sent."""
    return json.dumps(
        {
            "http_version": resp.version,
            "status": resp.status,
            "reason": resp.reason,
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in resp.raw_headers],
            "request": {
                "method": "GET",
                "url": resp.url,
                "headers": [[k, v] for k, v in resp.request],
            },
        },
        ensure_ascii=False,
    )


def _replace_stopped(result: FetchResult, reason: str) -> FetchResult:
    return FetchResult(
        result.url, result.final_url, result.status, result.content_type, result.charset,
        None, result.x_robots_tag, result.redirect_to, reason,
    )  # fmt: skip
