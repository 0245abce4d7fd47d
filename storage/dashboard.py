"""The read side ``crawl serve`` shows: a crawl database's runs, progress, hosts and pages.

Owns: the dashboard's queries, one portable SQL text each (SQLite and PostgreSQL), and the
two ways they run (``open_dashboard``): a SQLite file read-only (``mode=ro``, a connection
per call in a worker thread, so it reads beside a running crawl's writer in WAL mode), or a
PostgreSQL database through a small asyncpg pool whose sessions are read-only
(``default_transaction_read_only``). Invariants: no SQL comes from a caller, only values;
a sort column is one of ``HOST_SORTS``; every result is bounded (``LIMIT``); a query slower
than ``deadline_s`` is cut (SQLite's progress handler, PostgreSQL's ``statement_timeout``)
and raises ``StoreError``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Protocol

from storage.base import StoreError
from storage.dsn import is_postgres, redact_dsn
from storage.postgres.driver import CONNECT_TIMEOUT_S, FAILURES, create_pool, reason
from storage.postgres.read import numbered
from storage.sqlite.read import connect_readonly

if TYPE_CHECKING:
    import asyncpg

Row = tuple[Any, ...]

HOST_SORTS = ("origin", "done", "failed", "queued", "skipped", "errors", "s429", "s503")
"""Columns the host table sorts by (``origin`` ascending, counts descending)."""
MAX_SAMPLES = 100_000
"""Samples read for one run's chart (at one every 2 s, 55 hours)."""
MAX_OUTLINKS = 500
"""Outlinks shown for one page."""
MAX_INLINK_COUNT = 10_000
"""Pages linking to a page are counted up to this many."""
SNIPPET_SOURCE_CHARS = 20_000
"""The start of a page's text a snippet is cut from."""


class _Backend(Protocol):
    async def fetch(self, sql: str, *args: object) -> list[Row]: ...

    async def close(self) -> None: ...


class _SQLite:
    """A read-only connection per call, in a thread; cut after ``deadline_s``."""

    def __init__(self, path: str, deadline_s: float) -> None:
        self.path, self.deadline_s = path, deadline_s
        connect_readonly(path).close()  # StoreError now, not at the first view

    async def fetch(self, sql: str, *args: object) -> list[Row]:
        return await asyncio.to_thread(self._fetch, sql, args)

    def _fetch(self, sql: str, args: tuple[object, ...]) -> list[Row]:
        connection = connect_readonly(self.path)
        deadline = time.monotonic() + self.deadline_s
        connection.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
        try:
            return connection.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read: {exc}") from exc
        finally:
            connection.close()

    async def close(self) -> None:
        pass


class _Postgres:
    """An asyncpg pool of read-only sessions, opened on first use."""

    def __init__(self, dsn: str, deadline_s: float) -> None:
        self.dsn, self.deadline_s = dsn, deadline_s
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()

    async def _connected(self) -> asyncpg.Pool:
        async with self._opening:
            if self._pool is None:
                settings = {
                    "application_name": "crawler-serve",
                    "default_transaction_read_only": "on",
                    "statement_timeout": str(int(self.deadline_s * 1000)),
                }
                try:
                    self._pool = await create_pool(
                        self.dsn, min_size=0, max_size=4, timeout=CONNECT_TIMEOUT_S,
                        server_settings=settings,
                    )  # fmt: skip
                except FAILURES.connect as exc:
                    message = f"{redact_dsn(self.dsn)}: cannot connect: {reason(exc)}"
                    raise StoreError(message) from exc
        return self._pool

    async def fetch(self, sql: str, *args: object) -> list[Row]:
        pool = await self._connected()
        try:
            rows = await pool.fetch(numbered(sql), *args)
        except FAILURES.errors as exc:
            raise StoreError(f"{redact_dsn(self.dsn)}: cannot read: {reason(exc)}") from exc
        return [tuple(row) for row in rows]

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


async def open_dashboard(db: str, deadline_s: float = 5.0) -> Dashboard:
    """The dashboard reader of ``db`` (a SQLite file or a PostgreSQL DSN); ``StoreError`` if
    it cannot be read or is not a crawl database of schema version 2 or newer."""
    backend: _Backend = _Postgres(db, deadline_s) if is_postgres(db) else _SQLite(db, deadline_s)
    dashboard = Dashboard(backend, redact_dsn(db))
    try:
        dashboard.version = await dashboard.schema_version()
    except BaseException:
        await backend.close()
        raise
    if dashboard.version < 2:
        await backend.close()
        raise StoreError(f"{dashboard.name}: schema version {dashboard.version}: run a crawl on it")
    return dashboard


class Dashboard:
    """The queries; each returns plain rows or dicts of them (JSON-ready)."""

    def __init__(self, backend: _Backend, name: str) -> None:
        self._db, self.name, self.version = backend, name, 0

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        rows = await self._db.fetch("SELECT max(version) FROM schema_migrations")
        return int(rows[0][0] or 0)

    async def runs(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest runs first."""
        rows = await self._db.fetch(
            "SELECT id, started_at, ended_at, status, reason, seeds, pages_ok, pages_failed, "
            "pages_unchanged, bytes FROM runs ORDER BY id DESC LIMIT ?",
            limit,
        )
        keys = ("id", "started_at", "ended_at", "status", "reason", "seeds", "pages_ok",
                "pages_failed", "pages_unchanged", "bytes")  # fmt: skip
        return [dict(zip(keys, row, strict=True)) for row in rows]

    async def samples(self, run_id: int) -> list[dict[str, Any]]:
        """The run's progress samples, oldest first (none before schema version 4)."""
        if self.version < 4:
            return []
        rows = await self._db.fetch(
            "SELECT elapsed_s, at, done, failed, queued, in_flight, bytes FROM run_samples "
            "WHERE run_id = ? ORDER BY elapsed_s LIMIT ?",
            run_id,
            MAX_SAMPLES,
        )
        keys = ("elapsed_s", "at", "done", "failed", "queued", "in_flight", "bytes")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    async def counts(self, now: float) -> dict[str, Any]:
        """Pages by status, errors by kind, skipped URLs by reason, the queue at ``now``."""
        fetch = self._db.fetch
        by_status = await fetch("SELECT status, count(*) FROM pages GROUP BY status ORDER BY 1")
        errors = await fetch(
            "SELECT coalesce(error, 'HTTP ' || CAST(status AS TEXT)) AS kind, count(*) "
            "FROM pages WHERE error IS NOT NULL OR status >= 400 GROUP BY kind "
            "ORDER BY count(*) DESC, kind LIMIT 50"
        )
        skipped = await fetch(
            "SELECT reason, count(*) FROM urls WHERE state = 'skipped' GROUP BY reason "
            "ORDER BY count(*) DESC, reason LIMIT 50"
        )
        queue = await fetch(
            "SELECT sum(CASE WHEN state = 'queued' THEN 1 ELSE 0 END), "
            "sum(CASE WHEN state IN ('done', 'failed') AND next_fetch_at <= ? THEN 1 ELSE 0 END), "
            "sum(CASE WHEN state IN ('done', 'failed') AND next_fetch_at > ? THEN 1 ELSE 0 END), "
            "count(*) FROM urls",
            now,
            now,
        )
        queued, due_now, due_later, urls = (int(v or 0) for v in queue[0])
        return {
            "by_status": {("none" if s is None else str(s)): n for s, n in by_status},
            "errors": dict(errors),
            "skipped": {str(reason): n for reason, n in skipped},
            "queue": {"queued": queued, "due_now": due_now, "due_later": due_later},
            "urls": urls,
            "pages": sum(n for _, n in by_status),
        }

    async def hosts(self, sort: str, limit: int, offset: int) -> list[dict[str, Any]]:
        """One row per origin: URL states, failed pages, 429s and 503s (a page's last
        answer), robots.txt status and body (for its Crawl-delay), sorted by ``sort``."""
        if sort not in HOST_SORTS:
            raise ValueError(f"unknown sort {sort!r}")
        order = "u.origin" if sort == "origin" else f"{sort} DESC, u.origin"
        rows = await self._db.fetch(
            "SELECT u.origin, u.done, u.failed, u.queued, u.skipped, "
            "coalesce(p.errors, 0) AS errors, coalesce(p.s429, 0) AS s429, "
            "coalesce(p.s503, 0) AS s503, r.status, r.body FROM ("
            "  SELECT origin, sum(CASE WHEN state = 'done' THEN 1 ELSE 0 END) AS done,"
            "  sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS failed,"
            "  sum(CASE WHEN state = 'queued' THEN 1 ELSE 0 END) AS queued,"
            "  sum(CASE WHEN state = 'skipped' THEN 1 ELSE 0 END) AS skipped"
            "  FROM urls GROUP BY origin) AS u "
            "LEFT JOIN ("
            "  SELECT w.origin,"
            "  sum(CASE WHEN pg.error IS NOT NULL OR pg.status >= 400 THEN 1 ELSE 0 END) AS errors,"
            "  sum(CASE WHEN pg.status = 429 THEN 1 ELSE 0 END) AS s429,"
            "  sum(CASE WHEN pg.status = 503 THEN 1 ELSE 0 END) AS s503"
            "  FROM pages AS pg JOIN urls AS w ON w.url = pg.url GROUP BY w.origin) AS p "
            "ON p.origin = u.origin "
            f"LEFT JOIN robots AS r ON r.origin = u.origin ORDER BY {order} LIMIT ? OFFSET ?",
            limit,
            offset,
        )
        keys = ("origin", "done", "failed", "queued", "skipped", "errors", "s429", "s503",
                "robots_status", "robots_body")  # fmt: skip
        return [
            {k: (int(v) if isinstance(v, int | float) and k != "origin" else v)
             for k, v in zip(keys, row, strict=True)}
            for row in rows
        ]  # fmt: skip

    async def page(self, url: str) -> dict[str, Any] | None:
        """A stored page with its frontier row; ``None`` if ``url`` is not stored."""
        rows = await self._db.fetch(
            "SELECT p.id, p.url, p.final_url, p.status, p.error, p.content_type, p.title, p.lang,"
            " p.canonical, p.meta_robots, p.depth, p.body_bytes, p.content_hash, p.fetched_at,"
            " p.run_id, p.outlinks, p.attempts, p.duplicate_of, p.score, p.simhash,"
            " p.near_duplicate_of, p.etag, p.last_modified, p.previous_hash, p.changed_at,"
            " p.headers, u.state, u.next_fetch_at, u.interval_s, u.priority "
            "FROM pages AS p LEFT JOIN urls AS u ON u.url = p.url WHERE p.url = ?",
            url,
        )
        if not rows:
            return None
        keys = ("id", "url", "final_url", "status", "error", "content_type", "title", "lang",
                "canonical", "meta_robots", "depth", "body_bytes", "content_hash", "fetched_at",
                "run_id", "outlinks", "attempts", "duplicate_of", "score", "simhash",
                "near_duplicate_of", "etag", "last_modified", "previous_hash", "changed_at",
                "headers", "state", "next_fetch_at", "interval_s", "priority")  # fmt: skip
        page = dict(zip(keys, rows[0], strict=True))
        page["outlinks"] = _json_list(page["outlinks"])
        page["outlinks_total"] = len(page["outlinks"])
        page["outlinks"] = page["outlinks"][:MAX_OUTLINKS]
        page["headers"] = _json_object(page["headers"])
        if page["simhash"] is not None:
            page["simhash"] = f"{page['simhash'] & (1 << 64) - 1:016x}"
        pattern = '%"' + _like_escaped(url) + '"%'
        inlinks = await self._db.fetch(
            "SELECT count(*) FROM (SELECT 1 FROM pages WHERE url <> ? AND outlinks LIKE ? "
            "ESCAPE '\\' LIMIT ?) AS linking",
            url,
            pattern,
            MAX_INLINK_COUNT,
        )
        page["inlinks"] = int(inlinks[0][0])
        page["inlinks_capped"] = page["inlinks"] >= MAX_INLINK_COUNT
        return page

    async def texts(self, urls: list[str]) -> dict[str, str]:
        """The start of each stored page's text (for search snippets)."""
        if not urls:
            return {}
        marks = ", ".join("?" for _ in urls)
        rows = await self._db.fetch(
            f"SELECT url, substr(text, 1, {SNIPPET_SOURCE_CHARS}) FROM pages "
            f"WHERE url IN ({marks}) AND text IS NOT NULL",
            *urls,
        )
        return {url: text for url, text in rows}


def _like_escaped(text: str) -> str:
    r"""``text`` as a ``LIKE`` pattern that matches only itself (``\`` escapes), and as JSON
    writes it inside a string (a URL's ``"`` and ``\`` are escaped there)."""
    inner = json.dumps(text)[1:-1]
    return inner.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _json_list(value: object) -> list[str]:
    try:
        links = json.loads(value) if isinstance(value, str) else []
    except ValueError:
        return []
    return [link for link in links if isinstance(link, str)] if isinstance(links, list) else []


def _json_object(value: object) -> dict[str, Any] | list[Any] | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None
