"""Real proxies on loopback for the tests: Debian's ``tinyproxy`` (an HTTP forward proxy with
CONNECT and Basic auth) and ``microsocks`` (SOCKS5, with a login). Each is a subprocess on
a free port, stopped when the test ends. A missing binary skips the test locally and fails
it under ``CI=true`` (``.ci/run`` installs both).

``TlsSite``: a certificate authority of the test's own (``trustme``) and a server certificate
it issued for 127.0.0.1 and localhost: what a private CA given by ``SSL_CERT_FILE`` or
``--ca-bundle`` is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def need(binary: str) -> str:
    """The path of ``binary``; skip, or fail under ``CI=true``, without it."""
    path = shutil.which(binary)
    if path is None:
        message = f"{binary} is not installed (Debian package {binary})"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: .ci/run installs it)", pytrace=False)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the proxy exited: {log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("the proxy did not start listening")


@dataclass
class RunningProxy:
    url: str
    """The proxy's URL, with its credentials when it requires them."""
    port: int
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextlib.contextmanager
def _serve(command: list[str], scheme: str, port: int, log: Path,
           login: tuple[str, str] | None) -> Iterator[RunningProxy]:  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, process, log)
        auth = f"{login[0]}:{login[1]}@" if login else ""
        yield RunningProxy(f"{scheme}://{auth}127.0.0.1:{port}", port, log)
    finally:
        process.terminate()
        process.wait(10)


def tinyproxy(directory: Path, login: tuple[str, str] | None = None
              ) -> contextlib.AbstractContextManager[RunningProxy]:  # fmt: skip
    """``tinyproxy`` on 127.0.0.1 (``login``: Basic auth it requires); ``-d`` keeps it in
    the foreground, its log on standard output."""
    binary = need("tinyproxy")
    port = free_port()
    lines = [f"Port {port}", "Listen 127.0.0.1", "Timeout 30", "LogLevel Connect",
             "MaxClients 100", "Allow 127.0.0.1"]  # fmt: skip
    if login:
        lines.append(f"BasicAuth {login[0]} {login[1]}")
    config = directory / f"tinyproxy-{port}.conf"
    config.write_text("\n".join(lines) + "\n")
    log = directory / f"tinyproxy-{port}.log"
    return _serve([binary, "-d", "-c", str(config)], "http", port, log, login)


def microsocks(directory: Path, login: tuple[str, str] | None = None
               ) -> contextlib.AbstractContextManager[RunningProxy]:  # fmt: skip
    """``microsocks`` (SOCKS5) on 127.0.0.1 (``login``: the user and password it requires)."""
    binary = need("microsocks")
    port = free_port()
    command = [binary, "-i", "127.0.0.1", "-p", str(port)]
    if login:
        command += ["-u", login[0], "-P", login[1]]
    return _serve(command, "socks5", port, directory / f"microsocks-{port}.log", login)


@dataclass
class TlsSite:
    """A private CA (``ca_pem``, the file to trust) and a server context for 127.0.0.1 and
    localhost signed by it."""

    ca_pem: Path
    server: ssl.SSLContext


def private_ca(directory: Path) -> TlsSite:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    ca_pem = directory / "private-ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf.configure_cert(server)
    return TlsSite(ca_pem, server)
