"""Fetcher: the only place that makes requests (``crawler.net.http``), through the crawl's one
``HttpClient`` (``crawler.net.session.open_session``).

Owns: the fetch's deadline, body size caps (on the bytes received, and on
the decompressed bytes while decoding), redirects (followed here, hop by hop, each hop vetted
and paced by the caller), which bodies are HTML (the WHATWG MIME Sniffing standard's rules),
and the translation of the client's and OS exceptions into ``FetchError``s (always chained).

Invariants:
- a ``FetchResult`` with a body holds the complete body: truncated or reset transfers raise
  (but a ``prefix`` fetch's body, cut where it asked);
- a body is never larger than ``max_body_bytes`` (or a fetch's ``prefix``);
- a fetch never outlives ``timeout`` seconds, however slowly the server drips and however
  many hops it redirects through: one deadline covers every hop, the waits between them and
  the decoding; decoding a large body yields to the event loop between bounded steps;
- a body is downloaded only where it may be parsed: declared HTML, or no usable type (then
  sniffed); any type for robots.txt and sitemaps (``any_type``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from crawler.errors import (
    BadEncoding,
    BadResponse,
    Blocked,
    BodyTooLarge,
    ConnectFailed,
    DNSFailed,
    FetchError,
    FetchTimeout,
    ProxyError,
    ProxyFailed,
    TooLarge,
    TooManyRedirects,
)
from crawler.net import http
from crawler.net.decoding import BodyDecoder, codings
from crawler.net.guard import blocked_reason
from crawler.policy.scope import resolve_url, strip_userinfo
from crawler.settings import Settings

log = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
UNKNOWN_TYPES = frozenset({"", "unknown/unknown", "application/unknown", "*/*"})
"""Types for which the WHATWG MIME Sniffing standard runs "the rules for identifying an
unknown MIME type" (no ``Content-Type``, or one of these): the body is downloaded and sniffed.
A declared type is otherwise what the body is: ``text/plain`` is never HTML there, and
``application/octet-stream`` is a download."""
RESOURCE_HEADER_BYTES = 1445
"""How much of a body the sniffing rules read (the standard's "resource header")."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_DECODE_STEP_BYTES = 256 << 10
"""A compressed body larger than this is decoded in steps of this many input bytes, with the
event loop's other work (and the fetch's deadline) between them."""

RedirectCheck = Callable[[str], str | None]
"""Given a redirect target (normalised), ``None`` to follow it or a reason to stop there."""
HopPacer = Callable[[str, float], float | None]
"""Given a redirect target that will be followed and the seconds left before the fetch's
deadline: how long to wait before requesting it (its host's pace), or ``None`` when it cannot
be requested in time, in which case the pacer queued it and the redirect stops (``queued``)."""


@dataclass(slots=True)
class FetchResult:
    """A response. ``body`` is ``None`` when it was not downloaded (not HTML, redirect).

    Not frozen, though read-only by convention: one is built per response, and a frozen
    dataclass's ``__init__`` costs many times as much (an ``object.__setattr__`` per field).
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
    nosniff: bool = False
    """``X-Content-Type-Options: nosniff``: a body without a usable type is not sniffed."""
    etag: str | None = None
    last_modified: str | None = None
    raw: bytes | None = None
    """``--store-body``: the body as received (before Content-Encoding decoding)."""
    headers_json: str | None = None
    """``--store-body``: status line, response and request headers, as JSON."""
    truncated: bool = False
    """A ``prefix`` fetch's body was cut there (as received, or once decoded)."""

    @property
    def is_html(self) -> bool:
        """HTML to parse, as a browser would render it: declared HTML (whatever bytes it
        holds: a NUL is U+FFFD to an HTML parser), or no usable type and sniffed as HTML
        (not under ``nosniff``, which forbids sniffing a scriptable type)."""
        body = self.body
        if body is None:
            return False
        if self.content_type in HTML_TYPES:
            return True
        return unknown_type(self.content_type) and not self.nosniff and sniff_html(body)


def unknown_type(content_type: str) -> bool:
    """Whether a response's media type (lower-case essence, ``""`` when none) leaves the body
    to be sniffed: none, one of ``UNKNOWN_TYPES``, or not a MIME type at all (no ``/``)."""
    return content_type in UNKNOWN_TYPES or "/" not in content_type


_HTML_PATTERNS = (
    b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1", b"<div", b"<font",
    b"<table", b"<a", b"<style", b"<title", b"<b", b"<body", b"<br", b"<p", b"<!--",
)  # fmt: skip
_TAG_TERMINATING = b" >"


def sniff_html(body: bytes) -> bool:
    """Whether the rules for identifying an unknown MIME type (WHATWG MIME Sniffing, 7.1)
    find HTML: after leading whitespace, one of the standard's patterns (case-insensitive),
    followed by a space or ``>``."""
    head = body[:RESOURCE_HEADER_BYTES].lstrip(b"\t\n\x0c\r ")
    start = head[:16].lower()
    return any(
        start.startswith(pattern)
        and len(head) > len(pattern)
        and head[len(pattern)] in _TAG_TERMINATING
        for pattern in _HTML_PATTERNS
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
    starts and cancels it when it ends, a cost paid by the event loop at every request.
    Here requests start in deadline order, so a FIFO keeps the deadlines sorted; a request
    that ends only drops its task, and the one timer, when it fires at the oldest deadline,
    cancels the overdue requests' tasks and sleeps until the next live deadline.
    ``expired`` tells the task why it was cancelled.
    """

    def __init__(
        self,
        timeout_s: float,
        loop: Callable[[], asyncio.AbstractEventLoop] = asyncio.get_running_loop,
    ) -> None:
        """``loop``: gives the running loop (``HttpClient.loop``, which saves a system
        call a request over ``asyncio.get_running_loop``)."""
        self.timeout_s = timeout_s
        self.loop = loop
        self._entries: deque[_Deadline] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> _Deadline:
        """The current task's request starts now; call ``end`` when it is over."""
        loop = self.loop()
        entries = self._entries
        while entries and entries[0].task is None:  # ended: forget them as we go
            entries.popleft()
        deadline = _Deadline(asyncio.current_task(loop), loop.time() + self.timeout_s)
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
        self.deadlines = Deadlines(settings.timeout, session.loop)

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
        pace_hop: HopPacer | None = None,
        prefix: int | None = None,
        max_redirects: int | None = None,
    ) -> FetchResult:
        """GET ``url``, following redirects that ``check_redirect`` allows, each hop after
        the wait ``pace_hop`` says (none without one).

        ``any_type`` downloads the body whatever its type (robots.txt, sitemaps).
        ``prefix``: take at most this many bytes of body, as received and decoded alike,
        and cut it there rather than fail it as too large (a robots.txt, of which only the
        first 500 KiB count, RFC 9309 2.5; a sitemap, whose first part is of use).
        ``max_redirects``: hops followed at most, instead of ``--max-redirects``.
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
        deadline = self.deadlines.start()  # one for the whole fetch: hops, waits, decoding
        try:
            return await self._follow(url, check_redirect, pace_hop, any_type, conditional,
                                      deadline.at, prefix, max_redirects or self._max_redirects)  # fmt: skip
        except asyncio.CancelledError:
            if self.deadlines.timed_out(deadline):
                raise FetchTimeout(
                    url, f"no complete response within {self._timeout_s:g} s"
                ) from None
            raise
        except FetchError:
            raise
        except http.ConnectTimeout as exc:
            raise FetchTimeout(url, str(exc)) from exc
        except TimeoutError as exc:
            raise FetchTimeout(url, f"no complete response within {self._timeout_s:g} s") from exc
        except http.IncompleteBody as exc:
            raise BadResponse(url, f"incomplete body: {exc}", slows_host=True) from exc
        except http.BodyTooLarge as exc:
            raise TooLarge(url, f"body exceeds {exc.limit} bytes") from exc
        except ProxyError as exc:
            raise ProxyFailed(url, str(exc)) from exc
        except (http.ConnectError, OSError) as exc:
            reason = blocked_reason(exc)
            if reason is not None:
                raise Blocked(url, f"refused {reason} address") from exc
            if isinstance(exc, http.ResolveError):
                raise DNSFailed(url, str(exc) or "name not resolved") from exc
            raise ConnectFailed(url, str(exc) or type(exc).__name__) from exc
        except (http.HTTPError, ValueError) as exc:
            raise BadResponse(url, str(exc) or type(exc).__name__, slows_host=True) from exc
        finally:
            self.deadlines.end(deadline)

    async def _follow(
        self,
        url: str,
        check_redirect: RedirectCheck | None,
        pace_hop: HopPacer | None,
        any_type: bool,
        conditional: dict[str, str] | None,
        deadline_at: float,
        prefix: int | None,
        max_redirects: int,
    ) -> FetchResult:
        current, visited = url, {url}
        loop = self.deadlines.loop()
        cookies_seen = self._session.cookies_set
        for _ in range(max_redirects + 1):
            result = await self._get(url, current, any_type, conditional, prefix)
            if result.redirect_to is None:
                return result
            target = result.redirect_to
            if self._session.cookies_set != cookies_seen:  # a cookie changed: so may the answer
                cookies_seen, visited = self._session.cookies_set, set()
            if target in visited:
                raise TooManyRedirects(url, f"redirect loop at {target}")
            stop = check_redirect(target) if check_redirect is not None else None
            if stop is None and pace_hop is not None:
                wait_s = pace_hop(target, deadline_at - loop.time())
                if wait_s is None:
                    stop = "queued"
                elif wait_s > 0:
                    await asyncio.sleep(wait_s)
            if stop is not None:
                return _replace_stopped(result, stop)
            visited.add(target)
            current = target
        raise TooManyRedirects(url, f"more than {max_redirects} redirects")

    async def _get(
        self,
        url: str,
        current: str,
        any_type: bool,
        conditional: dict[str, str] | None,
        prefix: int | None,
    ) -> FetchResult:
        resp = await self._session.get(
            current, conditional, cap=prefix or self._max_body_bytes, record=self._keep_raw,
            cut=prefix is not None,
        )  # fmt: skip
        try:
            status = resp.status
            headers = resp.headers
            content_type = resp.content_type
            charset = resp.charset
            robots_tag = ",".join(resp.getall("X-Robots-Tag")) if "x-robots-tag" in headers else ""
            if status in REDIRECT_STATUSES and "location" in headers:
                return _redirect(url, current, resp, robots_tag)
            body: bytes | None = None
            raw: bytes | None = None
            truncated = False
            if status != 304 and (
                any_type or content_type in HTML_TYPES or unknown_type(content_type)
            ):
                body, raw, truncated = await self._read(url, resp)
            nosniff = headers.get("x-content-type-options", "").strip().lower() == "nosniff"
            return FetchResult(
                url, current, status, content_type, charset, body, robots_tag,
                retry_after=headers.get("retry-after"), nosniff=nosniff,
                etag=headers.get("etag"), last_modified=headers.get("last-modified"),
                raw=raw if self._keep_raw and body is not None else None,
                headers_json=_headers_json(resp) if self._keep_raw else None, truncated=truncated,
            )  # fmt: skip
        finally:
            resp.release()

    async def _read(self, url: str, resp: http.Response) -> tuple[bytes, bytes, bool]:
        """(the decoded body, the bytes as they came, whether it was cut at its cap)."""
        cap, cut = resp.cap, resp.cut
        length = resp.content_length
        if length is not None and length > cap and not cut:
            raise TooLarge(url, f"Content-Length {length} exceeds {cap} bytes")
        data = await resp.read()  # over the cap as received: ``fetch`` maps its BodyTooLarge
        encoding = resp.headers.get("content-encoding", "")
        if not codings(encoding):
            return data, data, resp.truncated
        try:
            decoder = BodyDecoder(encoding, cap, cut=cut)
            parts = []
            if len(data) <= _DECODE_STEP_BYTES:
                parts.append(decoder.feed(data))
            else:
                with memoryview(data) as view:
                    for start in range(0, len(data), _DECODE_STEP_BYTES):
                        parts.append(decoder.feed(bytes(view[start : start + _DECODE_STEP_BYTES])))
                        if decoder.full:
                            break
                        await asyncio.sleep(0)  # other work, and the deadline, between steps
            parts.append(decoder.finish(truncated=resp.truncated))
        except BodyTooLarge as exc:  # decoded over the cap: the message says "decompressed"
            raise TooLarge(url, str(exc)) from exc
        except BadEncoding as exc:
            raise BadResponse(url, str(exc)) from exc
        return b"".join(parts), data, resp.truncated or decoder.full


def _redirect(url: str, current: str, resp: http.Response, robots_tag: str) -> FetchResult:
    """A redirect's result: its target resolved (credentials in it dropped: the crawl sends
    only the seeds' own), or ``stopped`` as ``scheme`` for a target that is a URL of another
    scheme (``javascript:``, ``data:``, ``ftp:`` ...), which the crawl does not follow. A
    ``Location`` that is no URL at all is a bad response."""
    location = _escape_undecodable(resp.headers["location"])
    target = resolve_url(current, location)
    if target is not None:
        return FetchResult(url, current, resp.status, resp.content_type, resp.charset, None,
                           robots_tag, redirect_to=strip_userinfo(target))  # fmt: skip
    match = _SCHEME.match(location.strip())
    if match is None or match.group().lower() in ("http:", "https:"):
        raise BadResponse(url, f"unusable redirect target {location[:200]!r}")
    return FetchResult(url, current, resp.status, resp.content_type, resp.charset, None,
                       robots_tag, stopped="scheme")  # fmt: skip


def _escape_undecodable(text: str) -> str:
    """``text`` (a header, UTF-8 with other bytes as surrogates) with each byte that is not
    UTF-8 percent-encoded as it came (``/caf\\xe9``, latin-1 from an old server, is
    ``/caf%E9``), where a URL parser would refuse it."""
    if text.isascii() or not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    return "".join(f"%{ord(c) - 0xDC00:02X}" if "\udc80" <= c <= "\udcff" else c for c in text)


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
