"""The ``crawl`` command: a thin skin over the library (``crawler.crawl``) and the store.

``crawl SEEDS [flags]`` crawls; ``crawl export DB``, ``crawl runs DB`` read a database.
Exit codes: 0 the crawl finished (HTTP errors are data), 1 the crawl failed (storage
error, bug), 2 usage or configuration error, 130/143 interrupted by SIGINT/SIGTERM.
Heavy modules (the engine, its HTTP client) are imported only when a command runs, so that
``crawl --help`` is fast.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crawler.errors import ConfigError, CrawlerError, StorageError
from crawler.settings import SCOPES, Settings

if TYPE_CHECKING:
    from crawler.report import CrawlReport

log = logging.getLogger("crawler")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
EXIT_LOCKED = 75  # EX_TEMPFAIL: another crawl holds the database; try again later
_DEFAULTS = Settings()


class _CrawlGroup(click.Group):
    """``crawl SEEDS ...`` runs the ``crawl`` subcommand; ``crawl --help`` documents it all."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["crawl", *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        command = self.commands["crawl"]
        with click.Context(command, info_name=ctx.info_name, parent=None) as sub:
            command.format_help(sub, formatter)
        self.format_commands(ctx, formatter)
        with formatter.section("Exit codes"):
            formatter.write_dl(
                [
                    ("0", "the crawl finished (pages with HTTP errors are data, not failure)"),
                    ("1", "the crawl itself failed (storage error, bug)"),
                    ("2", "usage or configuration error (flag, config file, seeds file)"),
                    ("75", "another crawl is using the database: try again later"),
                    ("130, 143", "interrupted by SIGINT / SIGTERM after a clean stop"),
                ]
            )


@click.group(cls=_CrawlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crawler", message="crawl %(version)s")
def main() -> None:
    """A fast, polite, crash-safe web crawler."""


def _help(text: str, default: Any = None) -> str:
    return f"{text} [default: {default}]" if default is not None else text


@main.command("crawl", context_settings={"show_default": False})
@click.argument("seeds", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--db", help=_help("SQLite file to store pages in.", _DEFAULTS.db))
@click.option("--max-pages", type=int, help="Stop after fetching this many pages.")
@click.option("--max-depth", type=int, help="Follow links at most this deep (seeds are 0).")
@click.option("--max-time", help="End the run cleanly after this long (90s, 50m, 1h30m).")
@click.option("--every", help="Run again and again, one run starting every this long (1h, "
              "30m), re-reading SEEDS each time: a schedule for hosts without cron.")  # fmt: skip
@click.option("--recrawl-after", help=_help("A fetched page is due again after this long; "
              "a later run refetches it with a conditional GET.", "1d"))  # fmt: skip
@click.option("--max-interval", help=_help("Longest recrawl interval an unchanged page grows "
              "to; pages fetched longer ago are due (0: all due now).", "30d"))  # fmt: skip
@click.option("--store-body", is_flag=True, default=None, help="Keep raw bodies (compressed) "
              "and headers, for `crawl export --format warc`.")  # fmt: skip
@click.option("--concurrency", type=int, help=_help("Requests in flight, all hosts.", 16))
@click.option("--per-host", type=int, help=_help("Requests in flight per host.", 2))
@click.option("--delay", type=float, help=_help("Seconds between request starts per host.", 1.0))
@click.option("--scope", type=click.Choice(SCOPES), help=_help("What to follow: the seeds' "
              "hosts, their domains (subdomains too), or anything.", "host"))  # fmt: skip
@click.option(
    "--include", multiple=True, help="Regex a URL must match to be followed (repeatable)."
)
@click.option("--exclude", multiple=True, help="Regex of URLs not to follow (repeatable).")
@click.option("--user-agent", help=_help("User-Agent header and robots.txt agent.",
              _DEFAULTS.user_agent))  # fmt: skip
@click.option("--workers", type=int, help="Parse processes [default: number of CPUs].")
@click.option("--ignore-robots", is_flag=True, default=None, help="Do not obey robots.txt "
              "(only for sites you own).")  # fmt: skip
@click.option("--no-sitemaps", is_flag=True, default=None, help="Do not read sitemaps "
              "(robots.txt Sitemap: lines, else /sitemap.xml).")  # fmt: skip
@click.option(
    "--max-crawl-delay", type=float, help=_help("Cap on robots.txt Crawl-delay (s).", 30.0)
)
@click.option("--max-delay", type=float, help=_help("Most seconds between request starts to a "
              "slow or failing host.", 60.0))  # fmt: skip
@click.option("--retries", type=int, help=_help("Retries after a timeout, connection error or "
              "408/429/500/502/503/504.", 2))  # fmt: skip
@click.option("--allow-private", is_flag=True, default=None, help="Allow private, loopback and "
              "link-local addresses beyond the seeds' hosts (SSRF guard off).")  # fmt: skip
@click.option("--max-pages-per-host", type=int, help="Fetch at most this many pages per host.")
@click.option("--max-outlinks", type=int, help=_help("Outlinks kept per page.", 10_000))
@click.option("--max-url-length", type=int, help=_help("Longer URLs are skipped as traps.", 2048))
@click.option("--template-budget", type=int, help=_help("Pages of one URL template (numbers as "
              "N) that may repeat earlier ones before links among them are not followed "
              "(endless calendars); 0: no limit.", 12))  # fmt: skip
@click.option("--query", help="Score every page against this text (BM25) and crawl "
              "best-first: links of relevant pages, and links whose anchor text has query "
              "words, go first.")  # fmt: skip
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), help=_help(
              "Where scoring runs (auto: a CUDA GPU when present).", "auto"))  # fmt: skip
@click.option("--timeout", type=float, help=_help("Seconds a whole request may take.", 60.0))
@click.option("--connect-timeout", type=float, help=_help("Seconds to connect.", 10.0))
@click.option("--max-redirects", type=int, help=_help("Redirect hops followed per URL.", 20))
@click.option("--parse-timeout", type=float, help=_help("Seconds a page's parse may take; "
              "a longer one is abandoned (error parse-timeout).", 5.0))  # fmt: skip
@click.option("--max-body-bytes", type=int, help=_help("Largest (decompressed) body read.",
              _DEFAULTS.max_body_bytes))  # fmt: skip
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML file with the same keys as these flags; flags win.")  # fmt: skip
@click.option("--quiet", "-q", is_flag=True, default=None, help="Only warnings and errors.")
@click.option("--verbose", "-v", is_flag=True, default=None, help="Log every request.")
@click.option("--no-progress", is_flag=True, default=None, help="No progress bar.")
@click.option("--log-file", help="Append the log here instead of standard error.")
@click.option("--stats-json", help="Write the final report to this file as JSON.")
@click.option("--metrics-port", type=int, help="Serve Prometheus metrics on this port "
              "(http://127.0.0.1:PORT/metrics) while crawling.")  # fmt: skip
@click.option("--metrics-host", help=_help("Address for --metrics-port.", "127.0.0.1"))
@click.option("--lease-ttl", type=float, help=_help("PostgreSQL: seconds a process holds a "
              "host without renewing; a dead process's hosts move on after this.", 30.0))  # fmt: skip
@click.option("--log-format", type=click.Choice(["text", "json"]), help=_help(
              "Log lines as text or as JSON objects.", "text"))  # fmt: skip
def crawl_command(seeds: Path, config_file: Path | None, **flags: Any) -> None:
    """Crawl from the URLs in SEEDS (one per line, # comments) and store pages in --db."""
    try:
        settings = _settings(config_file, flags)
        from crawler.seeds import read_seeds

        seed_urls = read_seeds(seeds)
    except ConfigError as exc:
        _fail(EXIT_USAGE, str(exc))
    _setup_logging(settings)
    from crawler.pool.forkserver import prestart

    prestart()  # the parse workers' fork server preloads while this process imports the rest
    if settings.every is None:
        sys.exit(_run_crawl(seed_urls, settings))
    sys.exit(_run_every(seeds, seed_urls, settings))


def _run_every(seeds: Path, seed_urls: list[str], settings: Settings) -> int:
    """``--every``: one run per period, until a signal. A run that finds the database
    locked (an overlapping run) is skipped; a seeds file that turned bad keeps the last
    good seeds."""
    import time

    from crawler.cli.runner import wait_or_signal
    from crawler.seeds import read_seeds

    assert settings.every is not None
    while True:
        started = time.monotonic()
        try:
            code = _run_crawl(seed_urls, settings)
        except SystemExit as exc:
            if exc.code != EXIT_LOCKED:
                raise
            code = EXIT_OK  # the message is printed; try again next period
        if code != EXIT_OK:
            return code  # interrupted by a signal
        wait_s = max(0.0, settings.every - (time.monotonic() - started))
        log.info("next run in %.0f s", wait_s)
        code = wait_or_signal(wait_s)
        if code:
            return code
        try:
            seed_urls = read_seeds(seeds)
        except ConfigError as exc:
            log.error("%s (keeping the previous seeds)", exc)


def _settings(config_file: Path | None, flags: dict[str, Any]) -> Settings:
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(_settings_fields(Settings.from_toml(config_file)))
    given = {k: v for k, v in flags.items() if v is not None and v != ()}
    for negative in ("no_progress", "no_sitemaps"):
        if given.pop(negative, None):
            given[negative[3:]] = False
    values.update(given)
    return Settings.from_mapping(values, source="flags")


def _settings_fields(settings: Settings) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: getattr(settings, f.name) for f in fields(settings) if f.init}


def _fail(code: int, message: str) -> None:
    click.echo(f"crawl: error: {message}", err=True)
    sys.exit(code)


def _setup_logging(settings: Settings) -> None:
    from crawler.cli.logs import setup_logging

    try:
        setup_logging(
            quiet=settings.quiet,
            verbose=settings.verbose,
            log_file=settings.log_file,
            log_format=settings.log_format,
        )
    except OSError as exc:
        _fail(EXIT_USAGE, f"--log-file {settings.log_file}: {exc.strerror}")


def _run_crawl(seed_urls: list[str], settings: Settings) -> int:
    from crawler.cli.progress import ProgressView
    from crawler.cli.runner import run_with_signals
    from crawler.lock import DatabaseLocked

    view = ProgressView(enabled=settings.progress and not settings.quiet)
    try:
        with view:
            report, signal_code = run_with_signals(seed_urls, settings, view.update)
    except ConfigError as exc:
        _fail(EXIT_USAGE, str(exc))
    except StorageError as exc:
        _fail(EXIT_FAILED, str(exc))
    except DatabaseLocked as exc:
        _fail(EXIT_LOCKED, str(exc))
    except CrawlerError as exc:
        _fail(EXIT_FAILED, str(exc))
    if not settings.quiet:
        view.summary(report)
    if settings.stats_json:
        _write_stats_json(settings.stats_json, report)
    return signal_code or EXIT_OK


def _write_stats_json(path: str, report: CrawlReport) -> None:
    import json
    from dataclasses import asdict

    data = asdict(report)
    data["pages"], data["pages_per_s"] = report.pages, round(report.pages_per_s, 2)
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
    except OSError as exc:
        _fail(EXIT_FAILED, f"--stats-json {path}: {exc.strerror}")


@main.command("export")
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
def export_command(
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
    from storage.base import StoreError
    from storage.export import ExportFilter, export_pages

    try:
        selection = ExportFilter.parse(dedup=dedup, since=since, min_score=min_score)
        if fmt == "warc":
            from storage.warc import export_warc

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
        _fail(EXIT_USAGE, str(exc))
    except BrokenPipeError:
        # the reader went away (``crawl export db | head``): stop quietly, like other tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_FAILED)
    except OSError as exc:
        _fail(EXIT_USAGE, f"{output}: {exc.strerror}")
    click.echo(f"exported {count} pages", err=True)


@main.command("rank")
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("--query", "queries", multiple=True, required=True,
              help="Text to rank pages against (repeatable: the corpus is loaded once).")  # fmt: skip
@click.option("--top", type=int, default=10, show_default=True, help="Results per query.")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="auto",
              show_default=True, help="Where the BM25 kernel runs.")  # fmt: skip
def rank_command(db: str, queries: tuple[str, ...], top: int, device: str) -> None:
    """Rank the stored pages of DB by BM25 relevance to --query (no re-parsing)."""
    from storage.base import StoreError

    if top < 0:
        _fail(EXIT_USAGE, f"--top must be ≥ 0, got {top}")
    try:
        from crawler.relevance.ranking import CorpusIndex

        index = CorpusIndex(str(db), device)
    except (StoreError, ConfigError) as exc:
        _fail(EXIT_USAGE, str(exc))
    click.echo(f"ranking {index.pages} pages on {index.device}", err=True)
    for query in queries:
        if len(queries) > 1:
            click.echo(f"# {query}")
        for position, page in enumerate(index.rank(query, top), start=1):
            click.echo(f"{position}\t{page.score:.4f}\t{page.url}\t{page.title or ''}")


@main.command("runs")
@click.argument("db", type=click.Path(dir_okay=False))
def runs_command(db: str) -> None:
    """Print the run history of DB: start, end, status, pages, why it stopped."""
    from storage.base import StoreError
    from storage.export import read_runs

    try:
        rows = read_runs(str(db))
    except StoreError as exc:
        _fail(EXIT_USAGE, str(exc))
    click.echo(
        "id\tstarted_at\tended_at\tstatus\treason\tpages_ok\tpages_failed\tpages_unchanged\tbytes"
    )
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))


@main.command("stats")
@click.argument("db", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
def stats_command(db: str, as_json: bool) -> None:
    """Summarise DB: URLs by state, pages by status, what is due, hosts, runs, size."""
    import json
    import time

    from storage.base import StoreError
    from storage.stats import read_stats

    try:
        stats = read_stats(str(db), time.time())
    except StoreError as exc:
        _fail(EXIT_USAGE, str(exc))
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    for line in stats_lines(stats):
        click.echo(line)


def stats_lines(stats: dict[str, Any]) -> list[str]:
    """``crawl stats`` as aligned plain lines."""
    urls = stats["urls"]
    lines = [
        f"database     {stats['db']} ({stats['size_bytes'] / 1e6:.1f} MB, "
        f"schema {stats['schema_version']})",
        f"urls         {sum(urls.values())}: "
        + ", ".join(f"{state} {count}" for state, count in sorted(urls.items())),
        f"due now      {stats['due']} (next due {stats['next_due'] or '-'})",
        f"pages        {stats['pages']} ({stats['pages_with_text']} with text, "
        f"{stats['duplicates']} duplicates, {stats['changed']} changed since first fetch)",
        "by status    " + ", ".join(f"{k}: {v}" for k, v in stats["by_status"].items()),
        f"hosts        {stats['hosts']}",
        f"runs         {stats['runs']} (last: {stats['last_run'] or '-'})",
    ]
    if stats["skipped"]:
        lines.append("skipped      " + ", ".join(f"{k}: {v}" for k, v in stats["skipped"].items()))
    return lines


def report_lines(report: CrawlReport) -> list[str]:
    """The end-of-crawl summary as plain lines (no colour): for logs and non-terminals."""
    lines = [
        f"crawl {report.status} ({report.reason}): {report.pages_ok} pages ok, "
        f"{report.pages_failed} failed, {report.pages_unchanged} unchanged, "
        f"{report.bytes / 1e6:.1f} MB in {report.elapsed_s:.1f} s "
        f"({report.pages_per_s:.0f} pages/s); run {report.run_id} in {report.db}"
    ]
    if report.by_status:
        lines.append(
            "by status: " + ", ".join(f"{k}: {v}" for k, v in sorted(report.by_status.items()))
        )
    if report.errors:
        lines.append("errors: " + ", ".join(f"{k}: {v}" for k, v in sorted(report.errors.items())))
    if report.skipped:
        lines.append(
            "skipped: " + ", ".join(f"{k}: {v}" for k, v in sorted(report.skipped.items()))
        )
    if report.queued_left:
        lines.append(f"left in the queue: {report.queued_left}")
    return lines
