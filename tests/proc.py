"""The environment for a test's child interpreters (``python -m crawler``, ``-c`` scripts)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(drop: tuple[str, ...] = (), **set_: str) -> dict[str, str]:
    """This process's environment with the repository first on PYTHONPATH (what was there
    stays after it: a machine may carry packages that way), the ``drop`` names removed and
    ``set_`` applied."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(set_)
    return env
