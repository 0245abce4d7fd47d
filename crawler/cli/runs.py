"""``crawl runs DB``: the run history, one tab-separated line a run.

The last column, ``harvest``, is a focused crawl's shape (empty without a query): its
scored pages by relevance band in each quarter of the run (``crawler.report.harvest_text``):
a crawl that keeps its focus has as many ``high`` pages in its last quarter as in its first.
"""

from __future__ import annotations

import json

import click

from crawler.cli.app import EXIT_USAGE, fail
from crawler.report import harvest_text
from storage.base import StoreError
from storage.export import read_runs

COLUMNS = ("id", "started_at", "ended_at", "status", "reason", "pages_ok", "pages_failed",
           "pages_unchanged", "bytes", "harvest")  # fmt: skip


@click.command("runs")
@click.argument("db", type=click.Path(dir_okay=False))
def command(db: str) -> None:
    """Print the run history of DB: start, end, status, pages, why it stopped."""
    try:
        rows = read_runs(str(db))
    except StoreError as exc:
        fail(EXIT_USAGE, str(exc))
    click.echo("\t".join(COLUMNS))
    for *row, harvest in rows:
        row.append(_harvest(harvest))
        click.echo("\t".join("" if v is None else str(v) for v in row))


def _harvest(stored: object) -> str:
    """The stored JSON of ``runs.harvest`` as ``harvest_text``; ``""`` if none or unreadable."""
    if not isinstance(stored, str):
        return ""
    try:
        return harvest_text(json.loads(stored))
    except (ValueError, TypeError, IndexError):
        return ""
