"""``parsers.aot``: the parse kernels compiled ahead of time equal numba's JIT, result for
result; a worker with the module runs without numba; a missing, disabled or unbuildable
module leaves the JIT in charge.

The module is built once for the session (~5 s, numba's ``pycc`` and the machine's C
compiler) into a folder of its own, never where the package would keep it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import aot, aot_build, native
from parsers.hrefs import _resolve_all
from parsers.links import Resolver, resolve_url
from parsers.tokens import _FOLD, _page_terms
from tests.parsers.test_links import _HREF, _RESOLVER_BASES
from tests.proc import child_env
from tests.sites import PageSite, SiteServer


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the module built for this source."""
    if shutil.which("cc") is None and shutil.which("gcc") is None and not os.environ.get("CI"):
        pytest.skip("no C compiler here (CI has one)")
    folder = tmp_path_factory.mktemp("kernels")
    path = aot_build.build(folder)
    assert path.parent == folder and path.name.startswith(aot.module_name())
    return folder


@pytest.fixture(scope="session")
def module(built: Path) -> ModuleType:
    (path,) = built.glob(aot.module_name() + ".*")
    loaded = aot.load_file(path)
    assert loaded is not None
    return loaded


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x, y) and x.dtype == y.dtype
        if isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
        else x == y
        for x, y in zip(a, b, strict=True)
    )


_TEXT = st.lists(
    st.sampled_from([*"ab AB 09 .,-\n\t\u00e9\u4e2d\U0001f600\ud800", "word", "Word", "x1"]),
    max_size=300,
).map("".join)


_KEY = st.integers(0, 2**64 - 1).map(np.uint64)


@settings(deadline=None, max_examples=200)
@given(_TEXT, st.lists(st.integers(0, 2**32 - 1), max_size=4), st.sampled_from([0, 1, 5, 4096]),
       _KEY, _KEY)  # fmt: skip
def test_page_terms_equal_the_jit(
    module: ModuleType,
    text: str,
    query: list[int],
    max_tokens: int,
    key: np.uint64,
    other_key: np.uint64,
) -> None:
    """The blob (token ids, counts, length), SimHash and query counts: all equal, for any
    text (non-ASCII, lone surrogates), any query and any SimHash window, whatever the
    counting table's key (each side has its own)."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    wanted = np.array(query, dtype=np.uint32)
    results = []
    for kernel, table_key in ((module.page_terms, key), (_page_terms, other_key)):
        out = np.full(4 * data.size + 64, 0xAA, dtype=np.uint8)
        found = np.full(wanted.size, 7, dtype=np.uint32)
        size, total, simhash = kernel(data, _FOLD, max_tokens, wanted, table_key, out, found)
        assert 0 < size <= out.size
        results.append((out[:size].tobytes(), total, simhash, found.tolist()))
    assert results[0] == results[1]


@settings(deadline=None, max_examples=200)
@given(st.sampled_from(_RESOLVER_BASES), st.lists(_HREF, min_size=1, max_size=12))
def test_resolve_all_equals_the_jit(module: ModuleType, base: str, hrefs: list[str]) -> None:
    resolver = Resolver(base)
    if resolver.origin is None:
        return  # the kernel is not asked for such a base
    joined = "\n".join(hrefs)
    if joined.count("\n") != len(hrefs) - 1:
        return  # resolve_all does not ask the kernel either
    context = np.frombuffer(
        f"{resolver.origin}{resolver.directory}{base}".encode("ascii"), np.uint8
    )
    buf = np.frombuffer(joined.encode("utf-8", "surrogatepass"), np.uint8)
    args = (buf, len(hrefs), context, len(resolver.origin), len(resolver.directory))
    assert _same(module.resolve_all(*args), _resolve_all(*args))


def test_native_calls_run_in_the_module(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``parsers.native`` binds to the module when it loads, and its results are ada's."""
    monkeypatch.setenv(aot.FOLDER_ENV, str(built))
    monkeypatch.delenv(aot.NO_AOT_ENV, raising=False)
    native._kernels.clear()
    try:
        assert native.backend() == "aot"
        base = "http://example.com/a/b/c.html"
        hrefs = ["../x#f", "/y?q=1", "mailto:a@b", "HTTP://Up.org/", "d%7e"]
        assert native.resolve_all(Resolver(base), hrefs) == [resolve_url(base, h) for h in hrefs]
        terms = native.page_terms("Word word WORD x1", (1, 2))
        assert terms.length == 4 and terms.query_tf == (0, 0)
    finally:
        native._kernels.clear()


def test_a_worker_with_the_module_never_imports_numba(built: Path) -> None:
    """The worker's whole path (the fork server's preload, a page parsed) without numba,
    and its page equal, field for field, to the one the JIT parses in another interpreter."""
    script = (
        "import json, sys\n"
        "import parsers.preload\n"
        "from parsers import native\n"
        "from parsers.page import ParseJob\n"
        "from parsers.worker import parse_batch\n"
        "from parsers.terms import query_token_ids\n"
        "body = b'<title>T</title><p>Event loops, event loops.</p>'"
        ' b\'<a href="../a.html#x">a</a><a href="mailto:m@x">m</a><a href="/b?c=1">b</a>\'\n'
        "url = 'http://h.example/d/e/p.html'\n"
        "job = ParseJob(url, url, 200, 'text/html', None, body,"
        " query_terms=('event',), query_ids=query_token_ids('event'))\n"
        "page = parse_batch([job])[0]\n"
        "print(json.dumps({'backend': native.backend(), 'numba': 'numba' in sys.modules,"
        " 'links': page.follow, 'json': page.links_json, 'tokens': page.tokens.hex(), 'simhash': page.simhash,"
        " 'tf': page.query_tf, 'text': page.text}))\n"
    )
    runs = {}
    for name, extra in (("aot", {aot.FOLDER_ENV: str(built)}), ("jit", {aot.NO_AOT_ENV: "1"})):
        env = child_env(drop=(aot.NO_AOT_ENV, aot.FOLDER_ENV), **extra)
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=120, check=True)  # fmt: skip
        runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
    aot_run, jit_run = runs["aot"], runs["jit"]
    assert aot_run.pop("backend") == "aot" and aot_run.pop("numba") is False
    assert jit_run.pop("backend") == "jit" and jit_run.pop("numba") is True
    assert aot_run == jit_run
    assert aot_run["links"] == ["http://h.example/d/a.html", "http://h.example/b?c=1"]
    assert aot_run["tf"] == [2]


def test_no_module_disabled_or_elsewhere(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(aot.FOLDER_ENV, str(tmp_path))  # an empty folder
    assert aot.find() is None and aot.load() is None and aot.wanted()
    monkeypatch.setenv(aot.FOLDER_ENV, str(built))
    assert aot.find() is not None and not aot.wanted()
    monkeypatch.setenv(aot.NO_AOT_ENV, "1")
    assert aot.load() is None and not aot.wanted()


def test_the_name_follows_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit of a kernel's source names another module: a stale one is never loaded."""
    copy = tmp_path / "parsers"
    shutil.copytree(aot._PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(aot, "_PACKAGE", copy)
    before = aot.module_name()
    assert before == aot.module_name()
    with (copy / "tokens.py").open("a") as source:
        source.write("\n# an edit\n")
    assert aot.module_name() != before


def test_a_failed_build_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No compiler: ``ensure_built`` answers ``None`` (the JIT goes on) and leaves a note,
    so that the next crawl's end starts no warmer for a build that cannot succeed."""
    monkeypatch.setenv(aot.FOLDER_ENV, str(tmp_path))
    monkeypatch.delenv(aot.NO_AOT_ENV, raising=False)

    def no_compiler(folder: Path | None = None) -> Path:
        raise RuntimeError("unable to find a C compiler")

    monkeypatch.setattr(aot_build, "build", no_compiler)
    assert aot.wanted()
    assert aot_build.ensure_built() is None
    assert not aot.wanted()
    assert "C compiler" in (tmp_path / (aot.module_name() + ".failed")).read_text()


def test_a_crawl_stores_the_same_pages_either_way(built: Path, tmp_path: Path) -> None:
    """A whole crawl (fork server, workers, the store) with the module and with the JIT:
    the same pages, token blobs, SimHashes and outlinks (the scores depend on the order
    pages came in)."""
    site = PageSite(40, links=4)
    stored = {}
    with SiteServer() as server:
        site.serve(server)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(server.url + "/\n")
        for name, extra in (("aot", {aot.FOLDER_ENV: str(built)}), ("jit", {aot.NO_AOT_ENV: "1"})):
            db = tmp_path / f"{name}.db"
            env = child_env(drop=(aot.NO_AOT_ENV, aot.FOLDER_ENV), **extra)
            crawl = [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), "--delay", "0",
                     "--per-host", "8", "--workers", "2", "--query", "page link", "--no-progress"]  # fmt: skip
            done = subprocess.run(crawl, env=env, capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, done.stderr
            with contextlib.closing(sqlite3.connect(db)) as connection:
                stored[name] = connection.execute(
                    "SELECT url, title, tokens, simhash, outlinks FROM pages ORDER BY url"
                ).fetchall()
    assert len(stored["aot"]) == 40
    assert stored["aot"] == stored["jit"]


def test_a_build_keeps_the_newest_modules_only(tmp_path: Path) -> None:
    """A folder keeps the newest ``KEEP`` modules (and failure notes): older sources' go."""
    for age in range(aot_build.KEEP + 2):
        old = tmp_path / f"_parse_kernels_{age:020x}.so"
        old.write_bytes(b"")
        os.utime(old, (1_000_000 + age, 1_000_000 + age))
    aot_build._prune(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f"_parse_kernels_{age:020x}.so" for age in range(2, aot_build.KEEP + 2)]
