"""Connections through a proxy: an http proxy's ``CONNECT`` tunnel, and SOCKS.

Both hand back a connected socket to the target, on which the client then speaks TLS (an
https target: verified against the target's name, end to end) or plain HTTP, as on a direct
connection. SOCKS 4, 4a, 5 and 5h are python-socks' (``python_socks.async_.asyncio``); its
errors, and a ``CONNECT`` answered with anything but 2xx, are ``ProxyError`` here.
"""

from __future__ import annotations

import asyncio
import re
import socket
from typing import TYPE_CHECKING

from crawler.errors import ProxyError

if TYPE_CHECKING:
    from crawler.net.proxy import Proxy

MAX_CONNECT_HEAD_BYTES = 16 * 1024
"""The most bytes a proxy's answer to ``CONNECT`` may take (status line and headers)."""
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})(?: ([^\r\n]*))?\r?\n")


async def open_tunnel(sock: socket.socket, proxy: Proxy, host: str, port: int) -> None:
    """Ask the http proxy on ``sock`` for a tunnel to ``host:port``; return once it is open
    (a 2xx answer), the socket then a byte stream to the target. The caller's timeout
    bounds the wait."""
    loop = asyncio.get_running_loop()
    authority = f"{host}:{port}"
    head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
    if proxy.authorization:
        head += f"Proxy-Authorization: {proxy.authorization}\r\n"
    try:
        await loop.sock_sendall(sock, (head + "\r\n").encode("ascii"))
        answer = b""
        while b"\r\n\r\n" not in answer and b"\n\n" not in answer:
            if len(answer) > MAX_CONNECT_HEAD_BYTES:
                raise ProxyError(f"proxy {proxy.url}: an answer to CONNECT that never ends")
            data = await loop.sock_recv(sock, 4096)
            if not data:
                raise ProxyError(f"proxy {proxy.url} closed the connection on CONNECT {authority}")
            answer += data
    except OSError as exc:
        raise ProxyError(f"proxy {proxy.url}: {exc.strerror or exc}") from exc
    match = _STATUS_LINE.match(answer)
    if match is None:
        raise ProxyError(f"proxy {proxy.url}: not an HTTP answer to CONNECT: {answer[:80]!r}")
    status = int(match.group(1))
    if not 200 <= status < 300:
        reason = (match.group(2) or b"").decode("latin-1").strip()
        raise ProxyError(f"proxy {proxy.url} refused CONNECT {authority}: {status} {reason}")
    end = answer.find(b"\r\n\r\n")
    end = end + 4 if end >= 0 else answer.find(b"\n\n") + 2
    if end < len(answer):  # the target cannot have spoken first: TLS waits for our hello
        raise ProxyError(f"proxy {proxy.url}: bytes after its answer to CONNECT")


async def socks_connect(proxy: Proxy, host: str, port: int) -> socket.socket:
    """A socket connected to ``host:port`` (a name only for ``socks5h`` / ``socks4a``)
    through the SOCKS proxy; the caller's timeout bounds it."""
    from python_socks import ProxyError as SocksError
    from python_socks import ProxyType
    from python_socks.async_.asyncio import Proxy as SocksProxy

    kind = ProxyType.SOCKS5 if proxy.scheme.startswith("socks5") else ProxyType.SOCKS4
    client = SocksProxy.create(
        proxy_type=kind,
        host=proxy.host,
        port=proxy.port,
        username=proxy.username or None,
        password=proxy.password or None,
        rdns=proxy.remote_dns,
    )
    try:
        return await client.connect(dest_host=host, dest_port=port)
    except SocksError as exc:
        raise ProxyError(f"proxy {proxy.url} refused {host}:{port}: {exc}") from exc
    except OSError as exc:  # python-socks' ProxyConnectionError is one
        raise ProxyError(f"proxy {proxy.url}: {exc.strerror or exc}") from exc
