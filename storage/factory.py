"""Choosing the store, or the reader, for a ``--db`` value: a SQLite file, or a PostgreSQL DSN.

Owns: the mapping from the user's ``--db`` string to a ``Store`` (``make_store``) and to a
``Reader`` (``open_reader``), so that no other module asks which kind of database it has.
Invariant: importing this module loads no PostgreSQL driver; asyncpg is loaded when a
PostgreSQL store or reader first connects (``storage.postgres.driver``).
Re-exports ``is_postgres`` and ``redact_dsn`` (``storage.dsn``), which the crawler imports
from here.
"""

from __future__ import annotations

from storage.base import Reader, Store
from storage.dsn import is_postgres, redact_dsn
from storage.postgres import PostgresReader, PostgresStore
from storage.sqlite import SQLiteReader, SQLiteStore

__all__ = ["is_postgres", "make_store", "open_reader", "redact_dsn"]


def make_store(db: str, *, lease_ttl_s: float = 30.0) -> Store:
    """The store ``db`` names; ``lease_ttl_s`` is for shared (PostgreSQL) frontiers."""
    if is_postgres(db):
        return PostgresStore(db, lease_ttl_s=lease_ttl_s)
    return SQLiteStore(db)


def open_reader(db: str) -> Reader:
    """The read-only side of the database ``db`` names. Opens nothing yet: each of the
    reader's calls connects and closes (``storage.base.Reader``)."""
    if is_postgres(db):
        return PostgresReader(db)
    return SQLiteReader(db)
