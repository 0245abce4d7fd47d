"""Settings: every knob of a crawl, its default and its check, in one place.

Field names match the CLI flags one to one (``--per-host`` is ``per_host``); a TOML config
file uses the same keys (dashes or underscores). Defaults are polite, like Nutch and
StormCrawler: 2 requests in flight and one request start per second per host.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from crawler.errors import ConfigError

SCOPES = ("host", "domain", "any")
DEFAULT_USER_AGENT = "pycrawler/0.1"


@dataclass(frozen=True, slots=True)
class Settings:
    """How to crawl. Build it directly, from a TOML file (``from_toml``) or from CLI flags."""

    db: str = "crawl.db"
    """SQLite file the crawl writes to (created if missing), or a ``postgresql://`` DSN
    (a frontier shared by many ``crawl`` processes)."""
    max_pages: int | None = None
    """Stop after this many pages were fetched (all statuses); ``None``: no limit."""
    max_depth: int | None = None
    """Links followed from a seed (seeds are depth 0); ``None``: no limit."""
    concurrency: int = 16
    """Requests in flight at once, across all hosts."""
    per_host: int = 2
    """Requests in flight at once to one host (``host:port``)."""
    delay: float = 1.0
    """Seconds between the starts of two requests to one host."""
    scope: str = "host"
    """``host``: the seeds' hosts; ``domain``: also their subdomains; ``any``: everything."""
    include: tuple[str, ...] = ()
    """Regexes (searched in the URL); when given, a URL must match one to be followed."""
    exclude: tuple[str, ...] = ()
    """Regexes (searched in the URL); a URL matching one is not followed."""
    user_agent: str = DEFAULT_USER_AGENT
    """Sent with every request; its product token selects the robots.txt group."""
    workers: int | None = None
    """Parse processes; ``None``: the number of CPUs."""
    ignore_robots: bool = False
    """Skip robots.txt (only for sites you own)."""
    max_crawl_delay: float = 30.0
    """Cap on a robots.txt ``Crawl-delay`` (seconds)."""
    max_delay: float = 60.0
    """Most seconds between request starts to one host when it is slow or failing."""
    sitemaps: bool = True
    """Read sitemaps (robots.txt ``Sitemap:`` lines, else ``/sitemap.xml``) for more URLs."""
    retries: int = 2
    """Retries of a URL after a timeout, a connection error or 408/429/500/502/503/504."""
    allow_private: bool = False
    """Allow requests to private, loopback and link-local addresses beyond the seeds' hosts."""
    max_pages_per_host: int | None = None
    """Pages fetched per host at most; ``None``: no limit."""
    max_outlinks: int = 10_000
    """Outlinks kept per page (the first in document order)."""
    max_url_length: int = 2048
    """Longer URLs are skipped as traps."""
    template_budget: int = 12
    """Pages of one URL template (``/cal/N/N``: numbers as N) that may repeat what its pages
    said before (and more than say something new) before the template is closed: its URLs
    not fetched, its pages' links not followed (an endless calendar, a soft 404); ``0``: no
    limit. See ``crawler.policy.traps``."""
    timeout: float = 60.0
    """Seconds one whole request may take, body included."""
    connect_timeout: float = 10.0
    """Seconds to establish a connection."""
    max_body_bytes: int = 10 * 1024 * 1024
    """Largest body read (decompressed bytes); larger responses fail as ``too-large``."""
    max_redirects: int = 20
    """Redirect hops followed per URL (as browsers, Scrapy and wget)."""
    parse_timeout: float = 5.0
    """Seconds a page's parse may take: a longer one is abandoned (its parse worker is
    replaced) and the page stored with error ``parse-timeout``."""
    max_time: float | None = None
    """Seconds the run may take: then it stops taking work and ends cleanly (``--max-time``
    also takes ``50m``, ``1h30m``, ``90s``)."""
    every: float | None = None
    """CLI: run the crawl again and again, starting one run every this long (``1h``), for
    hosts without cron; each run is recorded. ``None``: one run."""
    recrawl_after: float = 86_400.0
    """Seconds after a fetch that a page is due again (a later run refetches it with a
    conditional GET); then the interval adapts: doubled while unchanged, halved on change."""
    max_interval: float = 30 * 86_400.0
    """Longest recrawl interval an unchanged page grows to; a page last fetched longer ago
    is due whatever its schedule (``0``: every page is due now)."""
    lease_ttl: float = 30.0
    """PostgreSQL: seconds a process's hold on a host lasts without renewal; a dead
    process's hosts are taken over by the others after this."""
    store_body: bool = False
    """Keep each response's raw body (compressed) and headers, for WARC export."""
    query: str | None = None
    """Text to score pages against (BM25); the frontier then goes best-first."""
    device: str = "auto"
    """Where scoring runs: ``auto`` (a CUDA GPU when present), ``cpu`` or ``gpu``."""
    quiet: bool = False
    """Log warnings and errors only; no summary."""
    verbose: bool = False
    """Log every fetch."""
    progress: bool = True
    """Show a progress bar when stdout is a terminal."""
    stats_json: str | None = None
    """Write the final report here as JSON (for scripts and monitoring)."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on this port while crawling (``/metrics``)."""
    metrics_host: str = "127.0.0.1"
    """Address the metrics endpoint listens on (``0.0.0.0``: every interface)."""
    log_file: str | None = None
    """Append the log to this file instead of stderr."""
    log_format: str = "text"
    """``text`` (one line per event) or ``json`` (one JSON object per line)."""
    _compiled: tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]] = field(
        default=((), ()), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        _check_positive(self, "concurrency", "per_host", "timeout", "connect_timeout")
        _check_positive(self, "max_body_bytes", "max_redirects", "max_outlinks", "max_url_length")
        _check_positive(self, "max_delay", "lease_ttl", "parse_timeout")
        if self.max_crawl_delay < 0 or self.retries < 0:
            raise ConfigError("--max-crawl-delay and --retries must be ≥ 0")
        if self.delay < 0:
            raise ConfigError(f"--delay must be ≥ 0, got {self.delay}")
        if isinstance(self.max_time, str):
            object.__setattr__(self, "max_time", parse_duration(self.max_time, "--max-time"))
        if self.max_time is not None and self.max_time <= 0:
            raise ConfigError(f"--max-time must be positive, got {self.max_time}")
        if isinstance(self.every, str):
            object.__setattr__(self, "every", parse_duration(self.every, "--every"))
        if self.every is not None and self.every <= 0:
            raise ConfigError(f"--every must be positive, got {self.every}")
        for name in ("recrawl_after", "max_interval"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = parse_duration(value, f"--{_flag(name)}")
                object.__setattr__(self, name, value)
            if not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"--{_flag(name)} must be a duration ≥ 0, got {value!r}")
        if self.metrics_port is not None and not 0 < self.metrics_port < 65536:
            raise ConfigError(f"--metrics-port must be 1-65535, got {self.metrics_port}")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"--log-format must be text or json, got {self.log_format!r}")
        if not isinstance(self.template_budget, int) or self.template_budget < 0:
            raise ConfigError(f"--template-budget must be ≥ 0, got {self.template_budget!r}")
        for name in ("max_pages", "max_depth", "workers", "max_pages_per_host"):
            value = getattr(self, name)
            if value is not None and value < (0 if name == "max_depth" else 1):
                raise ConfigError(f"--{_flag(name)} must be positive, got {value}")
        if self.device not in ("auto", "cpu", "gpu"):
            raise ConfigError(f"--device must be auto, cpu or gpu, got {self.device!r}")
        if self.query is not None and not self.query.strip():
            raise ConfigError("--query must not be empty")
        if self.scope not in SCOPES:
            raise ConfigError(f"--scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        compiled = (_compile("include", self.include), _compile("exclude", self.exclude))
        object.__setattr__(self, "_compiled", compiled)

    @property
    def include_patterns(self) -> tuple[re.Pattern[str], ...]:
        """``include`` compiled."""
        return self._compiled[0]

    @property
    def exclude_patterns(self) -> tuple[re.Pattern[str], ...]:
        """``exclude`` compiled."""
        return self._compiled[1]

    @property
    def parse_workers(self) -> int:
        """Parse processes to start: ``workers``, else the number of CPUs."""
        return self.workers or os.cpu_count() or 1

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str = "settings") -> Settings:
        """Build from a mapping with flag-like keys; unknown keys are a ``ConfigError``."""
        known = {f.name for f in fields(cls) if f.init}
        clean: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            if name in ("no_progress", "no_sitemaps"):
                name, value = name[3:], not value
            if name not in known:
                raise ConfigError(f"{source}: unknown setting {key!r}")
            if name in ("include", "exclude") and isinstance(value, str):
                value = (value,)
            clean[name] = value
        try:
            return cls(**clean)
        except TypeError as exc:
            raise ConfigError(f"{source}: {exc}") from exc

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Settings:
        """Read a TOML file whose keys are the flags' names (``per-host = 4``)."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
        return cls.from_mapping(data.get("crawl", data), source=str(path))


def _flag(name: str) -> str:
    return name.replace("_", "-")


def _check_positive(settings: Settings, *names: str) -> None:
    for name in names:
        value = getattr(settings, name)
        if not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"--{_flag(name)} must be positive, got {value!r}")


def _compile(flag: str, patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError(f"--{flag} {pattern!r}: invalid regex: {exc}") from exc
    return tuple(compiled)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, flag: str = "duration") -> float:
    """Seconds in ``90``, ``90s``, ``50m``, ``1h30m``, ``2d``; ``ConfigError`` naming ``flag``."""
    compact = text.strip().lower().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ConfigError(f"{flag} {text!r}: not a duration (e.g. 90s, 50m, 1h30m)")
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)
