"""Exports of a database: JSON lines or CSV, one record per stored page, in constant memory;
and the run history and token lists other commands read (``crawl runs``, ``rank``).

Owns: the export formats and what an export must not pass on: the userinfo
(``user:password@``) of stored URLs (``parsers.links.strip_userinfo``) and, in CSV, cells a
spreadsheet would run as formulas (``neutralise_cell``). Reads through the database's
``Reader`` (``storage.factory.open_reader``): read-only, so an export can run while a crawl
writes. Re-exports ``ExportFilter`` (``storage.base``) and ``connect_readonly``
(``storage.sqlite.read``), which callers import from here.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import TextIO

from parsers.links import strip_userinfo
from storage.base import ExportFilter, StoreError
from storage.factory import open_reader
from storage.sqlite.read import connect_readonly

__all__ = [
    "EXPORT_COLUMNS",
    "FORMATS",
    "FORMULA_STARTS",
    "NUMERIC_COLUMNS",
    "URL_COLUMNS",
    "ExportFilter",
    "connect_readonly",
    "export_pages",
    "iter_pages",
    "iter_rows",
    "neutralise_cell",
    "read_runs",
    "read_tokens",
]

EXPORT_COLUMNS = (
    "url", "final_url", "status", "error", "content_type", "title", "text", "lang",
    "canonical", "meta_robots", "depth", "body_bytes", "content_hash", "fetched_at",
    "attempts", "duplicate_of", "near_duplicate_of", "score", "previous_hash", "changed_at",
    "extract",
)  # fmt: skip
FORMATS = ("jsonl", "csv")
_ALL = ExportFilter()
"""The default selection: every page."""
URL_COLUMNS = ("url", "final_url", "canonical", "duplicate_of", "near_duplicate_of")
"""Columns holding URLs of stored pages: exported without userinfo."""
NUMERIC_COLUMNS = frozenset({"status", "depth", "body_bytes", "attempts", "score"})
"""Columns that are numbers: written to CSV as they are (a score of -1.5 stays -1.5)."""
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP, CSV
injection): a page's title or text could otherwise run in whoever opens the export."""


def neutralise_cell(value: str) -> str:
    """``value`` with a ``'`` in front if it starts with one of ``FORMULA_STARTS``, so that a
    spreadsheet shows it as text instead of evaluating it (OWASP's CSV-injection advice;
    the ``csv`` module already quotes cells holding separators, quotes or line breaks)."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def iter_rows(
    path: str, columns: tuple[str, ...], selection: ExportFilter = _ALL
) -> Iterator[tuple[object, ...]]:
    """``columns`` of the selected pages, in the order they were first stored, streamed."""
    return open_reader(path).iter_rows(columns, selection)


def iter_pages(path: str, selection: ExportFilter = _ALL) -> Iterator[dict[str, object]]:
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
    selection: ExportFilter = _ALL,
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
    return open_reader(path).read_runs()


def read_tokens(path: str) -> list[tuple[str, str | None, bytes]]:
    """(url, title, token blob) of every page that has tokens, in storage order."""
    return open_reader(path).read_tokens()
