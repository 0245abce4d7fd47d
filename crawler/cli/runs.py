"""``crawl runs DB``: the run history, one tab-separated line a run."""

from __future__ import annotations

import click

from crawler.cli.app import EXIT_USAGE, fail
from storage.base import StoreError
from storage.export import read_runs

COLUMNS = ("id", "started_at", "ended_at", "status", "reason", "pages_ok", "pages_failed",
           "pages_unchanged", "bytes")  # fmt: skip


@click.command("runs")
@click.argument("db", type=click.Path(dir_okay=False))
def command(db: str) -> None:
    """Print the run history of DB: start, end, status, pages, why it stopped."""
    try:
        rows = read_runs(str(db))
    except StoreError as exc:
        fail(EXIT_USAGE, str(exc))
    click.echo("\t".join(COLUMNS))
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))
