"""Logging set-up for the ``crawl`` command: plain lines or JSON lines, to stderr or a file.

Owns: the log's format. Plain: ``time LEVEL logger: message``. JSON (``--log-format json``):
one object per line with ``ts`` (ISO-8601 UTC), ``level``, ``logger``, ``msg`` and, for
records that carry them (progress lines), their fields under ``data`` — for log shippers.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

_PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_OURS = ("crawler", "parsers", "storage")


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        data = getattr(record, "data", None)
        if data is not None:
            entry["data"] = data
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def setup_logging(
    *, quiet: bool, verbose: bool, log_file: str | None = None, log_format: str = "text"
) -> None:
    """Configure the root logger once for a CLI run. Raises ``OSError`` if ``log_file``
    cannot be opened for appending."""
    level = logging.WARNING if quiet else logging.INFO
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8")
        if log_file
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_PLAIN))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # asyncio's INFO is noise; numba.cuda's INFO is a line for every device buffer freed ("add
    # pending dealloc"), dozens a batch when scoring on a GPU
    for noisy in ("asyncio", "numba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for package in _OURS:
        # --verbose is the crawler's own detail (every request). Libraries stay at INFO:
        # aiosqlite's debug lines print every statement's arguments, every page's text
        # among them (a 528-page crawl logged 44 MB and took twice as long).
        logging.getLogger(package).setLevel(logging.DEBUG if verbose and not quiet else level)
