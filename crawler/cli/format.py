"""Plain-text renderings of a crawl's report and of ``crawl stats``: for logs, pipes and
terminals without colour."""

from __future__ import annotations

from typing import Any

from crawler.report import CrawlReport, harvest_text


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
    if report.harvest:
        lines.append(f"relevance by quarter of the run: {harvest_text(report.harvest)}")
    return lines
