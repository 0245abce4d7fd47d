"""Reading a seeds file: one absolute http(s) URL per line, blank lines and ``#`` comments.

Every problem is a ``ConfigError`` naming ``file:line``, raised before anything is fetched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from crawler.errors import ConfigError
from crawler.policy.scope import normalize_url


def parse_seed(text: str, where: str) -> str:
    """Normalise one seed URL; ``where`` names it in the error (``seeds.txt:3``)."""
    if not text.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{where}: not an absolute http(s) URL: {text!r}")
    try:
        return normalize_url(text)
    except ValueError:
        raise ConfigError(f"{where}: invalid URL: {text!r}") from None


def read_seeds(path: str | os.PathLike[str]) -> list[str]:
    """The seeds in ``path``, normalised, duplicates removed, in file order."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{path}: seeds file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read seeds file: {exc}") from None
    seeds = parse_seeds(lines, str(path))
    if not seeds:
        raise ConfigError(f"{path}: no seed URLs in the file")
    return seeds


def parse_seeds(lines: Iterable[str], source: str = "seeds") -> list[str]:
    """Seeds from lines of text; ``#`` starts a comment when at the line start or after a space."""
    seeds: dict[str, None] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.split(" #", 1)[0].strip()
        seeds[parse_seed(line, f"{source}:{number}")] = None
    return list(seeds)
