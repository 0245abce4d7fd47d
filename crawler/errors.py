"""The crawler's exception tree. Every error the crawler raises on purpose is a ``CrawlerError``.

```
CrawlerError
├── ConfigError        bad settings, seeds file, flags              → CLI exit 2
├── FetchError(url)    raised only in fetch.py, chained to the HTTP client's/OS cause
│   ├── FetchTimeout                                                 slows the host
│   ├── ConnectFailed  refused, reset, TLS failure                   slows the host
│   ├── TooLarge
│   ├── Blocked        the SSRF guard refused the address
│   ├── DNSFailed                                                    slows the host
│   └── BadResponse    truncated or malformed (slows the host), broken encoding, redirect
│                      loop, too many redirects (the site's choice: does not)
├── ParseError         a worker could not parse a page (crosses the process pool)
│   └── ParseTimeout   the parse took longer than ``--parse-timeout``: abandoned
└── StorageError       the database failed                           → CLI exit 1
```
Anything else escaping the engine is a bug and fails the crawl loudly.

``FetchError.slows_host``: whether the failure is the server's distress (it cannot keep up,
or its network fails), which makes the host's pace back off. The crawler's own refusals and
a site's odd but well-delivered answers never slow a host down.
"""

from __future__ import annotations


class CrawlerError(Exception):
    """Base of every error the crawler raises deliberately."""


class ConfigError(CrawlerError):
    """Bad input from the user: a flag, a settings file, a seeds file. The message names it."""


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


class BadResponse(FetchError):
    reason = "bad-response"


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


class StorageError(CrawlerError):
    """The database could not be opened, migrated or written."""
