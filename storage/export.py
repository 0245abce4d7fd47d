"""Exports of a database: JSON lines or CSV, one record per stored page, in constant memory.

Owns: reading ``pages`` and ``runs`` for output. Opens the database read-only, so an export
can run while a crawl writes. Owns too what an export must not pass on: the userinfo
(``user:password@``) of stored URLs (``parsers.links.strip_userinfo``) and,
in CSV, cells a spreadsheet would run as formulas (``neutralise_cell``).
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TextIO

from parsers.links import strip_userinfo
from storage.base import StoreError
from storage.factory import is_postgres

EXPORT_COLUMNS = (
    "url", "final_url", "status", "error", "content_type", "title", "text", "lang",
    "canonical", "meta_robots", "depth", "body_bytes", "content_hash", "fetched_at",
    "attempts", "duplicate_of", "near_duplicate_of", "score", "previous_hash", "changed_at",
    "extract",
)  # fmt: skip
FORMATS = ("jsonl", "csv")
URL_COLUMNS = ("url", "final_url", "canonical", "duplicate_of", "near_duplicate_of")
"""Columns holding URLs of stored pages: exported without userinfo."""
NUMERIC_COLUMNS = frozenset({"status", "depth", "body_bytes", "attempts", "score"})
"""Columns that are numbers: written to CSV as they are (a score of -1.5 stays -1.5)."""
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP, CSV
injection): a page's title or text could otherwise run in whoever opens the export."""


def connect_readonly(path: str) -> sqlite3.Connection:
    if not os.path.exists(path):
        raise StoreError(f"{path}: no such database")
    connection: sqlite3.Connection | None = None
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        connection.execute("SELECT 1 FROM pages LIMIT 1")
    except sqlite3.Error as exc:
        if connection is not None:
            connection.close()
        raise StoreError(f"{path}: not a crawl database ({exc})") from exc
    return connection


def neutralise_cell(value: str) -> str:
    """``value`` with a ``'`` in front if it starts with one of ``FORMULA_STARTS``, so that a
    spreadsheet shows it as text instead of evaluating it (OWASP's CSV-injection advice;
    the ``csv`` module already quotes cells holding separators, quotes or line breaks)."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


@dataclass(frozen=True, slots=True)
class ExportFilter:
    """Which pages an export writes. ``since``: ISO-8601 UTC, compared with ``fetched_at``."""

    dedup: bool = False
    """Leave out exact duplicates (``duplicate_of``) and near-duplicates."""
    since: str | None = None
    min_score: float | None = None

    @classmethod
    def parse(
        cls, *, dedup: bool = False, since: str | None = None, min_score: float | None = None
    ) -> ExportFilter:
        """From user input; ``StoreError`` naming ``--since`` if it is not a date."""
        stamp = None
        if since is not None:
            try:
                moment = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
            except ValueError:
                raise StoreError(
                    f"--since {since!r}: not an ISO-8601 date or time (e.g. 2026-11-29)"
                ) from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            stamp = moment.astimezone(UTC).isoformat(timespec="seconds")
        return cls(dedup, stamp, min_score)

    def where(self) -> tuple[str, tuple[object, ...]]:
        """A SQL ``WHERE`` clause (or ``""``) over ``pages`` and its parameters."""
        clauses: list[str] = []
        params: list[object] = []
        if self.dedup:
            clauses.append("duplicate_of IS NULL AND near_duplicate_of IS NULL")
        if self.since is not None:
            clauses.append("fetched_at >= ?")
            params.append(self.since)
        if self.min_score is not None:
            clauses.append("score >= ?")
            params.append(self.min_score)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), tuple(params)


def iter_rows(
    path: str, columns: tuple[str, ...], selection: ExportFilter = ExportFilter()
) -> Iterator[tuple[object, ...]]:
    """``columns`` of the selected pages, in the order they were first stored, streamed."""
    if is_postgres(path):
        from storage import postgres_read

        yield from postgres_read.iter_rows(path, columns, selection)
        return
    connection = connect_readonly(path)
    where, params = selection.where()
    try:
        cursor = connection.execute(
            f"SELECT {', '.join(columns)} FROM pages{where} ORDER BY id", params
        )
        while rows := cursor.fetchmany(500):
            yield from rows
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot read pages: {exc}") from exc
    finally:
        connection.close()


def iter_pages(path: str, selection: ExportFilter = ExportFilter()) -> Iterator[dict[str, object]]:
    """Every selected page as a dict of ``EXPORT_COLUMNS``, in the order first stored, with
    ``URL_COLUMNS`` stripped of userinfo (a database from an older version may hold a seed's
    ``user:password@``)."""
    for row in iter_rows(path, EXPORT_COLUMNS, selection):
        record = dict(zip(EXPORT_COLUMNS, row, strict=True))
        for column in URL_COLUMNS:
            if isinstance(value := record[column], str):
                record[column] = strip_userinfo(value)
        yield record


def export_pages(
    path: str,
    fmt: str,
    out: TextIO,
    selection: ExportFilter = ExportFilter(),
    *,
    raw_cells: bool = False,
) -> int:
    """Write the selected pages of the database at ``path`` to ``out``; returns how many.

    CSV: every text cell (a column not in ``NUMERIC_COLUMNS``) starting with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return gets a ``'`` in front (``neutralise_cell``):
    titles, text and URLs come from the sites crawled, and a spreadsheet would evaluate them
    as formulas. Numbers are written as they are. ``raw_cells`` writes text cells as stored,
    for programs that read the CSV themselves. JSON lines are written as stored either way:
    JSON has no formulas. Either format leaves out the userinfo of URLs (``iter_pages``).
    """
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format {fmt!r} (use one of {', '.join(FORMATS)})")
    count = 0
    if fmt == "jsonl":
        for record in iter_pages(path, selection):
            if isinstance(record["extract"], str):  # stored as JSON text: nest it
                record["extract"] = json.loads(record["extract"])
            out.write(json.dumps(record, ensure_ascii=False))
            out.write("\n")
            count += 1
    else:
        writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for record in iter_pages(path, selection):
            if not raw_cells:
                for column, value in record.items():
                    if isinstance(value, str) and column not in NUMERIC_COLUMNS:
                        record[column] = neutralise_cell(value)
            writer.writerow(record)
            count += 1
    return count


def read_runs(path: str) -> list[tuple[object, ...]]:
    """The run history, oldest first."""
    if is_postgres(path):
        from storage import postgres_read

        return postgres_read.read_runs(path)
    connection = connect_readonly(path)
    try:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
        unchanged = "pages_unchanged" if "pages_unchanged" in columns else "0"  # schema 1
        return connection.execute(
            "SELECT id, started_at, ended_at, status, reason, pages_ok, pages_failed, "
            f"{unchanged}, bytes "
            "FROM runs ORDER BY id"
        ).fetchall()
    finally:
        connection.close()


def read_tokens(path: str) -> list[tuple[str, str | None, bytes]]:
    """(url, title, token blob) of every page that has tokens, in storage order."""
    if is_postgres(path):
        from storage import postgres_read

        return postgres_read.read_tokens(path)
    connection = connect_readonly(path)
    try:
        return connection.execute(
            "SELECT url, title, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id"
        ).fetchall()
    finally:
        connection.close()
