"""``crawl SEEDS [flags]``: the command's interface; ``crawler.cli.runner`` runs it.

Flags are ``Settings`` fields (``crawler.cli.options``), plus ``--config``, a TOML file of the
same keys, which given flags override. Defined apart from the run so that ``crawl --help``
loads click and the settings only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from crawler.cli.options import setting_options


@click.command("crawl", context_settings={"show_default": False})
@click.argument("seeds", type=click.Path(dir_okay=False, path_type=Path))
@setting_options
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML file with the same keys as these flags; flags win.")  # fmt: skip
def command(seeds: Path, config_file: Path | None, **flags: Any) -> None:
    """Crawl from the URLs in SEEDS (one per line, # comments) and store pages in --db."""
    # The engine, its HTTP client and parsers: loaded only for a crawl, not for --help.
    from crawler.cli.runner import run_command

    run_command(seeds, config_file, flags)
