"""The ``crawl`` command's options, made from ``Settings.flags()``: a flag's type, default
and help are written once, on its ``Settings`` field.

Options default to ``None`` (not given), so that a ``--config`` file's values stand unless a
flag is given; ``--help`` shows the field's default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from crawler.settings import Flag, Settings

F = TypeVar("F", bound=Callable[..., Any])

_TYPES: dict[str, Any] = {"int": int, "float": float, "text": str, "duration": str, "many": str,
                          "optional": str}  # fmt: skip


def setting_options(command: F) -> F:
    """Decorate a click command with one option per setting, in the fields' order."""
    for flag in reversed(Settings.flags()):
        command = click.option(*_declarations(flag), **_attributes(flag))(command)
    return command


def help_text(flag: Flag) -> str:
    """The option's help: the field's, and its default when it has one to show."""
    return f"{flag.help} [default: {flag.default}]" if flag.default is not None else flag.help


def _declarations(flag: Flag) -> list[str]:
    names = [flag.short, flag.flag] if flag.short else [flag.flag]
    if not flag.negates and flag.flag[2:].replace("-", "_") != flag.name:
        names.append(flag.name)  # --header fills ``headers``
    return names


def _attributes(flag: Flag) -> dict[str, Any]:
    attributes: dict[str, Any] = {"default": None, "help": help_text(flag)}
    if flag.kind == "switch":
        attributes["is_flag"] = True
    elif flag.kind == "choice":
        assert flag.choices is not None
        attributes["type"] = click.Choice(flag.choices)
    else:
        attributes["type"] = _TYPES[flag.kind]
        attributes["multiple"] = flag.kind == "many"
        if flag.kind == "duration":
            attributes["metavar"] = "DURATION"
        if flag.metavar:
            attributes["metavar"] = flag.metavar.strip('"')
        if flag.kind == "optional":  # --netrc alone, or --netrc FILE
            attributes["is_flag"] = False
            attributes["flag_value"] = flag.bare
        if flag.kind == "many":
            del attributes["default"]  # click's () for a repeatable option given no times
    return attributes
