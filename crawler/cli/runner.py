"""Running ``crawl SEEDS``: settings from flags and ``--config``, seeds, logging, the event
loop, signals, a clean stop, ``--every``, and the exit code.

Owns the process-level behaviour of a CLI crawl. A usage error exits 2 before anything is
crawled; a storage error 1; a locked database 75. First SIGINT/SIGTERM: stop taking new
work, let requests in flight finish and be stored, record the run as interrupted, exit
130/143. A second signal: exit at once (SQLite's transactions keep the database consistent).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, NoReturn

from crawler.api import run_coroutine
from crawler.cli.app import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, fail
from crawler.cli.logs import setup_logging
from crawler.cli.progress import ProgressView
from crawler.cli.tuning import GC_THRESHOLD
from crawler.engine.engine import Engine
from crawler.errors import ConfigError, CrawlerError, StorageError
from crawler.lock import DatabaseLocked
from crawler.pool.forkserver import prestart
from crawler.report import CrawlReport, ProgressCallback
from crawler.seeds import read_seeds
from crawler.settings import Settings

log = logging.getLogger(__name__)

SIGNAL_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def run_command(seeds: Path, config_file: Path | None, flags: dict[str, Any]) -> NoReturn:
    """``crawl SEEDS``: check the flags and seeds (exit 2), start the fork server, crawl
    once or ``--every`` period, exit with the crawl's code."""
    try:
        settings = settings_from(config_file, flags)
        seed_urls = read_seeds(seeds, settings.max_url_length)
    except ConfigError as exc:
        fail(EXIT_USAGE, str(exc))
    if settings.stats_json:
        _check_writable("--stats-json", settings.stats_json)
    _setup_logging(settings)
    prestart()  # a no-op under the console script, which started it first
    if settings.every is None:
        sys.exit(_run_crawl(seed_urls, settings))
    sys.exit(_run_every(seeds, seed_urls, settings))


def settings_from(config_file: Path | None, flags: dict[str, Any]) -> Settings:
    """The settings of ``--config`` (if given), then the flags given, which win."""
    values: dict[str, Any] = {}
    if config_file is not None:
        loaded = Settings.from_toml(config_file)
        values.update({f.name: getattr(loaded, f.name) for f in fields(loaded) if f.init})
    given = {k: v for k, v in flags.items() if v is not None and v != ()}
    for flag in Settings.flags():
        if flag.negates and given.pop(flag.flag[2:].replace("-", "_"), None):
            given[flag.name] = False
    values.update(given)
    return Settings.from_mapping(values, source="flags")


def _run_every(seeds: Path, seed_urls: list[str], settings: Settings) -> int:
    """``--every``: one run per period, until a signal. A run that finds the database
    locked (an overlapping run) is skipped; a seeds file that turned bad keeps the last
    good seeds."""
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
            seed_urls = read_seeds(seeds, settings.max_url_length)
        except ConfigError as exc:
            log.error("%s (keeping the previous seeds)", exc)


def _setup_logging(settings: Settings) -> None:
    try:
        setup_logging(quiet=settings.quiet, verbose=settings.verbose,
                      log_file=settings.log_file, log_format=settings.log_format)  # fmt: skip
    except OSError as exc:
        fail(EXIT_USAGE, f"--log-file {settings.log_file}: {exc.strerror}")


def _run_crawl(seed_urls: list[str], settings: Settings) -> int:
    view = ProgressView(enabled=settings.progress and not settings.quiet)
    try:
        with view:
            report, signal_code = run_with_signals(seed_urls, settings, view.update)
    except ConfigError as exc:
        fail(EXIT_USAGE, str(exc))
    except StorageError as exc:
        fail(EXIT_FAILED, str(exc))
    except DatabaseLocked as exc:
        fail(EXIT_LOCKED, str(exc))
    except CrawlerError as exc:
        fail(EXIT_FAILED, str(exc))
    if not settings.quiet:
        view.summary(report)
    if settings.stats_json:
        _write_stats_json(settings.stats_json, report)
    return signal_code or EXIT_OK


def _check_writable(flag: str, path: str) -> None:
    """Refuse (exit 2) before the crawl a file the crawl could not write at its end."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder):
        fail(EXIT_USAGE, f"{flag} {path}: not a file in an existing folder")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        fail(EXIT_USAGE, f"{flag} {path}: not writable")


def _write_stats_json(path: str, report: CrawlReport) -> None:
    data = asdict(report)
    data["pages"], data["pages_per_s"] = report.pages, round(report.pages_per_s, 2)
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
    except OSError as exc:
        fail(EXIT_FAILED, f"--stats-json {path}: {exc.strerror}")


def wait_or_signal(seconds: float) -> int:
    """Sleep ``seconds`` (between scheduled runs); a SIGINT/SIGTERM ends the wait early and
    its exit code is returned (0 when the time simply passed)."""
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in SIGNAL_EXIT_CODES}
    try:
        deadline = time.monotonic() + seconds
        while not received and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.25))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return SIGNAL_EXIT_CODES[signal.Signals(received[0])] if received else 0


def tune_gc() -> None:
    """For a crawl that owns its process (the CLI): what is loaded so far (modules, the
    engine) is frozen out of the cyclic garbage collector, and young objects are collected
    far less often. The crawl frees nearly everything by reference counting, so the
    collector's passes over a large heap find little. Library callers keep their
    process's settings."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def run_with_signals(
    seeds: list[str], settings: Settings, on_progress: ProgressCallback | None
) -> tuple[CrawlReport, int]:
    """Run the crawl; returns its report and the exit code a signal asks for (0 if none)."""
    received: list[signal.Signals] = []

    async def main() -> CrawlReport:
        engine = Engine(settings, seeds, on_progress=on_progress)
        tune_gc()
        loop = asyncio.get_running_loop()
        exporter = None
        if settings.metrics_port is not None:
            from crawler.cli.metrics import serve_metrics  # prometheus_client: only when asked

            try:
                exporter, _ = serve_metrics(engine, settings.metrics_port, settings.metrics_host)
            except OSError as exc:
                raise ConfigError(
                    f"--metrics-port {settings.metrics_port}: cannot listen: {exc.strerror}"
                ) from exc
            log.info("metrics on http://%s:%d/metrics", settings.metrics_host,
                     settings.metrics_port)  # fmt: skip

        def on_signal(signum: signal.Signals) -> None:
            received.append(signum)
            if len(received) > 1:
                log.warning("second %s: exiting now", signum.name)
                os._exit(SIGNAL_EXIT_CODES[signum])
            log.warning("%s: finishing requests in flight, then stopping", signum.name)
            engine.stop(f"signal {signum.name}")

        for signum in SIGNAL_EXIT_CODES:
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            return await engine.run()
        finally:
            for signum in SIGNAL_EXIT_CODES:
                loop.remove_signal_handler(signum)
            if exporter is not None:
                exporter.shutdown()
                exporter.server_close()

    report = run_coroutine(main())
    return report, SIGNAL_EXIT_CODES[received[0]] if received else 0
