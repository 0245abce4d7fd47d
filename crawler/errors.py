"""The crawler's exception tree. Every error the crawler raises on purpose is a ``CrawlerError``.

```
CrawlerError
├── ConfigError        bad settings, seeds file, flags              → CLI exit 2
├── FetchError(url)    raised only in fetch.py, chained to the HTTP client's/OS cause
│   ├── FetchTimeout
│   ├── ConnectFailed
│   ├── TooLarge
│   ├── Blocked        the SSRF guard refused the address
│   ├── DNSFailed
│   └── BadResponse    truncated body, broken encoding, too many redirects ...
├── ParseError         a worker could not parse a page (crosses the process pool)
└── StorageError       the database failed                           → CLI exit 1
```
Anything else escaping the engine is a bug and fails the crawl loudly.
"""

from __future__ import annotations


class CrawlerError(Exception):
    """Base of every error the crawler raises deliberately."""


class ConfigError(CrawlerError):
    """Bad input from the user: a flag, a settings file, a seeds file. The message names it."""


class FetchError(CrawlerError):
    """A request failed. ``reason`` is a short machine-readable word stored with the URL."""

    reason = "fetch-error"

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url
        self.message = message


class FetchTimeout(FetchError):
    reason = "timeout"


class ConnectFailed(FetchError):
    reason = "connect"


class TooLarge(FetchError):
    reason = "too-large"


class Blocked(FetchError):
    """The host resolved only to addresses the SSRF guard refuses."""

    reason = "ssrf"


class DNSFailed(FetchError):
    reason = "dns"


class BadResponse(FetchError):
    reason = "bad-response"


class ParseError(CrawlerError):
    """A worker failed to parse a page. Built from plain arguments so it pickles."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(url, message)
        self.url = url
        self.message = message

    def __str__(self) -> str:
        return f"{self.url}: {self.message}"


class StorageError(CrawlerError):
    """The database could not be opened, migrated or written."""
