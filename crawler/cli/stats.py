"""``crawl stats DB``: what a database holds, as aligned lines or one JSON object."""

from __future__ import annotations

import json
import time

import click

from crawler.cli.app import EXIT_USAGE, fail
from crawler.cli.format import stats_lines
from storage.base import StoreError
from storage.stats import read_stats


@click.command("stats")
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
def command(db: str, as_json: bool) -> None:
    """Summarise DB: URLs by state, pages by status, what is due, hosts, runs, size."""
    try:
        stats = read_stats(str(db), time.time())
    except StoreError as exc:
        fail(EXIT_USAGE, str(exc))
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    for line in stats_lines(stats):
        click.echo(line)
