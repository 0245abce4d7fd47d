"""``crawl stats``: a summary of a crawl database, read-only (safe while a crawl runs).

Owns: the entry point of ``crawl stats``; the aggregate queries are the database's
``Reader``'s (``storage.sqlite.read``, ``storage.postgres.read``), which give one shape:
``db`` (its name, no password), ``size_bytes``, ``schema_version``, ``urls`` (count by
state), ``due`` (queued, or due for a recrawl at ``now``), ``next_due`` (ISO-8601 or
``None``), ``pages``, ``pages_with_text``, ``duplicates``, ``changed``, ``by_status``
(count by HTTP status, ``"none"`` for no response), ``skipped`` (count by reason, most
first), ``hosts``, ``runs`` and ``last_run`` (one line, or ``None``).
"""

from __future__ import annotations

from storage.factory import open_reader


def read_stats(path: str, now: float) -> dict[str, object]:
    """Counts by URL state and HTTP status, what is due at ``now``, hosts, runs, size."""
    return open_reader(path).read_stats(now)
