"""Opening a SQLite crawl database for writing: its connection settings and its schema
migrations, in plain ``sqlite3`` calls.

The store runs ``prepare`` in its connection's thread as one call, not one thread hop per
statement: a new database's schema is some forty statements, each hop a round trip between
the event loop's thread and the connection's. The search index's writer (``search``) runs
``migrate`` in its own thread.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from storage.base import StoreRefused
from storage.schema import LATEST_VERSION, MIGRATIONS_TABLE, pending, split_statements

STORE_PRAGMAS = (
    # 16 KiB pages for a new database (no effect on an existing one): a page's ~20 KB of
    # text spans 2 pages instead of 6, which cuts SQLite's CPU for writing pages, for a
    # slightly larger file (bench/RESULTS.md).
    "PRAGMA page_size=16384",
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=10000",
    # 8 MiB of page cache (default 2 MiB): the urls table's unique index takes random
    # inserts; with millions of URLs a small cache turns each into a read. The size trades
    # a little speed for memory (bench/memory_bench.py, 1 M URLs).
    "PRAGMA cache_size=-8192",
    "PRAGMA foreign_keys=ON",
    # Statement journals in memory: a multi-row upsert inside a transaction keeps one (the
    # rows before it, should a constraint abort it), which SQLite spills to a temp file past
    # 64 KiB: with 16 KiB pages, most batches would write to a deleted temp file (strace
    # shows it), none with this.
    "PRAGMA temp_store=MEMORY",
)
"""The crawl store's connection settings, in the order they must be set (the page size
before WAL, which fixes it)."""


def prepare(connection: sqlite3.Connection, path: str) -> None:
    """The store's connection set up (``STORE_PRAGMAS``) and its database migrated to the
    latest schema (``migrate``)."""
    for pragma in STORE_PRAGMAS:
        connection.execute(pragma)
    migrate(connection, path)


def migrate(connection: sqlite3.Connection, path: str, *, new_too: bool = True) -> None:
    """Bring the database to the latest schema, one transaction per migration with its
    ``schema_migrations`` row; ``StoreRefused`` for a database of a newer crawler. A
    database with no migration applied is left as it is unless ``new_too``."""
    connection.execute(MIGRATIONS_TABLE)
    applied = {row[0] for row in connection.execute("SELECT version FROM schema_migrations")}
    if not applied and not new_too:
        return
    if applied and max(applied) > LATEST_VERSION:
        raise StoreRefused(
            f"{path}: database schema version {max(applied)} is newer than this crawler "
            f"({LATEST_VERSION}); upgrade the crawler"
        )
    for migration in pending(applied):
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in split_statements(migration.sql):
                connection.execute(statement)
            connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
