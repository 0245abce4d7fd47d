"""PostgreSQL, the shared frontier of many processes: ``PostgresStore`` (a crawl's store,
shared by every run on the database) and ``PostgresReader`` (read-only access for exports
and reports).

Modules: ``store`` (the pool, transactions, host leases), ``sql`` (its statements),
``schema`` (the migrations and applying them), ``read`` (the read side), ``driver``
(asyncpg, loaded on first use: importing this package loads no driver).
"""

from storage.postgres.read import PostgresReader
from storage.postgres.store import PostgresStore

__all__ = ["PostgresReader", "PostgresStore"]
