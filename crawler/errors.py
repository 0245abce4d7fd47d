"""The crawler's exception tree: every error the crawler raises on purpose is a ``CrawlerError``,
and every class of it is defined here.

```
CrawlerError
├── ConfigError          bad settings, seeds file, flags                 → CLI exit 2
│   └── DeviceError      an unknown --device, or one this machine lacks (also a ValueError)
│       └── GPUUnavailableError   --device gpu without a usable CUDA device
├── DatabaseLocked       another live crawl holds the database           → CLI exit 75
├── FetchError(url)      what a fetch ended in; raised only by crawler.net.fetch
│   ├── FetchTimeout                                                      slows the host
│   ├── ConnectFailed    refused, reset, TLS failure                      slows the host
│   ├── TooLarge         the body (raw or decoded) is over --max-body-bytes
│   ├── Blocked          the SSRF guard refused the address
│   ├── DNSFailed                                                         slows the host
│   ├── ProxyFailed      the proxy refused or failed (retried)            slows the host
│   └── BadResponse      truncated or malformed (slows the host), broken encoding
│       └── TooManyRedirects  a redirect loop, or more than --max-redirects hops (the
│                        site's choice: does not slow it)
├── HTTPError            the HTTP client's and the decoder's (crawler.net): internal,
│   │                    mapped to a FetchError by ``Fetcher.fetch``
│   ├── ConnectError     no connection (also carries a BlockedAddress as its cause)
│   │   ├── ResolveError the name did not resolve
│   │   └── ProxyError   the proxy is unreachable, refused the request or tunnel, or its
│   │                    SOCKS handshake failed
│   ├── ConnectTimeout   no connection within --connect-timeout (also a TimeoutError)
│   ├── ProtocolError    a response HTTP/1.1 cannot frame, a URL it cannot send
│   │   └── IncompleteBody   the connection ended inside the body
│   ├── BodyTooLarge     the body, raw or decoded, is over the request's cap
│   └── BadEncoding      a Content-Encoding that cannot be decoded (also a ValueError)
├── BlockedAddress       the resolver found only refused addresses (also an OSError, as
│                        resolvers fail; crawler.net.guard)
├── ParseError           a worker could not parse a page (crosses the process pool)
│   └── ParseTimeout     the parse took longer than --parse-timeout: abandoned
└── StorageError         the database failed                              → CLI exit 1
```

Foreign exceptions enter the tree at one boundary each:
- python-socks' errors, and an http proxy's refusal (a ``CONNECT`` not answered 2xx, a 407):
  as ``ProxyError``, in ``crawler.net.http.tunnel`` and ``HttpClient.get``;
- httptools' parser errors (``HttpParserError``, ``HttpParserUpgrade``): as ``ProtocolError``,
  in ``crawler.net.http.framing.ResponseFraming.feed``;
- OSError (ssl errors included) and TimeoutError (``asyncio.TimeoutError`` is one): as
  ``HTTPError``s in the HTTP client, where it connects (``HttpClient._connect``:
  ``ConnectError``, ``ConnectTimeout``), resolves (``HttpClient._addresses``: ``ResolveError``,
  or ``ConnectError`` for a ``BlockedAddress``) and loses a connection
  (``Connection.connection_lost``: ``ConnectError``, ``IncompleteBody``); every ``HTTPError``,
  and any OSError or TimeoutError the client let through, becomes a ``FetchError`` in
  ``crawler.net.fetch.Fetcher.fetch``, the one place a fetch's failures leave ``crawler.net``;
- ``storage.base.StoreError`` (storage imports nothing of the crawler): as ``StorageError``,
  in ``crawler.engine.engine.Engine._run_locked``; the read-only commands (``crawl export``...)
  report it as a usage error themselves;
- a worker's exception: as ``ParseError`` (``ParseTimeout``), in the parse pool
  (``crawler.pool.parse_pool``, from the worker's ``ParseFailure``), or in
  ``crawler.engine.pages`` for a page parsed in the crawl's own process.
Anything else escaping the engine is a bug and fails the crawl loudly. The public ones are
those in ``crawler.__all__``: ``CrawlerError``, ``ConfigError``, ``FetchError``,
``ParseError``, ``StorageError``.

``FetchError.slows_host``: whether the failure is the server's distress (it cannot keep up,
or its network fails), which makes the host's pace back off. The crawler's own refusals and
a site's odd but well-delivered answers never slow a host down.
"""

from __future__ import annotations

import errno


class CrawlerError(Exception):
    """Base of every error the crawler raises deliberately."""


class ConfigError(CrawlerError):
    """Bad input from the user: a flag, a settings file, a seeds file. The message names it."""


class DeviceError(ConfigError, ValueError):
    """A bad ``device`` argument: unknown name, or a device this machine lacks (CLI exit 2)."""


class GPUUnavailableError(DeviceError):
    """``device="gpu"`` was asked for but no CUDA device can be used."""


class DatabaseLocked(CrawlerError):
    """Another live crawl is using the database (CLI exit code 75, ``EX_TEMPFAIL``)."""


class FetchError(CrawlerError):
    """A request failed. ``reason`` is a short machine-readable word stored with the URL."""

    reason = "fetch-error"
    slows_host = False

    def __init__(self, url: str, message: str, *, slows_host: bool | None = None) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url
        self.message = message
        if slows_host is not None:
            self.slows_host = slows_host


class FetchTimeout(FetchError):
    reason = "timeout"
    slows_host = True


class ConnectFailed(FetchError):
    reason = "connect"
    slows_host = True


class TooLarge(FetchError):
    reason = "too-large"


class Blocked(FetchError):
    """The host resolved only to addresses the SSRF guard refuses."""

    reason = "ssrf"


class DNSFailed(FetchError):
    reason = "dns"
    slows_host = True


class ProxyFailed(FetchError):
    """The proxy could not be reached, refused (407, a CONNECT not answered 2xx, a SOCKS
    refusal) or failed: retried like a connection error."""

    reason = "proxy"
    slows_host = True


class BadResponse(FetchError):
    reason = "bad-response"


class TooManyRedirects(BadResponse):
    """The redirects looped, or went on past ``--max-redirects``: for a page a bad
    response; for a robots.txt, none (RFC 9309 2.3.1.2: "unavailable")."""


class HTTPError(CrawlerError):
    """The HTTP client or the body decoder failed (``crawler.net``); never leaves a fetch."""


class ConnectError(HTTPError):
    """No connection could be made or kept (refused, reset, TLS, a refused address)."""


class ResolveError(ConnectError):
    """The host name did not resolve."""


class ProxyError(ConnectError):
    """No connection through the proxy: it is unreachable, refused the request or the
    tunnel, or its SOCKS handshake failed."""


class ConnectTimeout(HTTPError, TimeoutError):
    """No connection within the connect timeout."""


class ProtocolError(HTTPError):
    """The response broke HTTP/1.1 framing, or the URL cannot be sent."""


class IncompleteBody(ProtocolError):
    """The connection closed before the body's end."""


class BodyTooLarge(HTTPError):
    """The body, as received or once decoded, is over its cap: ``limit`` bytes, or ``None``
    where a decoding step cannot name the cap (it knows only what is left of it)."""

    def __init__(self, limit: int | None, decoded: bool = False) -> None:
        over = "the size cap" if limit is None else f"{limit} bytes"
        super().__init__(f"body exceeds {over}" + (" (decompressed)" if decoded else ""))
        self.limit = limit
        self.decoded = decoded

    def __reduce__(self) -> tuple[type[BodyTooLarge], tuple[int | None, bool]]:
        return (BodyTooLarge, (self.limit, self.decoded))


class BadEncoding(HTTPError, ValueError):
    """The body cannot be decoded (unknown coding, corrupt or truncated stream)."""


class BlockedAddress(CrawlerError, OSError):
    """A host resolved only to addresses the crawler must not connect to.

    An ``OSError`` as a resolver's failures are: the HTTP client raises a ``ConnectError``
    caused by it; ``crawler.net.guard.blocked_reason`` finds it again."""

    def __init__(self, host: str, reason: str, address: str) -> None:
        OSError.__init__(self, errno.EACCES, f"blocked {reason} address {address} for {host}")
        self.host = host
        self.reason = reason
        self.address = address

    def __reduce__(self) -> tuple[type[BlockedAddress], tuple[str, str, str]]:
        return (BlockedAddress, (self.host, self.reason, self.address))


class ParseError(CrawlerError):
    """A worker failed to parse a page. Built from plain arguments so it pickles."""

    reason = "parse"

    def __init__(self, url: str, message: str) -> None:
        super().__init__(url, message)
        self.url = url
        self.message = message

    def __str__(self) -> str:
        return f"{self.url}: {self.message}"


class ParseTimeout(ParseError):
    """A parse ran past its time limit: its worker was replaced, the page is not parsed."""

    reason = "parse-timeout"


class ParseCrash(ParseError):
    """Two workers died parsing this page alone (a parser fault on its markup, or an
    ``extract`` hook that ends its process): the page is not parsed, and is never parsed in
    the crawl process, which it would take down too."""

    reason = "parse-crash"


class StorageError(CrawlerError):
    """The database could not be opened, migrated or written."""
