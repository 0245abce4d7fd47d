"""Choosing the store for a ``--db`` value: a SQLite file, or a PostgreSQL DSN.

Owns: the mapping from the user's ``--db`` string to a ``Store``. PostgreSQL support
(asyncpg) is imported only when a DSN is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from storage.base import Store

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(db: str) -> bool:
    """Whether ``db`` names a PostgreSQL database (a ``postgresql://`` DSN)."""
    return db.startswith(_SCHEMES)


def make_store(db: str, *, lease_ttl_s: float = 30.0) -> Store:
    """The store ``db`` names; ``lease_ttl_s`` is for shared (PostgreSQL) frontiers."""
    if is_postgres(db):
        from storage.postgres import PostgresStore

        return PostgresStore(db, lease_ttl_s=lease_ttl_s)
    return SQLiteStore(db)
