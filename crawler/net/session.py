"""The crawl's HTTP client as the settings and the environment describe it.

``Network.prepare`` reads what the settings name, before anything is crawled, so that a
bad file or variable is a usage error (exit 2) naming it: the proxy environment
(``crawler.net.proxy``), ``--netrc`` (``crawler.net.credentials``), ``--cookies``
(``crawler.net.cookies``), ``--ca-bundle``, the headers (``crawler.net.headers``).
``open_session`` then makes the one ``HttpClient`` of a run, inside its event loop.

TLS: verified always. Without ``--ca-bundle``, against the system's CA certificates, which
OpenSSL looks for in ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when those are set; with it,
against that file's certificates only (as curl ``--cacert``).
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from crawler.errors import ConfigError
from crawler.net import http
from crawler.net.cookies import CookieStore, Loaded, read_cookies_txt
from crawler.net.credentials import load_netrc
from crawler.net.decoding import accept_encoding
from crawler.net.guard import HostAllowed
from crawler.net.headers import HostHeaders, merge, parse_header
from crawler.net.proxy import ProxyRules
from crawler.settings import Settings

log = logging.getLogger(__name__)

ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"


@dataclass(frozen=True, slots=True)
class Network:
    """What the crawl's HTTP client is made of, read and checked."""

    headers: dict[str, str]
    host_headers: HostHeaders | None
    proxies: ProxyRules | None
    host_credentials: dict[str, str]
    cookies: list[Loaded] | None
    """``None``: the crawl sends and keeps no cookies."""
    keep_cookies: bool
    tls: Callable[[], ssl.SSLContext]

    @classmethod
    def prepare(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> Network:
        """Read and check the files and variables ``settings`` name; ``ConfigError`` names
        the one at fault."""
        environ = os.environ if environ is None else environ
        base = {"User-Agent": settings.user_agent, "Accept": ACCEPT,
                "Accept-Encoding": accept_encoding()}  # fmt: skip
        headers = merge(base, (parse_header(text) for text in settings.headers))
        host_headers = HostHeaders(settings.host_headers) if settings.host_headers else None
        proxies = ProxyRules.from_settings(settings.proxy, settings.no_proxy, environ)
        if proxies:
            log.info("proxies: %s", proxies.describe())
        credentials = load_netrc(settings.netrc) if settings.netrc is not None else {}
        cookies: list[Loaded] | None = None
        if settings.cookies is not None:
            cookies = read_cookies_txt(settings.cookies)
            log.info("%d cookies read from %s", len(cookies), settings.cookies)
        elif settings.keep_cookies:
            cookies = []
        return cls(headers, host_headers, proxies or None, credentials, cookies,
                   settings.keep_cookies, _tls(settings.ca_bundle))  # fmt: skip


def _tls(ca_bundle: str | None) -> Callable[[], ssl.SSLContext]:
    """What makes the TLS context; a ``--ca-bundle`` is loaded now, to fail before the
    crawl."""
    if ca_bundle is None:
        return ssl.create_default_context
    path = os.path.expanduser(ca_bundle)
    try:
        context = ssl.create_default_context(cafile=path)
    except FileNotFoundError:
        raise ConfigError(f"--ca-bundle {ca_bundle}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"--ca-bundle {ca_bundle}: not a PEM file of CA certificates "
                          f"({exc})") from None  # fmt: skip
    return lambda: context


def open_session(
    settings: Settings,
    allowed: HostAllowed,
    credentials: dict[str, str] | None = None,
    network: Network | None = None,
) -> http.HttpClient:
    """The crawl's one HTTP client: at most ``concurrency`` connections, DNS cached, a
    resolver that refuses private addresses for origins not ``allowed``, ``credentials``
    (``user:password`` by origin, the seeds') sent to their own origin only, and what
    ``network`` holds (prepared from ``settings`` when not given)."""
    if network is None:
        network = Network.prepare(settings)
    cookies = None
    if network.cookies is not None:
        cookies = CookieStore(keep=network.keep_cookies, initial=network.cookies)
    return http.HttpClient(
        limit=settings.concurrency,
        connect_timeout=settings.connect_timeout,
        headers=network.headers,
        allowed=allowed,
        tls=network.tls,
        credentials=credentials,
        host_credentials=network.host_credentials,
        host_headers=network.host_headers,
        proxies=network.proxies,
        cookies=cookies,
    )
