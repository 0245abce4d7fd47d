"""The PostgreSQL driver, asyncpg, as the store and the reader use it.

Owns: every runtime use of the asyncpg module (pools, connections, the exception classes
that mean the database failed) and how an error reads in a message. Invariant: asyncpg is
imported on first use, never when a module of ``storage.postgres`` is imported:
``storage.factory`` imports the PostgreSQL store and reader to offer them, and a SQLite
crawl must not pay for loading the driver. Elsewhere asyncpg is named in annotations only
(under ``TYPE_CHECKING``).
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncpg

CONNECT_TIMEOUT_S = 10.0

Errors = tuple[type[BaseException], ...]


class _Failures:
    """The exception classes of a failed database operation, as ``except`` clauses name them
    (``except FAILURES.errors``). Each tuple is built on first use, which imports asyncpg; an
    ``except`` clause is evaluated only when an exception reaches it, and every exception
    these clauses catch comes from code that has loaded asyncpg already."""

    @functools.cached_property
    def errors(self) -> Errors:
        """The database, or the connection to it, failed."""
        import asyncpg

        return (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)

    @functools.cached_property
    def connect(self) -> Errors:
        """Connecting failed (a malformed DSN included)."""
        return (*self.errors, ValueError)

    @functools.cached_property
    def close(self) -> Errors:
        """Closing failed or was cancelled: the connection is terminated instead."""
        return (*self.errors, asyncio.CancelledError)

    @functools.cached_property
    def retry(self) -> Errors:
        """A deadlock or a serialisation failure: the transaction may be run again."""
        import asyncpg

        return (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)


FAILURES = _Failures()


def missing_table(exc: BaseException) -> bool:
    """Whether ``exc`` says a table does not exist (the database is not a crawl database)."""
    import asyncpg

    return isinstance(exc, asyncpg.exceptions.UndefinedTableError)


async def create_pool(dsn: str, **options: Any) -> asyncpg.Pool:
    """``asyncpg.create_pool(dsn, **options)``, opened."""
    import asyncpg

    return await asyncpg.create_pool(dsn, **options)


async def connect(dsn: str, **options: Any) -> asyncpg.Connection:
    """``asyncpg.connect(dsn, **options)``."""
    import asyncpg

    return await asyncpg.connect(dsn, **options)


def reason(exc: BaseException) -> str:
    """An exception as a short message (some asyncpg and OS errors have an empty str)."""
    return str(exc).strip() or type(exc).__name__
