"""Settings: every knob of a crawl, its default and its check, in one place.

Field names match the CLI flags one to one (``--per-host`` is ``per_host``); a TOML config
file uses the same keys (dashes or underscores). Defaults are polite, like Nutch and
StormCrawler: 2 requests in flight and one request start per second per host.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from crawler.errors import ConfigError
from crawler.net.headers import host_table
from crawler.setting_checks import (
    check_network,
    check_positive,
    check_types,
    compile_patterns,
    flag_of,
    parse_duration,
)

SCOPES = ("host", "domain", "any")
DEVICES = ("auto", "cpu", "gpu")
LOG_FORMATS = ("text", "json")
DEFAULT_USER_AGENT = "pycrawler/0.1"


def _setting(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    short: str | None = None,
    shown: str | None = None,
    choices: tuple[str, ...] | None = None,
    duration: bool = False,
    bare: str | None = None,
    cli: bool = True,
    metavar: str | None = None,
) -> Any:
    """A ``Settings`` field and its description: ``help`` (one text for ``--help``, the
    docs and readers of this class); ``flag`` when it is not ``--`` plus the field's name
    with dashes (``--no-sitemaps`` sets a default-on field off); ``shown``, the default as
    ``--help`` prints it when ``str(default)`` would not do; ``choices`` for a closed set;
    ``duration`` for a value also written ``90s``, ``50m``, ``1h30m``; ``bare``, the value
    of the flag given without one (``--netrc`` alone); ``cli=False`` for a setting only a
    config file can hold (a table); ``metavar``, how the docs write the value."""
    meta = {"help": help, "flag": flag, "short": short, "shown": shown, "choices": choices,
            "duration": duration, "bare": bare, "cli": cli, "metavar": metavar}  # fmt: skip
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class Flag:
    """One ``Settings`` field as a command-line flag: what ``crawler.cli.options`` turns
    into a click option and ``crawler.cli.reference`` into a row of the docs' table."""

    name: str
    """The field's name (``per_host``)."""
    flag: str
    """``--per-host``; ``--no-sitemaps`` for a field that is on by default."""
    short: str | None
    kind: str
    """``int``, ``float``, ``text``, ``duration``, ``choice``, ``switch`` (a flag without a
    value), ``many`` (a text, repeatable) or ``optional`` (a text that may be left out:
    then ``bare``)."""
    default: str | None
    """The default as shown to a user; ``None`` when there is none to show (no limit, off)."""
    help: str
    choices: tuple[str, ...] | None
    bare: str | None = None
    metavar: str | None = None

    @property
    def negates(self) -> bool:
        """Whether giving the flag sets the field to ``False`` (``--no-progress``; not
        ``--no-proxy``, a value)."""
        return self.kind == "switch" and self.flag.startswith("--no-")


@dataclass(frozen=True, slots=True)
class Settings:
    """How to crawl. Build it directly, from a TOML file (``from_toml``) or from CLI flags.

    Each field's ``metadata`` is its one description: the ``crawl`` command's option (its
    flag, type, default and help: ``crawler.cli.options``) and the flag table of
    ``docs/cli.md`` (``python -m crawler.cli.reference``) are made from it. ``flags()``
    lists them."""

    db: str = _setting(
        "crawl.db",
        "SQLite file the crawl writes to (created if missing), or "
        "a postgresql:// DSN: a frontier shared by many crawl processes.",
    )
    max_pages: int | None = _setting(
        None, "Stop after this many pages were fetched (all statuses)."
    )
    max_depth: int | None = _setting(None, "Follow links at most this deep (seeds are 0).")
    concurrency: int = _setting(16, "Requests in flight at once, across all hosts.")
    per_host: int = _setting(2, "Requests in flight at once to one host (host:port).")
    delay: float = _setting(1.0, "Seconds between the starts of two requests to one host.")
    scope: str = _setting(
        "host",
        "What to follow: the seeds' hosts, their domains (subdomains too), or anything.",
        choices=SCOPES,
    )
    include: tuple[str, ...] = _setting(
        (), "Regex searched in a URL; when given, a URL must match one to be followed (repeatable)."
    )
    exclude: tuple[str, ...] = _setting(
        (), "Regex searched in a URL; a URL matching one is not followed (repeatable)."
    )
    user_agent: str = _setting(
        DEFAULT_USER_AGENT,
        "Sent with every request; its product token selects the robots.txt group.",
    )
    workers: int | None = _setting(None, "Parse processes.", shown="number of CPUs")
    ignore_robots: bool = _setting(False, "Do not obey robots.txt (only for sites you own).")
    max_crawl_delay: float = _setting(30.0, "Cap on a robots.txt Crawl-delay (seconds).")
    max_delay: float = _setting(
        60.0, "Most seconds between request starts to a host that is slow or failing."
    )
    sitemaps: bool = _setting(
        True,
        "Do not read sitemaps (robots.txt Sitemap: lines, else /sitemap.xml) for more URLs.",
        flag="--no-sitemaps",
    )
    retries: int = _setting(
        2, "Retries of a URL after a timeout, a connection error or 408/429/500/502/503/504."
    )
    allow_private: bool = _setting(
        False,
        "Allow private, loopback and link-local addresses "
        "beyond the seeds' origins (SSRF guard off).",
    )
    max_pages_per_host: int | None = _setting(None, "Fetch at most this many pages per host.")
    max_outlinks: int = _setting(10_000, "Outlinks kept per page (the first in document order).")
    max_url_length: int = _setting(2048, "Longer URLs are skipped as traps.")
    template_budget: int = _setting(
        12,
        "Pages of one URL template (/cal/N/N: numbers as N) "
        "that may repeat what its pages said before (and more "
        "than say something new) before the template is closed: "
        "its URLs not fetched, its pages' links not followed "
        "(an endless calendar, a soft 404); 0: no limit.",
    )
    timeout: float = _setting(
        60.0, "Seconds one whole fetch may take: redirects, body and decoding included."
    )
    connect_timeout: float = _setting(10.0, "Seconds to establish a connection.")
    proxy: str | None = _setting(
        None,
        "Send every request through this proxy: http://[user:pass@]host:port (https "
        "sites through CONNECT), socks5:// (names resolved here) or socks5h:// (by the "
        "proxy). Without it: http_proxy, https_proxy, all_proxy from the environment.",
        metavar="URL",
    )
    no_proxy: str | None = _setting(
        None,
        "Hosts reached without the proxy, comma-separated: names (and the hosts below "
        "them), IP addresses or CIDR ranges, :port; * for all. Without it: no_proxy.",
        metavar="LIST",
    )
    headers: tuple[str, ...] = _setting(
        (),
        '"Name: value" sent with every request, replacing the crawl\'s header of that name '
        '("Name:" removes it) (repeatable).',
        flag="--header",
        short="-H",
        metavar='"NAME: VALUE"',
    )
    host_headers: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = _setting(
        (),
        'Config file only: a table of host = {Name = "value"} sent to that host '
        '(".example.com": the domain and the hosts below it), over --header.',
        cli=False,
    )
    cookies: str | None = _setting(
        None,
        "Send the cookies of this cookies.txt (Netscape format, as curl -c and wget "
        "--save-cookies write it) to the sites they belong to.",
        metavar="FILE",
    )
    keep_cookies: bool = _setting(
        False, "Honour Set-Cookie within the crawl (RFC 6265); off: stateless requests."
    )
    netrc: str | None = _setting(
        None,
        "Send Basic credentials of this .netrc to its hosts (--netrc alone: ~/.netrc), "
        "as curl --netrc.",
        bare="~/.netrc",
        metavar="[FILE]",
    )
    ca_bundle: str | None = _setting(
        None,
        "Verify TLS against the CA certificates of this PEM file instead of the system's "
        "(SSL_CERT_FILE and SSL_CERT_DIR are also honoured).",
        metavar="FILE",
    )
    max_body_bytes: int = _setting(
        10 * 1024 * 1024,
        "Largest body read (decompressed bytes); a larger page fails as too-large (a"
        " sitemap is read to the cap; a robots.txt to 500 KiB).",
    )
    max_redirects: int = _setting(
        20, "Redirect hops followed per URL (as browsers, Scrapy and wget)."
    )
    parse_timeout: float = _setting(
        5.0,
        "Seconds a page's parse may take: a longer one is "
        "abandoned (its parse worker replaced) and the page "
        "stored with error parse-timeout.",
    )
    max_time: float | None = _setting(
        None,
        "End the run cleanly after this long: it stops taking work and stores what is in flight.",
        duration=True,
    )
    every: float | None = _setting(
        None,
        "Run again and again, one run starting every this "
        "long, re-reading SEEDS each time: a schedule for hosts "
        "without cron (each run is recorded).",
        duration=True,
    )
    recrawl_after: float = _setting(
        86_400.0,
        "A fetched page is due again after this long "
        "(a later run refetches it with a conditional GET); "
        "then the interval adapts: doubled while unchanged, "
        "halved on change.",
        duration=True,
        shown="1d",
    )
    max_interval: float = _setting(
        30 * 86_400.0,
        "Longest recrawl interval an unchanged "
        "page grows to; a page fetched longer ago is due (0: "
        "every page is due now).",
        duration=True,
        shown="30d",
    )
    lease_ttl: float = _setting(
        30.0,
        "PostgreSQL: seconds a process's hold on a host lasts "
        "without renewal; a dead process's hosts go to the others "
        "after this.",
    )
    store_body: bool = _setting(
        False,
        "Keep each response's raw body (compressed) and headers, for crawl export --format warc.",
    )
    query: str | None = _setting(
        None,
        "Score every page against this text (BM25) and crawl "
        "best-first: links of relevant pages, and links whose "
        "anchor text has query words, go first.",
    )
    device: str = _setting(
        "auto", "Where scoring runs: auto (a CUDA GPU when present), cpu or gpu.", choices=DEVICES
    )
    quiet: bool = _setting(False, "Log warnings and errors only; no summary.", short="-q")
    verbose: bool = _setting(False, "Log every fetch.", short="-v")
    progress: bool = _setting(
        True,
        "No progress bar (it is shown when standard output is a terminal).",
        flag="--no-progress",
    )
    stats_json: str | None = _setting(
        None, "Write the final report to this file as JSON (for scripts and monitoring)."
    )
    metrics_port: int | None = _setting(
        None, "Serve Prometheus metrics on this port (/metrics) while crawling."
    )
    metrics_host: str = _setting(
        "127.0.0.1", "Address --metrics-port listens on (0.0.0.0: every interface)."
    )
    log_file: str | None = _setting(None, "Append the log to this file instead of standard error.")
    log_format: str = _setting(
        "text", "Log lines as text, or as JSON objects (one a line).", choices=LOG_FORMATS
    )
    _compiled: tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]] = field(
        default=((), ()), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        check_types(self)
        check_positive(self, "concurrency", "per_host", "timeout", "connect_timeout")
        check_positive(self, "max_body_bytes", "max_redirects", "max_outlinks", "max_url_length")
        check_positive(self, "max_delay", "lease_ttl", "parse_timeout")
        for name in ("max_crawl_delay", "retries"):
            if getattr(self, name) < 0:
                raise ConfigError(f"--{flag_of(name)} must be ≥ 0, got {getattr(self, name)!r}")
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
                value = parse_duration(value, f"--{flag_of(name)}")
                object.__setattr__(self, name, value)
            if not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"--{flag_of(name)} must be a duration ≥ 0, got {value!r}")
        if self.metrics_port is not None and not 0 < self.metrics_port < 65536:
            raise ConfigError(f"--metrics-port must be 1-65535, got {self.metrics_port}")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(f"--log-format must be text or json, got {self.log_format!r}")
        if not isinstance(self.template_budget, int) or self.template_budget < 0:
            raise ConfigError(f"--template-budget must be ≥ 0, got {self.template_budget!r}")
        for name in ("max_pages", "max_depth", "workers", "max_pages_per_host"):
            value = getattr(self, name)
            if value is not None and value < (0 if name == "max_depth" else 1):
                raise ConfigError(f"--{flag_of(name)} must be positive, got {value}")
        if self.device not in DEVICES:
            raise ConfigError(f"--device must be auto, cpu or gpu, got {self.device!r}")
        if self.query is not None and not self.query.strip():
            raise ConfigError("--query must not be empty")
        if self.scope not in SCOPES:
            raise ConfigError(f"--scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        check_network(self)
        for name in ("include", "exclude"):  # one pattern given alone is one, not its letters
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        compiled = (
            compile_patterns("include", self.include),
            compile_patterns("exclude", self.exclude),
        )
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
    def agent(self) -> str:
        """The User-Agent requests carry (a ``--header`` of that name over
        ``--user-agent``), whose product token selects the robots.txt group."""
        for text in reversed(self.headers):
            name, _, value = text.partition(":")
            if name.strip().lower() == "user-agent" and value.strip():
                return value.strip()
        return self.user_agent

    @property
    def parse_workers(self) -> int:
        """Parse processes to start: ``workers``, else the number of CPUs."""
        return self.workers or os.cpu_count() or 1

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def flags(cls) -> list[Flag]:
        """Every setting as a command-line flag, in the fields' order."""
        return [_asflag_of(f) for f in fields(cls) if f.init and f.metadata["cli"]]

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str = "settings") -> Settings:
        """Build from a mapping with flag-like keys; unknown keys are a ``ConfigError``."""
        known = {f.name for f in fields(cls) if f.init}
        aliases = {flag.flag[2:].replace("-", "_"): flag.name for flag in cls.flags()
                   if not flag.negates}  # fmt: skip
        clean: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            name = aliases.get(name, name)  # header = [...] fills ``headers``
            if name.startswith("no_") and name[3:] in _NEGATED:
                name, value = name[3:], not value
            if name not in known:
                raise ConfigError(f"{source}: unknown setting {key!r}")
            if name in ("include", "exclude", "headers") and isinstance(value, str):
                value = (value,)
            if name == "host_headers":
                value = host_table(value, source)
            clean[name] = value
        try:
            return cls(**clean)
        except TypeError as exc:
            raise ConfigError(f"{source}: {exc}") from exc

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Settings:
        """Read a TOML file whose keys are the flags' names (``per-host = 4``)."""
        import tomllib  # the standard library's: only a crawl with a config file reads TOML

        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
        section = data.get("crawl", data)
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: crawl = {section!r}: [crawl] must be a table")
        try:
            return cls.from_mapping(section, source=str(path))
        except ConfigError as exc:
            message = str(exc)
            if message.startswith(f"{path}:"):
                raise
            raise ConfigError(f"{path}: {message}") from exc


_NEGATED = frozenset(("progress", "sitemaps"))
"""Fields on by default whose flag turns them off (``--no-progress``, ``no-sitemaps = true``
in a config file)."""


def _asflag_of(spec: dataclasses.Field[Any]) -> Flag:
    meta, default, kind = spec.metadata, spec.default, "text"
    annotation = str(spec.type)
    if meta["duration"]:
        kind = "duration"
    elif meta["choices"]:
        kind = "choice"
    elif meta["bare"] is not None:
        kind = "optional"
    elif annotation == "bool":
        kind = "switch"
    elif annotation.startswith("tuple"):
        kind = "many"
    elif annotation.startswith(("int", "float")):
        kind = annotation.partition(" ")[0]
    shown = meta["shown"]
    if shown is None and default is not None and kind not in ("switch", "many"):
        shown = str(default)
    return Flag(name=spec.name, flag=meta["flag"] or f"--{flag_of(spec.name)}",
                short=meta["short"], kind=kind, default=shown, help=meta["help"],
                choices=meta["choices"], bare=meta["bare"],
                metavar=meta["metavar"])  # fmt: skip
