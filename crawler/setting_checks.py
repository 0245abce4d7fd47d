"""Checks of ``crawler.settings.Settings``' values that need nothing of the class: each
setting's type (``check_types``: a config file can hold anything), positive numbers, the
network settings, regular expressions, and durations (``parse_duration``). Every failure is
a ``ConfigError`` that names the flag."""

from __future__ import annotations

import math
import re
from dataclasses import fields
from typing import Any

from crawler.errors import ConfigError


def check_network(settings: Any) -> None:
    """The proxy, ``--no-proxy`` and headers parse (files are read when a crawl starts:
    ``crawler.net.session``)."""
    from crawler.net.headers import host_table, parse_header
    from crawler.net.proxy import NoProxy, parse_proxy

    if settings.proxy is not None:
        parse_proxy(settings.proxy, "--proxy")
    if settings.no_proxy is not None:
        NoProxy(settings.no_proxy, "--no-proxy")
    headers = (settings.headers,) if isinstance(settings.headers, str) else settings.headers
    object.__setattr__(settings, "headers", tuple(headers))
    for text in settings.headers:
        parse_header(text)
    object.__setattr__(settings, "host_headers", host_table(settings.host_headers, "settings"))
    for name in ("cookies", "netrc", "ca_bundle"):
        value = getattr(settings, name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"--{flag_of(name)} needs a file name")


def flag_of(name: str) -> str:
    return name.replace("_", "-")


_EXPECTED = {"str": "a string", "int": "a whole number", "float": "a finite number",
             "bool": "true or false", "tuple[str, ...]": "a list of strings"}  # fmt: skip


def check_types(settings: Any) -> None:
    """Each setting of a plain type holds that type (a config file can hold anything): a
    whole number is no bool, a number is finite (NaN passes every ``<`` test false, and an
    infinite timeout never fires), a duration may also be text (parsed after)."""
    for spec in fields(settings):
        value = getattr(settings, spec.name)
        annotation = str(spec.type)
        kind = annotation.removesuffix(" | None")
        if not spec.init or kind not in _EXPECTED or (value is None and kind != annotation):
            continue
        if isinstance(value, str) and (spec.metadata["duration"] or kind == "tuple[str, ...]"):
            continue  # "90s"; a single header or pattern
        if kind == "tuple[str, ...]":
            ok = isinstance(value, tuple | list) and all(isinstance(v, str) for v in value)
        elif kind == "float":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and math.isfinite(value)
        else:
            wanted = {"str": str, "int": int, "bool": bool}[kind]
            ok = isinstance(value, wanted) and (kind == "bool" or not isinstance(value, bool))
        if not ok:
            flag = spec.metadata["flag"] or f"--{flag_of(spec.name)}"
            raise ConfigError(f"{flag}: {_EXPECTED[kind]} is needed, got {value!r:.80}")


def check_positive(settings: Any, *names: str) -> None:
    for name in names:
        value = getattr(settings, name)
        if not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"--{flag_of(name)} must be positive, got {value!r}")


def compile_patterns(flag: str, patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
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
