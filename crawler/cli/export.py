"""``crawl export DB``: one record per stored page, as JSON lines, CSV or WARC."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import click

from crawler.cli.app import EXIT_FAILED, EXIT_USAGE, fail
from storage.base import StoreError
from storage.export import ExportFilter, export_pages
from storage.warc import export_warc


@click.command("export")
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "warc"]), default="jsonl",
              show_default=True, help="Output format (warc: WARC 1.1, gzip per record; needs "
              "a crawl with --store-body).")  # fmt: skip
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here instead of standard output.")  # fmt: skip
@click.option("--dedup", is_flag=True, help="Leave out duplicates and near-duplicates.")
@click.option("--since", help="Only pages fetched at or after this date/time (ISO-8601, "
              "e.g. 2026-11-29 or 2026-11-29T12:00:00Z).")  # fmt: skip
@click.option("--min-score", type=float, help="Only pages scored at least this (--query).")
@click.option("--raw-cells", is_flag=True, help="CSV: write text cells as stored, without "
              "the ' put before those starting with = + - @ tab or CR (spreadsheet formulas).")  # fmt: skip
def command(
    db: str,
    fmt: str,
    output: Path | None,
    dedup: bool,
    since: str | None,
    min_score: float | None,
    raw_cells: bool,
) -> None:
    """Write one record per stored page of DB as JSON lines, CSV or WARC.

    CSV text cells that a spreadsheet would run as a formula get a ' in front unless
    --raw-cells; URLs are written without user:password@, and WARC request records
    without Authorization, Proxy-Authorization and Cookie headers.
    """
    try:
        if min_score is not None and not math.isfinite(min_score):
            fail(EXIT_USAGE, f"--min-score must be a finite number, got {min_score}")
        selection = ExportFilter.parse(dedup=dedup, since=since, min_score=min_score)
        if fmt == "warc":
            if output is None:
                count = export_warc(str(db), sys.stdout.buffer, selection)
            else:
                with open(output, "wb") as binary:
                    count = export_warc(str(db), binary, selection)
        elif output is None:
            count = export_pages(str(db), fmt, sys.stdout, selection, raw_cells=raw_cells)
        else:
            with open(output, "w", encoding="utf-8", newline="") as handle:
                count = export_pages(str(db), fmt, handle, selection, raw_cells=raw_cells)
    except StoreError as exc:
        if output is not None and output.exists() and output.stat().st_size == 0:
            output.unlink()  # opened before the export found it had nothing to write
        fail(EXIT_USAGE, str(exc))
    except BrokenPipeError:
        # the reader went away (``crawl export db | head``): stop quietly, like other tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_FAILED)
    except OSError as exc:
        fail(EXIT_USAGE, f"{output}: {exc.strerror}")
    click.echo(f"exported {count} pages", err=True)
