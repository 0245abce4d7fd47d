"""The memo of dataclass methods (``parsers.dataclass_cache``), in child interpreters whose
bytecode (and so the memo) goes under a temporary ``PYTHONPYCACHEPREFIX``."""

from __future__ import annotations

import json
import marshal
import random
import subprocess
import sys
from pathlib import Path
from types import CodeType

import pytest

from parsers import dataclass_cache
from tests.proc import child_env

# Two classes of each kind, made in a module of ours (memoized) and in another (not); what
# each instance does is reported as JSON, with the memo's state.
_SCRIPT = r"""
import dataclasses, json, pickle, sys, types
import parsers.dataclass_cache as memo

SOURCE = '''
from __future__ import annotations
import dataclasses
from dataclasses import dataclass, field

@dataclass(frozen=True, slots=True)
class Rule:
    path: str
    allow: bool = True
    weights: tuple[int, ...] = ()
EXTRA

@dataclass(slots=True, kw_only=True)
class State:
    url: str
    tries: int = 0
    seen: list[str] = field(default_factory=list)
'''

def make(name):
    module = types.ModuleType(name)
    sys.modules[name] = module
    source = SOURCE.replace("EXTRA", sys.argv[3])
    exec(compile(source, name, "exec"), vars(module))
    return module

def behaviour(module):
    rule = module.Rule("/a", weights=(1, 2))
    state = module.State(url="u")
    state.tries += 1
    try:
        rule.path = "/b"
        frozen = False
    except dataclasses.FrozenInstanceError:
        frozen = True
    return {
        "repr": [repr(rule).split(".")[-1], repr(state).split(".")[-1]],
        "eq": [rule == module.Rule("/a", True, (1, 2)), rule == module.Rule("/b")],
        "hash": hash(rule) == hash(module.Rule("/a", weights=(1, 2))),
        "frozen": frozen,
        "fields": [f.name for f in dataclasses.fields(module.State)],
        "replace": repr(dataclasses.replace(rule, allow=False)).split(".")[-1],
        "pickle": pickle.loads(pickle.dumps(rule)) == rule,
        "state": [state.tries, state.seen, state == module.State(url="u", tries=1)],
        "slots": hasattr(rule, "__dict__"),
        "annotations": [repr(c.__init__.__annotations__) for c in (module.Rule, module.State)],
    }

builtin = vars(dataclasses).pop("exec")  # as if never installed: the reference
reference = behaviour(make("reference_probe"))
vars(dataclasses)["exec"] = builtin
before = memo.compiled_here()
ours = behaviour(make(sys.argv[1]))
after_ours = memo.compiled_here()
other = behaviour(make("other_probe"))
print(json.dumps({
    "ours": ours, "other": other, "reference": reference,
    "compiled": [after_ours - before, memo.compiled_here() - after_ours],
    "path": memo.cache_path(),
    "saved": memo.save(force=sys.argv[2] == "force"),
}))
"""


def run(prefix: Path, module: str = "parsers.probe", *, force: bool = False,
        bytecode: bool = True, extra: str = "") -> dict:  # fmt: skip
    env = child_env(drop=("PYTHONDONTWRITEBYTECODE",), PYTHONPYCACHEPREFIX=str(prefix))
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, module, "force" if force else "", extra],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_class_made_from_the_memo_is_the_class_dataclasses_makes(tmp_path: Path) -> None:
    """The first process compiles the probe's methods and writes them; the next compiles
    none of them, and each class does in both what the same class outside our packages
    does (repr, eq, hash, frozen, fields, replace, pickle, slots, defaults), and what it
    does where nothing was installed: the methods' annotations too (a class of anyone else
    made through the memo's ``exec`` must not get this module's ``__future__`` flags)."""
    first = run(tmp_path)
    assert first["ours"] == first["other"] == first["reference"]
    assert first["ours"]["frozen"] and not first["ours"]["slots"]
    assert first["compiled"][0] >= 8 and first["compiled"][1] == 0  # other: not memoized
    assert first["saved"] and Path(first["path"]).is_file()
    assert str(tmp_path) in first["path"]
    second = run(tmp_path)
    assert second["compiled"] == [0, 0] and not second["saved"]  # nothing new to write
    assert second["ours"] == first["ours"] == second["other"] == second["reference"]


def test_a_changed_class_is_compiled_again(tmp_path: Path) -> None:
    """The memo is keyed by each method's source: a field more in ``Rule`` is new source for
    its methods, compiled again, while ``State``'s are reused; the same classes in another
    module of ours reuse them all (the source names no module: the values it needs, the
    defaults and the types, are passed to it)."""
    run(tmp_path)
    changed = run(tmp_path, extra="    note: str = ''")
    assert 4 <= changed["compiled"][0] < run(tmp_path / "fresh")["compiled"][0]
    assert changed["ours"] == changed["other"]
    assert run(tmp_path, "storage.probe")["compiled"] == [0, 0]


def test_a_damaged_memo_is_ignored_and_rewritten(tmp_path: Path) -> None:
    path = Path(run(tmp_path)["path"])
    for damage in (b"", b"garbage", path.read_bytes()[:40], b"\x00" * 100):
        path.write_bytes(damage)
        result = run(tmp_path)
        assert result["compiled"][0] >= 8 and result["saved"]
        assert result["ours"] == result["other"]
    assert run(tmp_path)["compiled"] == [0, 0]


def test_nothing_is_written_where_bytecode_is_not(tmp_path: Path) -> None:
    """``PYTHONDONTWRITEBYTECODE``: no memo written at the exit, as no ``.pyc`` is;
    ``save(force=True)`` writes it, as ``compileall`` writes bytecode."""
    result = run(tmp_path, bytecode=False)
    assert not result["saved"] and not Path(result["path"]).exists()
    forced = run(tmp_path, bytecode=False, force=True)
    assert forced["saved"] and Path(forced["path"]).is_file()
    assert run(tmp_path, bytecode=False)["compiled"] == [0, 0]


def test_no_damage_to_the_memo_stops_an_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes changed anywhere in a memo (a disk error, a half-written copy) read as no memo,
    or as what survived: ``marshal`` raises ``SystemError`` on some of them, which must not
    reach the first dataclass of an ``import crawler``."""
    path = tmp_path / "memo.methods"
    monkeypatch.setattr(dataclass_cache, "cache_path", lambda: str(path))
    codes = {f"def f{i}(): return {i}": compile(f"def f{i}(): return {i}", "<string>", "exec")
             for i in range(20)}  # fmt: skip
    good = dataclass_cache._HEADER + marshal.dumps(codes)
    path.write_bytes(good)
    assert dataclass_cache._read().keys() == codes.keys()
    damage = random.Random(44)
    for _ in range(300):
        data = bytearray(good)
        for _ in range(damage.randint(1, 4)):
            data[damage.randrange(len(dataclass_cache._HEADER), len(data))] = damage.randrange(256)
        path.write_bytes(bytes(data))
        read = dataclass_cache._read()
        assert isinstance(read, dict) and all(isinstance(v, CodeType) for v in read.values())


def test_a_memo_grown_past_its_cap_keeps_what_was_used(tmp_path: Path) -> None:
    """Old classes' methods pile up in a developer's tree; past ``MAX_ENTRIES`` a process
    that writes keeps only what it used, so each start does not read them all."""
    path = Path(run(tmp_path)["path"])
    data = path.read_bytes()[len(dataclass_cache._HEADER) :]
    codes = marshal.loads(data)
    used = set(codes)
    for i in range(dataclass_cache.MAX_ENTRIES):
        source = f"def old{i}(): return {i}"
        codes[source] = compile(source, "<string>", "exec")
    path.write_bytes(dataclass_cache._HEADER + marshal.dumps(codes))
    changed = run(tmp_path, extra="    note: str = ''")
    assert changed["saved"] and changed["compiled"][0] >= 4
    kept = marshal.loads(path.read_bytes()[len(dataclass_cache._HEADER) :])
    assert not any(source.startswith("def old") for source in kept)
    # the same methods, Rule's in their new version: State's reused, none of the old ones
    assert len(kept) == len(used) and kept.keys() != used
