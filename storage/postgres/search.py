"""The search index's tables in a PostgreSQL crawl database (``PostgresIndexTables``; what
they hold and how a catch-up works: ``storage.segments``), for synchronous callers: asyncpg
runs on a private event loop in its own thread (``storage.postgres.read.Loop``).

Many crawl processes write one database at once, so a catch-up cannot stop them as SQLite's
``BEGIN IMMEDIATE`` does. It takes the log's rows with ``DELETE ... RETURNING`` first, in a
transaction under an advisory lock (one catch-up at a time): a crawl that writes one of
those pages meanwhile has its trigger's insert into the log wait for this transaction
(the row it conflicts with is deleted but not yet committed) and logs the page again
after it, so a change that the catch-up may not have read is indexed the next time; a page
logged after the delete is not taken, and stays logged. Nothing the catch-up holds waits
for a crawl: no deadlock.

Postings are read by byte range (``substring``; the column is stored ``EXTERNAL``,
uncompressed, so only the TOAST chunks of the range are read), all of a query's runs in one
round trip. A segment merged away by another process since ``load`` is a ``LookupError``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from storage import segments
from storage.base import StoreError
from storage.dsn import redact_dsn
from storage.postgres.driver import FAILURES, missing_table, reason
from storage.postgres.read import Loop, connect_reader
from storage.postgres.schema import migrate

if TYPE_CHECKING:
    import asyncpg

T = TypeVar("T")

INDEX_LOCK_KEY = 0x63_72_61_77_6C_69_78  # "crawlix": one catch-up at a time, across processes

_READ_RUNS = """
    SELECT r.n, substring(s.postings FROM r.first FOR r.size)
    FROM unnest($1::int[], $2::bigint[], $3::int[], $4::int[]) AS r(n, segment, first, size)
    JOIN search_segments s ON s.id = r.segment
"""


class PostgresIndexTables:
    """The index's tables of the PostgreSQL database ``dsn`` names, on one connection kept
    open (``read_only``: never written; else the schema is migrated first, as a crawl
    would)."""

    def __init__(self, dsn: str, read_only: bool = False) -> None:
        self.name = redact_dsn(dsn)
        self.writable = not read_only
        self._loop: Loop | None = Loop().__enter__()
        self._connection: asyncpg.Connection | None = None
        try:
            self._connection = self._call(connect_reader(dsn), "connect")
            if self.writable:
                self._call(migrate(self._connection), "migrate the schema")
            self._call(self._connection.fetchval("SELECT 1 FROM pages LIMIT 1"), "read pages")
        except BaseException:
            self.close()
            raise

    @property
    def connection(self) -> asyncpg.Connection:
        assert self._connection is not None, "closed"
        return self._connection

    def _call(self, coroutine: Coroutine[Any, Any, T], what: str) -> T:
        if self._loop is None:
            raise StoreError(f"{self.name}: the search index is closed")
        try:
            return self._loop.call(coroutine)
        except FAILURES.errors as exc:
            if missing_table(exc):
                raise StoreError(f"{self.name}: not a crawl database ({reason(exc)})") from exc
            raise StoreError(f"{self.name}: cannot {what}: {reason(exc)}") from exc

    def has_index(self) -> bool:
        found = self._call(self.connection.fetchval(
            "SELECT to_regclass('search_segments') IS NOT NULL"
            " AND to_regclass('search_pending') IS NOT NULL"), "read the schema")  # fmt: skip
        return bool(found)

    def pending_count(self) -> int:
        count = self._call(self.connection.fetchval("SELECT count(*) FROM search_pending"),
                           "read the index log")  # fmt: skip
        return int(count)

    def catch_up(self) -> int:
        transaction = self.connection.transaction()
        self._call(transaction.start(), "start the index's catch-up")
        try:
            self._call(self.connection.execute("SELECT pg_advisory_xact_lock($1)",
                                               INDEX_LOCK_KEY), "lock the index")  # fmt: skip
            done = segments.catch_up(_Writer(self))
            self._call(transaction.commit(), "commit the index")
        except BaseException:
            with contextlib.suppress(*FAILURES.close, StoreError):
                self._call(transaction.rollback(), "roll back")
            raise
        return done

    def load(self) -> list[segments.Segment]:
        rows = self._call(self.connection.fetch(
            "SELECT id, docs, lengths, removed, terms, df, starts FROM search_segments"
            " ORDER BY id"), "read the index")  # fmt: skip
        return [segments.segment_of(row) for row in rows]

    def read(self, ranges: list[tuple[int, int, int]]) -> list[bytes]:
        wanted = [(n, *r) for n, r in enumerate(ranges) if r[2] > r[1]]
        out = [b""] * len(ranges)
        if not wanted:
            return out
        rows = self._call(self.connection.fetch(
            _READ_RUNS, [w[0] for w in wanted], [w[1] for w in wanted],
            [w[2] + 1 for w in wanted], [w[3] - w[2] for w in wanted]), "read postings")  # fmt: skip
        if len(rows) != len(wanted):
            raise LookupError(f"{self.name}: a search segment is gone (merged since loaded)")
        for n, data in rows:
            out[n] = data
        return out

    def token_rows(self) -> list[segments.TokenRow]:
        rows = self._call(self.connection.fetch(
            "SELECT id, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id"),
            "read pages.tokens")  # fmt: skip
        return [(int(page_id), bytes(blob)) for page_id, blob in rows]

    def titles_urls(self, page_ids: list[int]) -> dict[int, tuple[str, str | None]]:
        rows = self._call(self.connection.fetch(
            "SELECT id, url, title FROM pages WHERE id = ANY($1::bigint[])", page_ids),
            "read pages")  # fmt: skip
        return {int(page_id): (url, title) for page_id, url, title in rows}

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(*FAILURES.close, StoreError):
                self._call(asyncio.wait_for(connection.close(), 5), "close")
            connection.terminate()
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.__exit__(None, None, None)


class _Writer:
    """``segments.Writer`` inside the catch-up's transaction (see the module's docstring)."""

    def __init__(self, tables: PostgresIndexTables) -> None:
        self._tables = tables
        self._connection = tables.connection

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._tables._call(coroutine, "bring the search index up to date")

    def take_pending(self) -> list[int]:
        rows = self._call(self._connection.fetch("DELETE FROM search_pending RETURNING page_id"))
        return sorted(int(row[0]) for row in rows)

    def counts(self) -> tuple[int, int]:
        row = self._call(self._connection.fetchrow(
            "SELECT (SELECT count(*) FROM search_segments),"
            " (SELECT count(*) FROM pages WHERE tokens IS NOT NULL)"))  # fmt: skip
        assert row is not None
        return int(row[0]), int(row[1])

    def clear_segments(self) -> None:
        self._call(self._connection.execute("DELETE FROM search_segments"))

    def rows_of(self, page_ids: list[int]) -> list[segments.TokenRow]:
        rows = self._call(self._connection.fetch(
            "SELECT id, tokens FROM pages WHERE id = ANY($1::bigint[]) AND tokens IS NOT NULL"
            " ORDER BY id", page_ids))  # fmt: skip
        return [(int(page_id), bytes(blob)) for page_id, blob in rows]

    def all_rows(self) -> _Rows:
        async def opened() -> Any:  # a CursorFactory is awaitable, not a coroutine
            return await self._connection.cursor(
                "SELECT id, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id")  # fmt: skip

        return _Rows(self, self._call(opened()))

    def insert(self, columns: segments.Columns) -> None:
        values = [bytes(c) if isinstance(c, memoryview) else c for c in columns]
        self._call(self._connection.execute(
            f"INSERT INTO search_segments ({segments.COLUMNS})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", *values))  # fmt: skip

    def clear_pending(self) -> None:
        """Nothing: ``take_pending`` deleted them."""


class _Rows:
    """A server-side cursor, fetched from the calling thread."""

    def __init__(self, writer: _Writer, cursor: Any) -> None:
        self._writer, self._cursor = writer, cursor

    def fetchmany(self, size: int) -> list[segments.TokenRow]:
        rows = self._writer._call(self._cursor.fetch(size))
        return [(int(page_id), bytes(blob)) for page_id, blob in rows]
