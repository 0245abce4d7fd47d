"""The ``crawl`` command group: its commands, exit codes and the one way a command fails.

``crawl SEEDS [flags]`` runs the ``crawl`` subcommand (``crawler.cli.crawl``); the other
commands read a database. Each command lives in its own module, imported only when that
command runs (``COMMANDS``): ``crawl --help`` loads click and the settings, nothing heavier.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import click

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_LOCKED = 75  # EX_TEMPFAIL: another crawl holds the database; try again later
EXIT_SIGINT, EXIT_SIGTERM = 130, 143

COMMANDS = {
    "crawl": "Crawl from the URLs in SEEDS (one per line, # comments) and store pages.",
    "export": "Write one record per stored page of DB as JSON lines, CSV or WARC.",
    "rank": "Rank the stored pages of DB by BM25 relevance to --query.",
    "runs": "Print the run history of DB: start, end, status, pages, why it stopped.",
    "serve": "Serve a read-only dashboard and search of DB in the browser.",
    "stats": "Summarise DB: URLs by state, pages by status, what is due, hosts, runs.",
}
"""Each command, by the module ``crawler.cli.<name>`` that defines ``command``, and its line
in ``crawl --help``."""

EXIT_CODES = [
    ("0", "the crawl finished (pages with HTTP errors are data, not failure)"),
    ("1", "the crawl itself failed (storage error, bug)"),
    ("2", "usage or configuration error (flag, config file, seeds file)"),
    ("75", "another crawl is using the database: try again later"),
    ("130, 143", "interrupted by SIGINT / SIGTERM after a clean stop"),
]


class UsageLine(click.ClickException):
    """A usage error told as every bad input is: one line, ``crawl: error: ...``, exit 2
    (click's own is a usage block, a hint and the error, four lines)."""

    exit_code = EXIT_USAGE

    def show(self, file: object = None) -> None:
        click.echo(f"crawl: error: {self.format_message()}", err=True)


def _one_line(exc: click.UsageError) -> click.ClickException:
    """``exc`` as a ``UsageLine``; a bare ``crawl`` (click's help for no arguments) as it is."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return exc
    name = exc.ctx.command.name if exc.ctx is not None else None
    command = f"crawl {name}" if name in COMMANDS and name != "crawl" else "crawl"
    hint = f" (see {command} --help)" if "--help" not in exc.format_message() else ""
    return UsageLine(exc.format_message() + hint)


class CrawlGroup(click.Group):
    """``crawl SEEDS ...`` runs the ``crawl`` subcommand; ``crawl --help`` documents it all.
    Commands are loaded by name when they run (PEP 562's idea, for click). Usage errors are
    one line (``UsageLine``)."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise _one_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context | None, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        command: click.Command = importlib.import_module(f"crawler.cli.{name}").command
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in COMMANDS and args[0] not in ("--help", "-h", "--version"):
            args = ["crawl", *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        command = self.get_command(ctx, "crawl")
        assert command is not None
        with click.Context(command, info_name=ctx.info_name, parent=None) as sub:
            command.format_help(sub, formatter)
        self.format_commands(ctx, formatter)
        with formatter.section("Exit codes"):
            formatter.write_dl(EXIT_CODES)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(list(COMMANDS.items()))


@click.group(cls=CrawlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crawler", message="crawl %(version)s")
def main() -> None:
    """A fast, polite, crash-safe web crawler."""


def fail(code: int, message: str) -> NoReturn:
    """End the command: ``crawl: error: MESSAGE`` on standard error, exit status ``code``."""
    click.echo(f"crawl: error: {message}", err=True)
    sys.exit(code)
