"""``crawl stats``: a summary of a crawl database, read-only (safe while a crawl runs).

Owns: the aggregate queries over ``urls``, ``pages`` and ``runs``.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime

from storage.base import StoreError
from storage.export import connect_readonly
from storage.factory import is_postgres


def read_stats(path: str, now: float) -> dict[str, object]:
    """Counts by URL state and HTTP status, what is due at ``now``, hosts, runs, size."""
    if is_postgres(path):
        from storage import postgres_read

        return postgres_read.read_stats(path, now)
    connection = connect_readonly(path)
    try:

        def one(sql: str, *args: object) -> int:
            return connection.execute(sql, args).fetchone()[0]  # type: ignore[no-any-return]

        version = one("SELECT max(version) FROM schema_migrations")
        if version < 2:
            raise StoreError(f"{path}: schema version {version}: run a crawl on it to upgrade")
        urls = dict(connection.execute("SELECT state, count(*) FROM urls GROUP BY state"))
        by_status = {
            ("none" if status is None else str(status)): count
            for status, count in connection.execute(
                "SELECT status, count(*) FROM pages GROUP BY status ORDER BY status"
            )
        }
        skipped = dict(
            connection.execute(
                "SELECT reason, count(*) FROM urls WHERE state = 'skipped' GROUP BY reason "
                "ORDER BY count(*) DESC"
            )
        )
        next_due = one("SELECT min(next_fetch_at) FROM urls WHERE state IN ('done', 'failed')")
        last = connection.execute(
            "SELECT id, started_at, status, reason FROM runs ORDER BY id DESC LIMIT 1"
        ).fetchone()
        return {
            "db": path,
            "size_bytes": _size(path),
            "schema_version": version,
            "urls": urls,
            "due": one(
                "SELECT count(*) FROM urls WHERE state IN ('done', 'failed') "
                "AND next_fetch_at <= ?",
                now,
            )
            + urls.get("queued", 0),
            "next_due": _iso(next_due),
            "pages": one("SELECT count(*) FROM pages"),
            "pages_with_text": one("SELECT count(*) FROM pages WHERE text IS NOT NULL"),
            "duplicates": one(
                "SELECT count(*) FROM pages WHERE duplicate_of IS NOT NULL "
                "OR near_duplicate_of IS NOT NULL"
            ),
            "changed": one("SELECT count(*) FROM pages WHERE previous_hash IS NOT NULL"),
            "by_status": by_status,
            "skipped": skipped,
            "hosts": one("SELECT count(DISTINCT origin) FROM urls WHERE state != 'skipped'"),
            "runs": one("SELECT count(*) FROM runs"),
            "last_run": f"#{last[0]} {last[1]} {last[2]} ({last[3] or '-'})" if last else None,
        }
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot read statistics: {exc}") from exc
    finally:
        connection.close()


def _size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="seconds")
