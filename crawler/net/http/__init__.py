"""HTTP/1.1 client for the crawl: GET over pooled keep-alive connections, responses framed
by llhttp (``httptools``), each body collected, capped, as it arrives.

  framing     sans-IO: request bytes, response framing fed bytes (``ResponseFraming``),
              URL splitting, Basic credentials
  response    ``Response``: status, headers, body of one response
  connection  ``Connection``: the asyncio protocol of one connection, acting on its framing
  client      ``HttpClient``: the pool, name resolution (behind the SSRF guard), TLS

The Fetcher (``crawler.net.fetch``) does the rest: redirects, deadlines, decoding, types,
and mapping these errors (``crawler.errors.HTTPError`` and below) to ``FetchError``s.

Why not aiohttp's client: a crawl's event loop spent a third of its time in aiohttp's
request path; this one does the same work on the same uvloop transports and llhttp, with
a fraction of its CPU a request (``bench/RESULTS.md``, ``bench/fetch_only.py --client``).
aiohttp stays the reference: a differential test suite holds the two to the same behaviour.

Invariants:
- a ``Response`` is complete only when its framing says so (or, unframed, at the close);
  a connection that ends early fails the response with ``IncompleteBody``;
- a connection goes back to the pool only after a complete response that allows keep-alive;
  a cancelled or failed request closes its connection;
- a reused connection that the server had closed, found out before any byte of the
  response arrived, is replaced and the request sent once more (a GET is idempotent);
- the raw body never grows past the request's cap (the connection is closed instead).
"""

from crawler.errors import (
    BodyTooLarge,
    ConnectError,
    ConnectTimeout,
    HTTPError,
    IncompleteBody,
    ProtocolError,
    ResolveError,
)
from crawler.net.http.client import (
    DNS_TTL_S,
    HAPPY_EYEBALLS_DELAY_S,
    KEEPALIVE_S,
    READ_BYTES,
    HttpClient,
)
from crawler.net.http.framing import MAX_HEADER_BYTES, SECRET_HEADERS, ResponseFraming
from crawler.net.http.response import Response

__all__ = [
    "DNS_TTL_S",
    "HAPPY_EYEBALLS_DELAY_S",
    "KEEPALIVE_S",
    "MAX_HEADER_BYTES",
    "READ_BYTES",
    "SECRET_HEADERS",
    "BodyTooLarge",
    "ConnectError",
    "ConnectTimeout",
    "HTTPError",
    "HttpClient",
    "IncompleteBody",
    "ProtocolError",
    "ResolveError",
    "Response",
    "ResponseFraming",
]
