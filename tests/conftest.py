"""Shared fixtures: local sites on 127.0.0.1, a fresh database path per test, and a
PostgreSQL database (``tests.pg``; skipped where there is no server, failed under CI)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.pg import reset_schema, session_database  # noqa: E402
from tests.sites import LinkGraph, SiteServer  # noqa: E402

# No background warmer of the search kernels (crawler.relevance.warm) started by a test's
# ranking: a cold cache compiles in the foreground, so each test takes one known path.
# tests/crawler/relevance/test_scan.py runs the warmer on purpose, in a child process.
os.environ["CRAWL_NO_BACKGROUND_WARM"] = "1"
# Parse kernels compiled ahead of time (parsers.aot) only where a test builds them: the rest
# run numba's JIT, as the first crawl after an install does, whatever this checkout holds.
# tests/parsers/test_aot.py holds the two to the same results, a crawl's included.
_KERNELS = tempfile.mkdtemp(prefix="crawl-test-kernels-")  # empty; a test may build there
atexit.register(shutil.rmtree, _KERNELS, ignore_errors=True)
os.environ["CRAWL_KERNEL_DIR"] = _KERNELS


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    with session_database() as dsn:
        yield dsn


@pytest.fixture
def pg_dsn(pg_database: str) -> str:
    """The session's PostgreSQL database, emptied."""
    reset_schema(pg_database)
    return pg_database


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "crawl.db")


@pytest.fixture
def external() -> Iterator[SiteServer]:
    """A server standing for 'another host': a crawl in host scope must never reach it."""
    with SiteServer() as server:
        yield server


@pytest.fixture
def graph_site(external: SiteServer) -> Iterator[tuple[SiteServer, LinkGraph]]:
    """The generated link graph (600 pages) served on 127.0.0.1."""
    with SiteServer() as server:
        graph = LinkGraph(600, external=external.url)
        graph.serve(server)
        yield server, graph
