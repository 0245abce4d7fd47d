"""``crawl rank DB --query Q``: the stored pages of DB by BM25 relevance, no re-parsing."""

from __future__ import annotations

import click

from crawler.cli.app import EXIT_USAGE, fail
from crawler.errors import ConfigError
from crawler.relevance.ranking import CorpusIndex
from crawler.settings import DEVICES
from storage.base import StoreError


@click.command("rank")
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("--query", "queries", multiple=True, required=True,
              help="Text to rank pages against (repeatable: the corpus is loaded once).")  # fmt: skip
@click.option("--top", type=int, default=10, show_default=True, help="Results per query.")
@click.option("--device", type=click.Choice(DEVICES), default="auto", show_default=True,
              help="Where the BM25 kernel runs.")  # fmt: skip
def command(db: str, queries: tuple[str, ...], top: int, device: str) -> None:
    """Rank the stored pages of DB by BM25 relevance to --query (no re-parsing)."""
    if top < 0:
        fail(EXIT_USAGE, f"--top must be ≥ 0, got {top}")
    for query in queries:
        if not query.strip():
            fail(EXIT_USAGE, "--query must not be empty")
    try:
        index = CorpusIndex(str(db), device)
    except (StoreError, ConfigError) as exc:
        fail(EXIT_USAGE, str(exc))
    with index:
        click.echo(f"ranking {index.pages} pages on {index.device}", err=True)
        for query, found in zip(queries, index.rank_many(list(queries), top), strict=True):
            if len(queries) > 1:
                click.echo(f"# {query}")
            for position, page in enumerate(found, start=1):
                click.echo(f"{position}\t{page.score:.4f}\t{page.url}\t{page.title or ''}")
