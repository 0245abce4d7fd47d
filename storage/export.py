"""Exports of a database: JSON lines or CSV, one record per stored page, in constant memory.

Owns: reading ``pages`` and ``runs`` for output. Opens the database read-only, so an export
can run while a crawl writes.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from collections.abc import Iterator
from typing import TextIO

from storage.base import StoreError

EXPORT_COLUMNS = (
    "url", "final_url", "status", "error", "content_type", "title", "text", "lang",
    "canonical", "meta_robots", "depth", "body_bytes", "content_hash", "fetched_at",
    "attempts", "duplicate_of", "near_duplicate_of", "score",
)  # fmt: skip
FORMATS = ("jsonl", "csv")


def connect_readonly(path: str) -> sqlite3.Connection:
    if not os.path.exists(path):
        raise StoreError(f"{path}: no such database")
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        connection.execute("SELECT 1 FROM pages LIMIT 1")
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: not a crawl database ({exc})") from exc
    return connection


def iter_pages(path: str, dedup: bool = False) -> Iterator[dict[str, object]]:
    """Every stored page as a dict of ``EXPORT_COLUMNS``, in the order they were first stored.

    ``dedup`` leaves out exact duplicates (``duplicate_of``) and near-duplicates.
    """
    connection = connect_readonly(path)
    where = " WHERE duplicate_of IS NULL AND near_duplicate_of IS NULL" if dedup else ""
    try:
        cursor = connection.execute(
            f"SELECT {', '.join(EXPORT_COLUMNS)} FROM pages{where} ORDER BY id"
        )
        while rows := cursor.fetchmany(500):
            for row in rows:
                yield dict(zip(EXPORT_COLUMNS, row, strict=True))
    finally:
        connection.close()


def export_pages(path: str, fmt: str, out: TextIO, dedup: bool = False) -> int:
    """Write every page of the database at ``path`` to ``out``; returns how many."""
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format {fmt!r} (use one of {', '.join(FORMATS)})")
    count = 0
    if fmt == "jsonl":
        for record in iter_pages(path, dedup):
            out.write(json.dumps(record, ensure_ascii=False))
            out.write("\n")
            count += 1
    else:
        writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for record in iter_pages(path, dedup):
            writer.writerow(record)
            count += 1
    return count


def read_runs(path: str) -> list[tuple[object, ...]]:
    """The run history, oldest first."""
    connection = connect_readonly(path)
    try:
        return connection.execute(
            "SELECT id, started_at, ended_at, status, reason, pages_ok, pages_failed, "
            "pages_unchanged, bytes "
            "FROM runs ORDER BY id"
        ).fetchall()
    finally:
        connection.close()


def read_tokens(path: str) -> list[tuple[str, str | None, bytes]]:
    """(url, title, token blob) of every page that has tokens, in storage order."""
    connection = connect_readonly(path)
    try:
        return connection.execute(
            "SELECT url, title, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id"
        ).fetchall()
    finally:
        connection.close()
