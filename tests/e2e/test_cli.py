"""The ``crawl`` command: through click's CliRunner and as a real subprocess."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from crawler.cli import main
from storage.schema import MIGRATIONS_TABLE
from tests.proc import child_env
from tests.sites import SiteServer, html_handler, make_certificate, server_tls

FAST = ["--concurrency", "16", "--per-host", "8", "--delay", "0", "--workers", "1", "--no-sitemaps"]


@pytest.fixture
def small_site() -> SiteServer:
    with SiteServer() as site:
        site.routes = {"/": html_handler('<title>Home</title><a href="/a">a</a><a href="/b">b</a>')}
        site.fallback = html_handler("<title>Leaf</title><p>leaf text</p>")
        yield site


def seeds_file(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "seeds.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_help_documents_every_flag() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for flag in ("--db", "--max-pages", "--max-depth", "--concurrency", "--per-host", "--delay",
                 "--scope", "--include", "--exclude", "--user-agent", "--workers", "--config",
                 "--quiet", "--verbose", "--no-progress", "export", "runs", "Exit codes"):  # fmt: skip
        assert flag in result.output, flag


def test_crawl_then_export(tmp_path: Path, small_site: SiteServer) -> None:
    db = str(tmp_path / "x.db")
    runner = CliRunner()
    result = runner.invoke(main, [seeds_file(tmp_path, small_site.url), "--db", db, *FAST])
    assert result.exit_code == 0, result.output
    assert "3 pages ok" in result.output and "\x1b[" not in result.output
    result = runner.invoke(main, ["export", db, "--format", "jsonl"])
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["title"] for r in records) == ["Home", "Leaf", "Leaf"]
    assert {r["status"] for r in records} == {200}
    out = tmp_path / "pages.csv"
    result = runner.invoke(main, ["export", db, "--format", "csv", "-o", str(out)])
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 3 and rows[0]["url"] == small_site.url + "/"
    result = runner.invoke(main, ["runs", db])
    assert result.exit_code == 0 and "\tfinished\tdone\t3\t0\t" in result.output


def test_config_file_and_flags_win(tmp_path: Path, small_site: SiteServer) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(f'db = "{tmp_path / "from-config.db"}"\nmax-pages = 1\ndelay = 0\n')
    seeds = seeds_file(tmp_path, small_site.url)
    result = CliRunner().invoke(main, [seeds, "--config", str(config), "--max-pages", "2"])
    assert result.exit_code == 0, result.output
    with contextlib.closing(sqlite3.connect(tmp_path / "from-config.db")) as connection, connection:
        assert connection.execute("SELECT count(*) FROM pages").fetchone() == (2,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["SEEDS", "--concurrency", "0"], "--concurrency must be positive"),
        (["SEEDS", "--include", "("], "--include '(': invalid regex"),
        (["SEEDS", "--config", "missing.toml"], "missing.toml: cannot read config file"),
        (["nope.txt"], "nope.txt: seeds file not found"),
        (["BAD"], "bad.txt:2: not an absolute http(s) URL: 'example.com/page'"),
        (["export", "nope.db"], "nope.db: no such database"),
        (["SEEDS", "--db", ""], "--db: an empty name"),
        (["SEEDS", "--concurrency", "abc"], "'--concurrency': 'abc' is not a valid integer"),
        (["SEEDS", "--frobnicate"], "No such option '--frobnicate'. (see crawl --help)"),
        (["export"], "Missing argument 'DB'. (see crawl export --help)"),
        (["DIR"], "is a directory"),
        (["rank", "x.db", "--query", " "], "--query must not be empty"),
        (["export", "x.db", "--min-score", "nan"], "--min-score must be a finite number"),
        (["SEEDS", "--stats-json", "no/dir/s.json"], "--stats-json"),
        (["SEEDS", "--db", "DIR"], "cannot open database: it is a folder"),
        (["SEEDS", "--db", "JUNK"], "cannot open database: file is not a database"),
        (["SEEDS", "--db", "NEWER"], "is newer than this crawler"),
        (["SEEDS", "--db", "no/dir/x.db"], "cannot open database: folder"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    good = seeds_file(tmp_path, "http://127.0.0.1:9/")
    bad = tmp_path / "bad.txt"
    bad.write_text("# seeds\nexample.com/page\n")
    junk, newer = tmp_path / "junk.db", tmp_path / "newer.db"
    junk.write_bytes(b"not a database\n")
    with contextlib.closing(sqlite3.connect(newer)) as connection, connection:
        connection.execute(MIGRATIONS_TABLE)
        connection.execute("INSERT INTO schema_migrations VALUES (99, 'future', '2030')")
    named = {"SEEDS": good, "BAD": str(bad), "DIR": str(tmp_path), "JUNK": str(junk),
             "NEWER": str(newer), "no/dir/x.db": str(tmp_path / "no" / "dir" / "x.db"),
             "no/dir/s.json": str(tmp_path / "no" / "dir" / "s.json")}  # fmt: skip
    result = CliRunner().invoke(main, [named.get(a, a) for a in args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crawl: error: ") and message in lines[0]
    assert not (tmp_path / "no").exists() and not Path(f"{tmp_path}.lock").exists()


def test_unknown_flag_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [seeds_file(tmp_path, "http://a.com/"), "--frobnicate"])
    assert result.exit_code == 2 and "--frobnicate" in result.stderr


def _subprocess_env() -> dict[str, str]:
    return child_env()


def test_real_subprocess_and_python_m(tmp_path: Path, small_site: SiteServer) -> None:
    seeds = seeds_file(tmp_path, small_site.url + "/")
    db = str(tmp_path / "sub.db")
    done = subprocess.run([sys.executable, "-m", "crawler", seeds, "--db", db, *FAST],
                          capture_output=True, text=True, env=_subprocess_env(), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("crawl finished (done): 3 pages ok")
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        assert connection.execute("SELECT count(*) FROM pages").fetchone() == (3,)


def test_an_https_site_end_to_end(tmp_path: Path) -> None:
    """The real command over TLS: the certificate checked against the CAs the environment
    names (``SSL_CERT_FILE``, as OpenSSL reads it), and refused without them."""
    cert, key = make_certificate(tmp_path)
    with SiteServer(tls=server_tls(cert, key)) as site:
        site.routes = {"/": html_handler('<title>Home</title><a href="/a">a</a><a href="/b">b</a>')}
        site.fallback = html_handler("<title>Leaf</title><p>leaf text</p>")
        seeds = seeds_file(tmp_path, site.url + "/")
        for trusted, db in ((True, "trusted.db"), (False, "untrusted.db")):
            env = child_env(SSL_CERT_FILE=str(cert)) if trusted else child_env(("SSL_CERT_FILE",))
            done = subprocess.run([sys.executable, "-m", "crawler", seeds, "--db", str(tmp_path / db),
                                   *FAST], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
            with contextlib.closing(sqlite3.connect(tmp_path / db)) as connection, connection:
                pages = connection.execute("SELECT url, status FROM pages ORDER BY url").fetchall()
                urls = connection.execute("SELECT url, state, reason FROM urls").fetchall()
            assert done.returncode == 0, done.stderr
            if trusted:
                assert [(url[len(site.url) :], status) for url, status in pages] == [
                    ("/", 200), ("/a", 200), ("/b", 200)]  # fmt: skip
            else:  # robots.txt cannot be fetched: the origin is not crawled, and the log says why
                assert pages == [] and urls == [(site.url + "/", "skipped", "robots-unavailable")]
                assert "certificate verify failed" in done.stderr


@pytest.mark.parametrize(
    ("args", "crawls"),
    [
        (["seeds.txt"], True),
        (["crawl", "seeds.txt"], True),
        (["--db", "x.db", "seeds.txt"], True),
        (["seeds.txt", "--query", "export"], True),  # a flag's value, not a command
        ([], False),
        (["--help"], False),
        (["-h"], False),
        (["--version"], False),
        (["seeds.txt", "--help"], False),
        (["crawl", "--help"], False),
        (["export", "x.db"], False),
        (["rank", "x.db", "--query", "q"], False),
        (["runs", "x.db"], False),
        (["stats", "x.db"], False),
        (["serve", "x.db"], False),
    ],
)
def test_the_console_script_starts_the_fork_server_only_for_a_crawl(
    args: list[str], crawls: bool
) -> None:
    from crawler.cli.app import COMMANDS
    from crawler.cli.entry import _OTHER_COMMANDS
    from crawler.cli.entry import crawls as starts

    assert starts(args) is crawls
    assert set(COMMANDS) - {"crawl"} == _OTHER_COMMANDS  # every reading command is named


def test_reading_commands_start_no_fork_server(tmp_path: Path, small_site: SiteServer) -> None:
    """``crawl runs`` (like export, rank, --help) never parses: no fork server, no numba."""
    seeds = seeds_file(tmp_path, small_site.url + "/")
    db = str(tmp_path / "sub.db")
    env = _subprocess_env()
    crawl = subprocess.run([sys.executable, "-m", "crawler", seeds, "--db", db, *FAST],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr
    probe = (
        "import multiprocessing.forkserver as f, sys, runpy\n"
        "sys.argv = ['crawl', 'runs', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('crawler', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('forkserver', f._forkserver._forkserver_pid)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, db], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("forkserver None")
    assert done.stdout.startswith("id\tstarted_at")  # the runs table was printed


@pytest.mark.parametrize(("preset", "expected"), [(None, "1"), ("3", "3")])
def test_the_command_loads_numpy_with_one_blas_thread(preset: str | None, expected: str) -> None:
    """The command sets ``OPENBLAS_NUM_THREADS=1`` (unless the user set it) before numpy is
    imported: its OpenBLAS would start a thread per extra core that spins at start-up, in the
    command and in its fork server, and the crawl never calls BLAS."""
    probe = (
        "import os, sys, runpy\n"
        "sys.argv = ['crawl', '--version']\n"
        "try:\n"
        "    runpy.run_module('crawler', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "import numpy\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))\n"
    )
    env = _subprocess_env()
    env.pop("OPENBLAS_NUM_THREADS", None)
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    setting, threads = done.stdout.split()[-2:]
    assert setting == expected
    if preset is None and sys.platform.startswith("linux"):
        assert threads == "1"  # no BLAS thread (nor any other) after numpy's import


@pytest.mark.parametrize(
    ("code", "status", "stderr"), [("None", 0, ""), ("3", 3, ""), ("'bad input'", 1, "bad input")]
)
def test_exit_now_keeps_what_a_normal_exit_does(
    tmp_path: Path, code: str, status: int, stderr: str
) -> None:
    """A finished crawl skips the interpreter's teardown (``crawler.cli.entry.exit_now``), but not
    what a normal exit guarantees: threads joined, atexit handlers run, buffers flushed."""
    marker = tmp_path / "thread.txt"
    program = (
        "import atexit, sys, threading, time\n"
        "from crawler.cli.entry import exit_now\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        f"    open({str(marker)!r}, 'w').write('joined')\n"
        "threading.Thread(target=late).start()\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "sys.stdout.write('buffered ')\n"
        f"exit_now({code})\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=_subprocess_env(), timeout=60)  # fmt: skip
    assert done.returncode == status
    assert done.stdout == "buffered atexit ran\n"
    assert done.stderr.strip() == stderr
    assert marker.read_text() == "joined"


def test_exit_now_exits_normally_under_a_profiler() -> None:
    """``python -m cProfile -o FILE -m crawler ...`` writes FILE after the program returns:
    with a profiler (or a tracer, a debugger) attached the exit is the normal one."""
    program = (
        "import sys\n"
        "from crawler.cli.entry import exit_now\n"
        "sys.setprofile(lambda *args: None)\n"
        "try:\n"
        "    exit_now(4)\n"
        "except SystemExit as exc:\n"
        "    sys.setprofile(None)\n"
        "    print('normal exit', exc.code)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=_subprocess_env(), timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "normal exit 4\n")


def test_sigint_stops_cleanly(tmp_path: Path) -> None:
    links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(200))
    with SiteServer(latency_s=0.1) as site:
        site.routes = {"/": html_handler(links)}
        site.fallback = html_handler("<p>leaf</p>")
        seeds = seeds_file(tmp_path, site.url + "/")
        db = str(tmp_path / "int.db")
        proc = subprocess.Popen([sys.executable, "-m", "crawler", seeds, "--db", db, *FAST],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_subprocess_env())  # fmt: skip
        deadline = time.monotonic() + 60
        while len(site.hits) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        hits = len(site.hits)
    assert proc.returncode == 130, err
    assert "crawl interrupted (signal SIGINT)" in out
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        assert connection.execute("SELECT status, reason FROM runs").fetchone() == (
            "interrupted",
            "signal SIGINT",
        )
        stored = connection.execute("SELECT count(*) FROM pages").fetchone()[0]
    assert 0 < stored <= hits - 1 < 200  # requests in flight finished and were stored
