"""The flag table of ``docs/cli.md``, made from ``Settings.flags()`` like the options are.

  python -m crawler.cli.reference            rewrite the table in docs/cli.md
  python -m crawler.cli.reference --check    exit 1 if docs/cli.md differs (a test runs this)

The table sits between two marker lines; the rest of the file is written by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

from crawler.settings import Flag, Settings

BEGIN, END = "<!-- flags:begin -->", "<!-- flags:end -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

_VALUES = {"int": "N", "float": "S", "text": "TEXT", "duration": "DURATION", "many": "REGEX",
           "optional": "[TEXT]"}  # fmt: skip


def table() -> str:
    """The markdown table: flag, default, meaning; one row per setting, in field order."""
    rows = ["| Flag | Default | Meaning |", "| --- | --- | --- |"]
    rows += [f"| {_cell(_usage(flag))} | {_cell(flag.default or '')} | {_cell(flag.help)} |"
             for flag in Settings.flags()]  # fmt: skip
    rows.append("| `--config FILE` | | TOML file with the same keys as these flags; flags win. |")
    return "\n".join(rows)


def render(document: str) -> str:
    """``document`` with the text between the markers replaced by ``table()``."""
    head, begin, rest = document.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{DOC}: the markers {BEGIN} and {END} are missing")
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def _usage(flag: Flag) -> str:
    names = f"{flag.short}, {flag.flag}" if flag.short else flag.flag
    if flag.kind == "switch":
        return f"`{names}`"
    value = "|".join(flag.choices) if flag.choices else flag.metavar or _VALUES[flag.kind]
    return f"`{names} {value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main(argv: list[str]) -> int:
    document = DOC.read_text(encoding="utf-8")
    wanted = render(document)
    if "--check" in argv:
        if wanted != document:
            print(f"{DOC}: the flag table is stale: run python -m crawler.cli.reference",
                  file=sys.stderr)  # fmt: skip
            return 1
        return 0
    DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
