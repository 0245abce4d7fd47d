"""Persistence: the ``Store`` a crawl writes through, the ``Reader`` exports and reports read
through, their SQLite and PostgreSQL implementations, migrations and exports.

Layers, each importing only those below it:
  base, dsn, schema          contracts and records; ``--db`` strings; shared schema bits
  sqlite/, postgres/         the two implementations (store, statements, migrations, read)
  factory                    ``--db`` -> ``Store`` (``make_store``) or ``Reader`` (``open_reader``)
  export, warc, stats        what the CLI reads out of a database, through a ``Reader``

Of the rest of the project it imports only ``parsers.links`` (URL helpers); never the
crawler (whose ``StorageError`` wraps ``StoreError`` at the crawler's boundary).
"""

import parsers  # noqa: F401  (its dataclass memo: ``parsers.dataclass_cache``)
