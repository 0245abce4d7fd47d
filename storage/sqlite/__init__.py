"""SQLite, the embedded default: ``SQLiteStore`` (the crawl's store, one writer) and
``SQLiteReader`` (read-only access for exports and reports).

Modules: ``store`` (the connection and its transactions), ``sql`` (the statements a batch is
written with), ``read`` (the read side). The schema is ``storage.schema``'s reference one.
"""

from storage.sqlite.read import SQLiteReader, connect_readonly, read_only_uri
from storage.sqlite.store import SQLiteStore

__all__ = ["SQLiteReader", "SQLiteStore", "connect_readonly", "read_only_uri"]
