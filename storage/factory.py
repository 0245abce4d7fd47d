"""Choosing the store for a ``--db`` value: a SQLite file, or a PostgreSQL DSN.

Owns: the mapping from the user's ``--db`` string to a ``Store``. PostgreSQL support
(asyncpg) is imported only when a DSN is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

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


def redact_dsn(dsn: str) -> str:
    """The DSN without its password (in the authority or as a ``password=`` parameter);
    anything else (a SQLite path) unchanged."""
    if not is_postgres(dsn):
        return dsn
    try:
        parts = urlsplit(dsn)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}@{hostport}" if user else hostport
        query = parts.query
        if query:
            pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
                     if k.lower() != "password"]  # fmt: skip
            query = urlencode(pairs)
        return parts._replace(netloc=netloc, query=query).geturl()
    except ValueError:
        return dsn.split("@")[-1]
