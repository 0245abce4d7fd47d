"""The read side of a PostgreSQL crawl database, for synchronous callers: the ``Reader`` that
exports, WARC, ``crawl runs``, ``rank`` and ``crawl stats`` use (the same shapes as the
SQLite reader's).

Owns: read-only access to a PostgreSQL database from sync code. asyncpg runs on a private
event loop in its own thread (so these methods work whether or not the caller runs an
event loop); each call connects, reads and closes; ``iter_rows`` streams through a
server-side cursor inside a read-only transaction, one chunk in memory at a time, and
closes the connection when the caller stops.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Generator
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from storage.base import STORED_COLUMNS, ExportFilter, StoreError
from storage.dsn import redact_dsn
from storage.postgres.driver import CONNECT_TIMEOUT_S, FAILURES, connect, missing_table, reason

if TYPE_CHECKING:
    import asyncpg

T = TypeVar("T")

_CHUNK = 500
"""Rows fetched from the cursor at a time."""


class Loop:
    """A private event loop running in a daemon thread; ``call`` runs a coroutine there and
    waits for its result."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="postgres-read", daemon=True
        )

    def __enter__(self) -> Loop:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


def numbered(where: str) -> str:
    """``?`` placeholders (``ExportFilter.where``, ``storage.dashboard``'s queries) as
    PostgreSQL's ``$1, $2 ...``."""
    parts = where.split("?")
    out = [parts[0]]
    for number, part in enumerate(parts[1:], start=1):
        out.append(f"${number}{part}")
    return "".join(out)


async def connect_reader(dsn: str) -> asyncpg.Connection:
    try:
        return await connect(
            dsn,
            timeout=CONNECT_TIMEOUT_S,
            server_settings={"application_name": "crawler-read"},
        )
    except FAILURES.connect as exc:
        raise StoreError(f"{redact_dsn(dsn)}: cannot connect: {reason(exc)}") from exc


def _failure(dsn: str, what: str, exc: BaseException) -> StoreError:
    if missing_table(exc):
        return StoreError(f"{redact_dsn(dsn)}: not a crawl database ({reason(exc)})")
    return StoreError(f"{redact_dsn(dsn)}: cannot {what}: {reason(exc)}")


async def _close(connection: asyncpg.Connection) -> None:
    try:
        await asyncio.wait_for(connection.close(), 5)
    except FAILURES.close:
        connection.terminate()


def _read(dsn: str, what: str, reader: Any) -> Any:
    """Connect, run ``reader(connection)`` (a coroutine function), close."""

    async def run() -> Any:
        connection = await connect_reader(dsn)
        try:
            return await reader(connection)
        except FAILURES.errors as exc:
            raise _failure(dsn, what, exc) from exc
        finally:
            await _close(connection)

    with Loop() as loop:
        return loop.call(run())


class PostgresReader:
    """A ``Reader`` of the PostgreSQL database ``dsn`` names."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.name = redact_dsn(dsn)

    def iter_rows(
        self, columns: tuple[str, ...], selection: ExportFilter
    ) -> Generator[tuple[object, ...], None, None]:
        """Streamed from a server-side cursor (constant memory)."""
        dsn = self.dsn
        where, params = selection.where()
        sql = f"SELECT {', '.join(columns)} FROM pages{numbered(where)} ORDER BY id"
        with Loop() as loop:
            connection = loop.call(connect_reader(dsn))
            try:

                async def open_cursor() -> Any:
                    await connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    return await connection.cursor(sql, *params)

                try:
                    cursor = loop.call(open_cursor())
                    while rows := loop.call(cursor.fetch(_CHUNK)):
                        for row in rows:
                            yield tuple(row)
                except FAILURES.errors as exc:
                    raise _failure(dsn, "read pages", exc) from exc
            finally:
                loop.call(_close(connection))

    def iter_stored(
        self, selection: ExportFilter
    ) -> Generator[tuple[object, ...] | None, None, None]:
        """Chunks of rows, bodies included, from the same cursor as ``iter_rows``."""
        yield from self.iter_rows(STORED_COLUMNS, selection)

    def read_runs(self) -> list[tuple[object, ...]]:
        async def reader(connection: asyncpg.Connection) -> list[tuple[object, ...]]:
            rows = await connection.fetch(
                "SELECT id, started_at, ended_at, status, reason, pages_ok, pages_failed, "
                "pages_unchanged, bytes, harvest FROM runs ORDER BY id"
            )
            return [tuple(row) for row in rows]

        result: list[tuple[object, ...]] = _read(self.dsn, "read runs", reader)
        return result

    def read_tokens(self) -> list[tuple[str, str | None, bytes]]:
        async def reader(connection: asyncpg.Connection) -> list[tuple[str, str | None, bytes]]:
            rows = await connection.fetch(
                "SELECT url, title, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id"
            )
            return [(row[0], row[1], bytes(row[2])) for row in rows]

        result: list[tuple[str, str | None, bytes]] = _read(self.dsn, "read tokens", reader)
        return result

    def read_stats(self, now: float) -> dict[str, object]:
        async def reader(connection: asyncpg.Connection) -> dict[str, object]:
            return await _stats(connection, self.name, now)

        result: dict[str, object] = _read(self.dsn, "read statistics", reader)
        return result


async def _stats(connection: asyncpg.Connection, name: str, now: float) -> dict[str, object]:
    """``Reader.read_stats`` of the database ``connection`` is to, called ``name``."""

    async def one(sql: str, *args: object) -> Any:
        return await connection.fetchval(sql, *args)

    version = await one("SELECT max(version) FROM schema_migrations")
    if version is None or version < 2:
        raise StoreError(f"{name}: schema version {version}: run a crawl on it to upgrade")
    urls = {
        state: int(count)
        for state, count in await connection.fetch(
            "SELECT state, count(*) FROM urls GROUP BY state ORDER BY state"
        )
    }
    by_status = {
        ("none" if status is None else str(status)): int(count)
        for status, count in await connection.fetch(
            "SELECT status, count(*) FROM pages GROUP BY status ORDER BY status NULLS FIRST"
        )
    }
    skipped = {
        why: int(count)
        for why, count in await connection.fetch(
            "SELECT reason, count(*) FROM urls WHERE state = 'skipped' GROUP BY reason "
            "ORDER BY count(*) DESC, reason"
        )
    }
    next_due = await one("SELECT min(next_fetch_at) FROM urls WHERE state IN ('done', 'failed')")
    last = await connection.fetchrow(
        "SELECT id, started_at, status, reason FROM runs ORDER BY id DESC LIMIT 1"
    )
    due = await one(
        "SELECT count(*) FROM urls WHERE state IN ('done', 'failed') AND next_fetch_at <= $1",
        now,
    )
    return {
        "db": name,
        "size_bytes": int(await one("SELECT pg_database_size(current_database())")),
        "schema_version": int(version),
        "urls": urls,
        "due": int(due) + urls.get("queued", 0),
        "next_due": _iso(next_due),
        "pages": int(await one("SELECT count(*) FROM pages")),
        "pages_with_text": int(await one("SELECT count(*) FROM pages WHERE text IS NOT NULL")),
        "duplicates": int(
            await one(
                "SELECT count(*) FROM pages WHERE duplicate_of IS NOT NULL "
                "OR near_duplicate_of IS NOT NULL"
            )
        ),
        "changed": int(await one("SELECT count(*) FROM pages WHERE previous_hash IS NOT NULL")),
        "by_status": by_status,
        "skipped": skipped,
        "hosts": int(await one("SELECT count(DISTINCT origin) FROM urls WHERE state <> 'skipped'")),
        "runs": int(await one("SELECT count(*) FROM runs")),
        "last_run": f"#{last[0]} {last[1]} {last[2]} ({last[3] or '-'})" if last else None,
    }


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds")
