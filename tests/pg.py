"""PostgreSQL test helpers: a throwaway database per test session, sync queries, a multi-host
local site, and crawl subprocesses.

The server is ``$CRAWLER_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``,
the maintenance database the session's database is created from). When it cannot be reached
the PostgreSQL tests are skipped, except where ``CI=true``: there they fail, so that a missing
service cannot pass silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
from aiohttp import web

from tests.proc import child_env
from tests.sites import Hit, SiteServer

ROOT = Path(__file__).resolve().parent.parent
ADMIN_DSN = os.environ.get("CRAWLER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


# -- the database ----------------------------------------------------------------------------
def _run(coroutine: Any) -> Any:
    """Run a coroutine to its end, also from inside a running event loop (in a thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


def with_database(dsn: str, name: str) -> str:
    """``dsn`` naming the database ``name`` instead."""
    return urlsplit(dsn)._replace(path="/" + name).geturl()


def unreachable(reason: str) -> None:
    """Skip (locally) or fail (``CI=true``) for a PostgreSQL server that is not there."""
    message = f"PostgreSQL at {ADMIN_DSN} is not reachable: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the service must be running)", pytrace=False)
    pytest.skip(message)


@contextlib.contextmanager
def session_database() -> Iterator[str]:
    """Create a database with a unique name from the maintenance database; drop it after."""
    name = f"crawler_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        connection = await asyncpg.connect(ADMIN_DSN, timeout=5)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()

    async def drop() -> None:
        connection = await asyncpg.connect(ADMIN_DSN, timeout=5)
        try:
            await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await connection.close()

    try:
        _run(create())
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        unreachable(str(exc) or type(exc).__name__)
    try:
        yield with_database(ADMIN_DSN, name)
    finally:
        _run(drop())


def reset_schema(dsn: str) -> None:
    """An empty database: drop everything the previous test created."""

    async def reset() -> None:
        connection = await asyncpg.connect(dsn, timeout=5)
        try:
            await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        finally:
            await connection.close()

    _run(reset())


def query(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of one query, on a connection of its own."""

    async def fetch() -> list[tuple[Any, ...]]:
        connection = await asyncpg.connect(dsn, timeout=5)
        try:
            return [tuple(row) for row in await connection.fetch(sql, *args)]
        finally:
            await connection.close()

    result: list[tuple[Any, ...]] = _run(fetch())
    return result


def scalar(dsn: str, sql: str, *args: Any) -> Any:
    return query(dsn, sql, *args)[0][0]


def count_pages(dsn: str) -> int:
    try:
        return int(scalar(dsn, "SELECT count(*) FROM pages"))
    except asyncpg.exceptions.UndefinedTableError:
        return 0


# -- a multi-host site -----------------------------------------------------------------------
class MultiHostSite:
    """``hosts`` servers on 127.0.0.1 (one origin each, by port), ``pages`` HTML pages each:
    ``/`` and ``/p<i>.html``. Every page links to the next one on its host (a chain from ``/``
    reaches them all), to a few others on its host and to pages of other hosts. Each server
    answers after ``latency_s`` and records its requests (``SiteServer.hits``)."""

    def __init__(self, hosts: int = 4, pages: int = 40, *, latency_s: float = 0.005,
                 seed: int = 3) -> None:  # fmt: skip
        self.n_hosts = hosts
        self.n_pages = pages
        self.servers = [SiteServer(latency_s=latency_s) for _ in range(hosts)]
        rng = random.Random(seed)
        self.plan: list[list[list[tuple[int, int]]]] = []
        for h in range(hosts):
            per_host = []
            for i in range(pages):
                links = {(h, i + 1)} if i + 1 < pages else set()
                links |= {(h, rng.randrange(pages)) for _ in range(4)}
                links |= {(rng.randrange(hosts), rng.randrange(pages)) for _ in range(2)}
                per_host.append(sorted(links))
            self.plan.append(per_host)
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> MultiHostSite:
        for h, server in enumerate(self.servers):
            self._stack.enter_context(server)
            server.fallback = self._handler(h)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @staticmethod
    def path(i: int) -> str:
        return "/" if i == 0 else f"/p{i}.html"

    def index(self, path: str) -> int | None:
        if path == "/":
            return 0
        if path.startswith("/p") and path.endswith(".html") and path[2:-5].isdigit():
            i = int(path[2:-5])
            return i if 0 < i < self.n_pages else None
        return None

    def url(self, h: int, i: int) -> str:
        return self.servers[h].url + self.path(i)

    def seeds(self) -> list[str]:
        return [self.url(h, 0) for h in range(self.n_hosts)]

    def urls(self) -> set[str]:
        return {self.url(h, i) for h in range(self.n_hosts) for i in range(self.n_pages)}

    def body(self, h: int, i: int) -> str:
        anchors = "".join(f'<a href="{self.url(t, j)}">host {t} page {j}</a> '
                          for t, j in self.plan[h][i])  # fmt: skip
        return (
            f"<!DOCTYPE html><html lang='en'><head><title>Host {h} page {i}</title></head>"
            f"<body><h1>Host {h}, page {i}</h1><p>alpha beta gamma delta word{i} "
            f"host{h}</p><p>{anchors}</p></body></html>"
        )

    def _handler(self, h: int) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            i = self.index(request.path)
            if i is None or request.query_string:
                return web.Response(status=404, text="<p>missing</p>", content_type="text/html")
            return web.Response(text=self.body(h, i), content_type="text/html")

        return handle

    def page_hits(self) -> list[tuple[int, Hit]]:
        """(host, hit) of every request for a page (not robots.txt nor sitemaps)."""
        return [(h, hit) for h, server in enumerate(self.servers) for hit in list(server.hits)
                if self.index(hit.path) is not None]  # fmt: skip

    def fetch_counts(self) -> Counter[str]:
        return Counter(self.servers[h].url + hit.path for h, hit in self.page_hits())


# -- crawl subprocesses ----------------------------------------------------------------------
def env() -> dict[str, str]:
    return child_env()


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m crawler ARGS`` to its end."""
    return subprocess.run([sys.executable, "-m", "crawler", *args], capture_output=True,
                          text=True, env=env(), timeout=timeout)  # fmt: skip


class Worker:
    """One ``crawl`` process on a shared database, in its own session (its parse workers are
    reaped with it); output goes to files."""

    def __init__(self, tmp_path: Path, seeds: Path, dsn: str, *flags: str) -> None:
        self.out = tmp_path / f"worker-{time.monotonic_ns()}.out"
        self.err = self.out.with_suffix(".err")
        args = [sys.executable, "-m", "crawler", str(seeds), "--db", dsn, *flags]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err, env=env(),
                                         start_new_session=True)  # fmt: skip

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the crawl process and its parse workers (its whole session)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise AssertionError(f"worker did not finish in {timeout} s:\n{self.stderr()}") from exc
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def stderr(self) -> str:
        return self.err.read_text()[-3000:]


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
