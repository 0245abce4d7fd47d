"""WARC export: the stored responses of a database (``--store-body``) as WARC/1.1.

Owns: turning ``pages.body`` (zlib of the body as received: still Content-Encoded, after
transfer decoding) and ``pages.headers`` (JSON, see ``crawler.fetch._headers_json``) into
records. One gzip member per record; a ``warcinfo`` record first, then per page a
``response`` and a ``request`` record (linked by ``WARC-Concurrent-To``), and a ``metadata``
record for the requested URL when a redirect was followed. Streams through the database's
``Reader`` (``iter_stored``): a few pages in memory at a time.

What is rewritten, and why:
  * ``Transfer-Encoding`` is dropped and ``Content-Length`` set to the stored payload's length
    where they disagree: the body was stored after de-chunking, so the record must not claim
    a chunked payload. ``Content-Encoding`` is kept: the payload is stored as received.
  * Header bytes are written as they came (response: Latin-1 round trip of the raw bytes;
    request: UTF-8, as aiohttp sends them), not percent-encoded as warcio would do.
  * Secrets are left out, as a WARC is meant to be shared: the request headers in
    ``SECRET_HEADERS`` (``Authorization`` carries the Basic credentials of a
    ``http://user:password@host/`` seed) are not written, and every URL written (target
    URIs, request lines, redirect metadata) loses its userinfo (``strip_userinfo``). The
    crawler no longer stores them; databases written before may still hold them. The
    ``warcinfo`` record names the database with a DSN's password masked (``mask_password``).
"""

from __future__ import annotations

import io
import json
import logging
import os
import zlib
from collections.abc import Generator
from contextlib import closing
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from parsers.links import strip_userinfo
from storage.base import ExportFilter, StoreError
from storage.dsn import mask_password
from storage.factory import open_reader

log = logging.getLogger(__name__)

SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Request headers (lower-cased) never written: credentials and session cookies."""

_ALL = ExportFilter()

_Stored = tuple[str, str, str, str, bytes]
"""url, final_url, fetched_at, headers (JSON), body (zlib) of a page."""
_SPEC = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"


class _WireHeaders(StatusAndHeaders):
    """HTTP headers serialised as they went over the wire, not as warcio would (ASCII,
    percent-encoding anything else, which alters what was sent). aiohttp decodes the status
    line as UTF-8 and keeps header bytes as Latin-1 text (``_headers_json``); it sends
    request headers as UTF-8. ``wire_encoding`` is that of the header lines."""

    def __init__(self, *args: Any, wire_encoding: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wire_encoding = wire_encoding

    def compute_headers_buffer(self, header_filter: Any = None) -> None:
        first = " ".join(part for part in (self.protocol, self.statusline) if part)
        lines = [_encode(first, "utf-8")] if first else []
        for header in self.headers:
            if header_filter is not None and not (header := header_filter(header)):
                continue
            lines.append(_encode(": ".join(header), self.wire_encoding))
        self.headers_buff = b"".join(line + b"\r\n" for line in lines) + b"\r\n"


def _encode(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding``; else UTF-8, restoring undecodable bytes aiohttp escaped."""
    try:
        return text.encode(encoding)
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def export_warc(path: str, out: BinaryIO, selection: ExportFilter = _ALL) -> int:
    """Write the selected pages of the database at ``path`` that have a stored body to
    ``out`` as gzipped WARC/1.1; returns the number of ``response`` records.

    Pages without a stored body (redirects not followed, failures, bodies not read, pages
    fetched without ``--store-body``) are left out. ``StoreError``, before anything is
    written, if pages are selected but none has a body; a selection of no pages gives only
    the ``warcinfo`` record.
    """
    writer: WARCWriter | None = None
    written = skipped = 0
    with closing(_stored_pages(path, selection)) as pages:
        for row in pages:
            if row is None:
                skipped += 1
                continue
            if writer is None:
                writer = _start(path, out, selection)
            if _write_page(writer, *row):
                written += 1
            else:
                skipped += 1
    if writer is None:
        if skipped:
            raise StoreError(f"{path}: no stored bodies: crawl with --store-body to export WARC")
        _start(path, out, selection)
    log.info("WARC export of %s: %d responses; %d selected pages without a stored body",
             path, written, skipped)  # fmt: skip
    return written


def _stored_pages(path: str, selection: ExportFilter) -> Generator[_Stored | None, None, None]:
    """``(url, final_url, fetched_at, headers, body)`` of each selected page in storage
    order; ``None`` for a page without a stored body (``Reader.iter_stored``)."""
    with closing(open_reader(path).iter_stored(selection)) as rows:
        for row in rows:
            yield _complete(row)


def _complete(row: tuple[object, ...] | None) -> _Stored | None:
    """``row`` if it has a body and headers (it may have changed since it was selected)."""
    if row is None or row[3] is None or row[4] is None:
        return None
    url, final_url, fetched_at, headers, body = row
    return str(url), str(final_url), str(fetched_at), str(headers), bytes(body)  # type: ignore[call-overload]


def _start(path: str, out: BinaryIO, selection: ExportFilter) -> WARCWriter:
    """A writer on ``out``, after writing the ``warcinfo`` record."""
    writer = WARCWriter(out, gzip=True, warc_version="1.1")
    try:
        version = metadata.version("crawler")
    except metadata.PackageNotFoundError:
        version = "unknown"
    try:
        warcio_version = metadata.version("warcio")
    except metadata.PackageNotFoundError:
        warcio_version = "unknown"
    chosen = ["dedup" if selection.dedup else "",
              f"since={selection.since}" if selection.since is not None else "",
              f"min-score={selection.min_score:g}" if selection.min_score is not None else ""]  # fmt: skip
    info = {
        "software": f"crawl/{version} (warcio/{warcio_version})",
        "format": "WARC File Format 1.1",
        "conformsTo": _SPEC,
        "database": mask_password(path),
        "selection": " ".join(c for c in chosen if c),
        "description": "Responses stored by crawl --store-body. Payloads are the bodies as "
        "received (Content-Encoding kept, transfer coding removed): Transfer-Encoding is "
        "dropped and Content-Length set to the payload length where they differ.",
    }
    name = getattr(out, "name", None)
    filename = os.path.basename(name) if isinstance(name, str) and not name.startswith("<") else ""
    writer.write_record(writer.create_warcinfo_record(filename, info))
    return writer


def _write_page(
    writer: WARCWriter, url: str, final_url: str, fetched_at: str, headers_json: str, body: bytes
) -> bool:
    """The records of one stored exchange; ``False`` (nothing written) if they are unusable.
    URLs without userinfo and request headers without ``SECRET_HEADERS``."""
    url, final_url = strip_userinfo(url), strip_userinfo(final_url)
    try:
        stored = json.loads(headers_json)
        status_line = f"{int(stored['status'])} {stored.get('reason') or ''}"
        protocol = f"HTTP/{stored.get('http_version') or '1.1'}"
        response_headers = [(str(k), str(v)) for k, v in stored["headers"]]
        request = stored.get("request") or {}
        request_headers = [(str(k), str(v)) for k, v in request.get("headers") or ()
                           if str(k).strip().lower() not in SECRET_HEADERS]  # fmt: skip
        method = str(request.get("method") or "GET")
        payload = zlib.decompress(body)
        date = _warc_date(fetched_at)
    except (ValueError, KeyError, TypeError, zlib.error) as exc:
        log.warning("%s: stored response unusable for WARC (%s): left out", url, exc)
        return False
    http = _WireHeaders(status_line, _framed(response_headers, len(payload)),
                        protocol=protocol, wire_encoding="latin-1")  # fmt: skip
    response = writer.create_warc_record(
        final_url,
        "response",
        payload=io.BytesIO(payload),
        length=len(payload),
        warc_headers_dict={"WARC-Date": date},
        http_headers=http,
    )
    parts = urlsplit(final_url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request_record = writer.create_warc_record(
        final_url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        warc_headers_dict={"WARC-Date": date},
        http_headers=_WireHeaders(
            f"{method} {target} HTTP/1.1",
            request_headers,
            is_http_request=True,
            wire_encoding="utf-8",
        ),
    )
    writer.write_request_response_pair(request_record, response)
    if url != final_url:
        writer.write_record(_redirect_record(writer, url, final_url, date, response))
    return True


def _framed(headers: list[tuple[str, str]], length: int) -> list[tuple[str, str]]:
    """``headers`` in their order, framing the stored payload: no ``Transfer-Encoding``, and
    one ``Content-Length`` of ``length`` unless the original had none and was not chunked."""
    chunked = any(k.lower() == "transfer-encoding" for k, _ in headers)
    lengths = [v.strip() for k, v in headers if k.lower() == "content-length"]
    if not chunked and (not lengths or lengths == [str(length)]):
        return headers
    framed: list[tuple[str, str]] = []
    placed = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == "transfer-encoding":
            continue
        if lowered == "content-length":
            if not placed:
                framed.append((name, str(length)))
                placed = True
            continue
        framed.append((name, value))
    if not placed:
        framed.append(("Content-Length", str(length)))
    return framed


def _redirect_record(
    writer: WARCWriter, url: str, final_url: str, date: str, response: ArcWarcRecord
) -> ArcWarcRecord:
    """A ``metadata`` record for the URL that was requested and redirected to ``final_url``.
    Not a fabricated 3xx response: the redirect responses themselves are not stored."""
    fields = f"redirected-to: {final_url}\r\n".encode()
    return writer.create_warc_record(
        url,
        "metadata",
        payload=io.BytesIO(fields),
        length=len(fields),
        warc_headers_dict={
            "WARC-Date": date,
            "WARC-Refers-To": response.rec_headers.get_header("WARC-Record-ID"),
            "WARC-Refers-To-Target-URI": final_url,
            "WARC-Refers-To-Date": date,
        },
    )


def _warc_date(fetched_at: str) -> str:
    """``fetched_at`` (ISO-8601) as a WARC-Date: UTC, ``Z``, fraction only if there is one."""
    moment = datetime.fromisoformat(fetched_at.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        stamp += f".{moment.microsecond:06d}"
    return stamp + "Z"
