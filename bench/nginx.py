"""Serve a directory with a private nginx on 127.0.0.1 for the crawl benchmark.

Installs nginx with apt-get when it is missing (and says so), writes its own config with its
own pid file, error log and temp paths under bench/work/nginx-PORT/, `access_log off`,
`worker_processes 1`, and runs it in the foreground (`daemon off`) as a subprocess that
`Nginx.stop()` ends. Usage as a context manager:

    with Nginx(site_dir, port) as server:
        ...  # http://127.0.0.1:{port}/ serves site_dir

Run alone (`python bench/nginx.py DIR [--port P]`) it serves DIR until Ctrl-C or SIGTERM; a
synthetic site (`bench/sitegen.py`) by default on the port its absolute links name, and with
a warning on another (those links would then leave a crawl's scope, and skew its profile).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path

from benchlib import WORK_DIR, free_port, tree_cpu_s, wait_for_port

CONFIG = """\
worker_processes 1;
daemon off;
user root;
pid {state}/nginx.pid;
error_log {state}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format status '$status $request_method $request_uri';
    access_log {access_log};
    client_body_temp_path {state}/client_body;
    proxy_temp_path {state}/proxy;
    fastcgi_temp_path {state}/fastcgi;
    uwsgi_temp_path {state}/uwsgi;
    scgi_temp_path {state}/scgi;
    types {{ text/html html; text/plain txt; }}
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{ }}
    }}
}}
"""


def ensure_nginx() -> str:
    """The nginx binary; installs Debian's package when it is missing."""
    found = shutil.which("nginx") or (Path("/usr/sbin/nginx").exists() and "/usr/sbin/nginx")
    if found:
        return str(found)
    print("[setup] nginx is missing: running apt-get update && apt-get install -y nginx")
    subprocess.run(["apt-get", "update"], check=True)
    subprocess.run(["apt-get", "install", "-y", "nginx"], check=True)
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(found).exists():
        raise RuntimeError("apt-get install nginx did not produce an nginx binary")
    return found


def nginx_version(binary: str) -> str:
    proc = subprocess.run([binary, "-v"], capture_output=True, text=True)
    return (proc.stderr or proc.stdout).strip().rsplit("/", 1)[-1]


class Nginx:
    """One foreground nginx serving `root` on 127.0.0.1:port."""

    def __init__(self, root: Path, port: int, access_log: Path | None = None) -> None:
        self.root = root.resolve()
        self.port = port
        self.access_log = access_log
        """Where to log every request as `STATUS METHOD URI` (off when None: benchmarks)."""
        self.state = WORK_DIR / f"nginx-{port}"
        self.binary = ensure_nginx()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_config(self) -> Path:
        self.state.mkdir(parents=True, exist_ok=True)
        conf = self.state / "nginx.conf"
        access_log = f"{self.access_log} status" if self.access_log is not None else "off"
        conf.write_text(
            CONFIG.format(state=self.state, port=self.port, root=self.root, access_log=access_log)
        )
        return conf

    def start(self) -> None:
        conf = self.write_config()
        cmd = [
            self.binary,
            "-p",
            str(self.state),
            "-c",
            str(conf),
            "-e",
            str(self.state / "error.log"),
        ]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
        try:
            wait_for_port(self.port)
        except RuntimeError:
            self.stop()
            raise
        print(f"[nginx] {nginx_version(self.binary)} serving {self.root} on {self.base_url}")

    def cpu_s(self) -> float:
        """CPU seconds used so far by the nginx master and worker."""
        return tree_cpu_s(self.proc.pid) if self.proc else 0.0

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT)  # graceful shutdown
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Nginx:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def site_port(root: Path) -> int | None:
    """The port a synthetic site (``bench/sitegen.py``) was generated for, from the
    ``base_url`` of its ``site.json``; ``None`` for any other directory."""
    try:
        summary = json.loads((root / "site.json").read_text())
        return urllib.parse.urlsplit(summary["base_url"]).port
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    made_for = site_port(args.root)
    port = free_port(args.port or made_for or 0)
    if made_for is not None and port != made_for:
        print(f"WARNING: {args.root} was generated for port {made_for} (its site.json): its "
              f"absolute links point there, out of the scope of a crawl of port {port}")  # fmt: skip
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop nginx on SIGTERM too
    with Nginx(args.root, port) as server:
        print(f"serving until Ctrl-C: {server.base_url}/")
        with contextlib.suppress(KeyboardInterrupt):
            server.proc.wait()  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    sys.exit(main())
