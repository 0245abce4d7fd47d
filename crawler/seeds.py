"""Reading a seeds file: one absolute http(s) URL per line, blank lines and ``#`` comments.

Every problem is a ``ConfigError`` naming ``file:line``, raised before anything is fetched.
Lines end at LF (CRLF too), as ``wc -l`` and editors count them: not at the other breaks
Python's ``splitlines`` knows (U+0085, U+2028, form feed...), which would shift the line
numbers and split a URL. Each line is decoded on its own, so bad UTF-8 names its line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from crawler.errors import ConfigError
from crawler.policy.scope import normalize_url
from parsers.links import strip_userinfo, url_origin

SHOWN_CHARS = 200
"""How much of a bad line an error shows."""


def _shown(text: str) -> str:
    return repr(text[:SHOWN_CHARS]) + ("..." if len(text) > SHOWN_CHARS else "")


def parse_seed(text: str, where: str, longest: int | None = None) -> str:
    """Normalise one seed URL; ``where`` names it in the error (``seeds.txt:3``);
    ``longest``: the most characters it may have, normalised (``--max-url-length``)."""
    if not isinstance(text, str):
        raise ConfigError(f"{where}: a seed is a URL string, not {type(text).__name__}")
    if not text.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{where}: not an absolute http(s) URL: {_shown(text)}")
    try:
        url = normalize_url(text)
    except ValueError:
        raise ConfigError(f"{where}: invalid URL: {_shown(text)}") from None
    if longest is not None and len(url) > longest:
        raise ConfigError(f"{where}: longer than --max-url-length {longest}: {_shown(text)}")
    return url


def read_seeds(path: str | os.PathLike[str], longest: int | None = None) -> list[str]:
    """The seeds in ``path``, normalised, duplicates removed, in file order (``longest``:
    see ``parse_seed``)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: seeds file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read seeds file: {exc.strerror or exc}") from None
    lines = []
    for number, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        try:
            lines.append(raw.removesuffix(b"\r").decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}:{number}: not UTF-8 text (byte {exc.start + 1})") from None
    seeds = parse_seeds(lines, str(path), longest)
    if not seeds:
        raise ConfigError(f"{path}: no seed URLs in the file")
    return seeds


def parse_seeds(
    lines: Iterable[str], source: str = "seeds", longest: int | None = None
) -> list[str]:
    """Seeds from lines of text; ``#`` starts a comment when at the line start or after a space."""
    seeds: dict[str, None] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.split(" #", 1)[0].strip()
        seeds[parse_seed(line, f"{source}:{number}", longest)] = None
    return list(seeds)


def split_credentials(seeds: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """(the seeds without userinfo, ``user:password`` by origin), from normalised seeds:
    ``http://u:p@h/`` gives ``http://h/`` and ``{"http://h": "u:p"}``."""
    plain: dict[str, None] = {}
    credentials: dict[str, str] = {}
    for seed in seeds:
        bare = strip_userinfo(seed)
        if bare != seed:
            start = seed.find("//") + 2  # the userinfo and its "@" are what was taken out
            credentials.setdefault(
                url_origin(bare), seed[start : start + len(seed) - len(bare) - 1]
            )
        plain[bare] = None
    return list(plain), credentials
