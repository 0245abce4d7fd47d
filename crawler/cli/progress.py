"""Showing a crawl's progress: a rich bar on a terminal, plain periodic log lines otherwise.

Owns: presentation only. No ANSI codes ever reach a stdout that is not a terminal.
"""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import Any

from crawler.cli.format import report_lines
from crawler.report import CrawlReport, Progress, harvest_text

log = logging.getLogger("crawler.cli.progress")

LOG_INTERVAL_S = 10.0


class ProgressView:
    """``with ProgressView(enabled) as view: ... view.update(progress) ... view.summary(r)``."""

    def __init__(self, enabled: bool = True) -> None:
        self.tty = sys.stdout.isatty()
        self._enabled = enabled
        self._bar: Any = None
        self._task: Any = None
        self._last_log = time.monotonic()

    def __enter__(self) -> ProgressView:
        if self._enabled and self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("[bold]crawl"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("crawl", total=None, detail="starting")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
            self._bar = None

    def update(self, progress: Progress) -> None:
        if self._bar is not None:
            detail = (
                f"queued {progress.queued}  in flight {progress.in_flight}  "
                f"{progress.pages_per_s:.0f} pages/s  {progress.bytes_per_s / 1e6:.1f} MB/s  "
                f"errors {progress.errors}  parsing {progress.parse_busy}"
            )
            self._bar.update(
                self._task,
                completed=progress.done,
                total=progress.done + progress.queued + progress.in_flight,
                detail=detail,
            )
        elif self._enabled and time.monotonic() - self._last_log >= LOG_INTERVAL_S:
            self._last_log = time.monotonic()
            log.info(
                "progress done=%d queued=%d in_flight=%d errors=%d pages_per_s=%.1f "
                "bytes_per_s=%.0f parse_busy=%d",
                progress.done, progress.queued, progress.in_flight, progress.errors,
                progress.pages_per_s, progress.bytes_per_s, progress.parse_busy,
                extra={"data": {
                    "done": progress.done, "queued": progress.queued,
                    "in_flight": progress.in_flight, "errors": progress.errors,
                    "pages_per_s": round(progress.pages_per_s, 1),
                    "bytes_per_s": round(progress.bytes_per_s), "parse_busy": progress.parse_busy,
                }},
            )  # fmt: skip

    def summary(self, report: CrawlReport) -> None:
        if not self.tty:
            for line in report_lines(report):
                print(line)
            return
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"crawl {report.status} ({report.reason})", show_header=False)
        table.add_row("pages ok", str(report.pages_ok))
        table.add_row("pages failed", str(report.pages_failed))
        if report.pages_unchanged:
            table.add_row("pages unchanged", str(report.pages_unchanged))
        for status, count in sorted(report.by_status.items()):
            table.add_row(f"  status {status}", str(count))
        for reason, count in sorted(report.errors.items()):
            table.add_row(f"  error {reason}", str(count))
        for reason, count in sorted(report.skipped.items()):
            table.add_row(f"  skipped ({reason})", str(count))
        if report.harvest:
            table.add_row("relevance by quarter", harvest_text(report.harvest))
        table.add_row("bytes", f"{report.bytes / 1e6:.1f} MB")
        table.add_row("elapsed", f"{report.elapsed_s:.1f} s")
        table.add_row("pages/s", f"{report.pages_per_s:.0f}")
        table.add_row("database", f"{report.db} (run {report.run_id})")
        Console().print(table)
