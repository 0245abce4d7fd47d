"""The search index's tables for a ``--db`` value (``open_index_tables``): a SQLite file's
or a PostgreSQL database's, the same ``storage.segments.IndexTables`` either way. Kept apart
from ``storage.factory``: this loads numpy and the numba kernels, which a crawl never does.
"""

from __future__ import annotations

from storage.dsn import is_postgres
from storage.postgres.search import PostgresIndexTables
from storage.segments import IndexTables
from storage.sqlite.search import SQLiteIndexTables


def open_index_tables(db: str, read_only: bool = False) -> IndexTables:
    """The index's tables of the database ``db`` names, open (``StoreError`` if it cannot
    be reached or is not a crawl database); ``read_only``: never written."""
    if is_postgres(db):
        return PostgresIndexTables(db, read_only)
    return SQLiteIndexTables(db, read_only)
