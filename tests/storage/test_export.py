"""``crawl export --format csv|jsonl``: CSV-injection guarding and URLs without userinfo, on
real SQLite databases (written through ``SQLiteStore`` or by a crawl of a local site)."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from crawler.cli import main
from parsers.links import strip_userinfo
from storage.base import PageRecord, RunSummary
from storage.export import EXPORT_COLUMNS
from storage.sqlite import SQLiteStore
from tests.sites import SiteServer, html_handler

STAMP = "2026-11-30T10:00:00+00:00"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
TEXT_COLUMNS = ("url", "final_url", "error", "content_type", "title", "text", "lang",
                "canonical", "meta_robots", "duplicate_of", "near_duplicate_of")  # fmt: skip
NUMBERS = {"status": "200", "depth": "3", "body_bytes": "1234", "attempts": "2", "score": "-1.5"}
PASSWORD = "s3cr3t-pw"
FAST = ["--concurrency", "4", "--per-host", "4", "--delay", "0", "--workers", "1",
        "--no-sitemaps", "--no-progress"]  # fmt: skip


def formula_page(index: int, start: str) -> PageRecord:
    """A page whose every text column starts with ``start`` (as an old database, or a hostile
    site, could give); ``extract`` is JSON text that starts with it where JSON allows."""
    cell = f'{start}HYPERLINK("http://evil.test/?{index}","x")'
    return PageRecord(
        url=f"{cell}url{index}", final_url=f"{cell}final{index}", status=200,
        error=f"{cell}error", content_type=f"{cell}type", depth=3, body_bytes=1234,
        fetched_at=STAMP, title=f"{cell}title", text=f"{cell}text", lang=f"{cell}lang",
        canonical=f"{cell}canonical", meta_robots=f"{cell}robots", attempts=2,
        duplicate_of=f"{cell}dup", near_duplicate_of=f"{cell}near", score=-1.5,
        extract="-1" if start == "-" else '{"price": "=1+1"}',
    )  # fmt: skip


def credentials_page() -> PageRecord:
    """A page of a ``http://user:password@host/`` seed, as an older crawler stored it."""
    url = f"http://user:{PASSWORD}@127.0.0.1:9/a@b?q=x@y#f@g"
    return PageRecord(
        url=url, final_url=f"http://user:{PASSWORD}@127.0.0.1:9/final", status=200,
        error=None, content_type="text/html", depth=0, body_bytes=10, fetched_at=STAMP,
        title="Plain title", text="-5 degrees", canonical=f"http://user:{PASSWORD}@127.0.0.1:9/c",
        duplicate_of=f"https://:{PASSWORD}@127.0.0.1:9/orig", score=0.25,
    )  # fmt: skip


def write_db(path: Path, pages: list[PageRecord]) -> str:
    """A crawl database at ``path`` holding ``pages``, written through the store's API."""

    async def write() -> None:
        store = SQLiteStore(str(path))
        await store.open()
        try:
            run_id = await store.start_run(1, "{}", STAMP)
            await store.save(pages, [], [], run_id)
            await store.finish_run(run_id, RunSummary("finished", "done", len(pages), 0, 0), STAMP)
        finally:
            await store.close()

    asyncio.run(write())
    return str(path)


@pytest.fixture
def formula_db(tmp_path: Path) -> str:
    pages = [formula_page(i, start) for i, start in enumerate(FORMULA_STARTS)]
    return write_db(tmp_path / "formulas.db", [*pages, credentials_page()])


def export_csv(db: str, out: Path, *flags: str) -> list[dict[str, str]]:
    """``crawl export DB --format csv -o OUT``, read back with the csv module."""
    result = CliRunner().invoke(main, ["export", db, "--format", "csv", "-o", str(out), *flags])
    assert result.exit_code == 0, result.output
    with open(out, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == EXPORT_COLUMNS
        return list(reader)


def test_csv_cells_that_would_be_formulas_get_a_quote(formula_db: str, tmp_path: Path) -> None:
    rows = export_csv(formula_db, tmp_path / "pages.csv")
    assert len(rows) == len(FORMULA_STARTS) + 1
    for index, (start, row) in enumerate(zip(FORMULA_STARTS, rows, strict=False)):
        stored = formula_page(index, start)
        for column in TEXT_COLUMNS:
            assert row[column] == "'" + getattr(stored, column), (start, column)
        assert row["extract"] == ("'-1" if start == "-" else '{"price": "=1+1"}')
        for column, number in NUMBERS.items():  # numbers stay numbers, negative ones too
            assert row[column] == number, (start, column)
        assert row["fetched_at"] == STAMP
    plain = rows[-1]
    assert plain["title"] == "Plain title" and plain["score"] == "0.25"
    assert plain["text"] == "'-5 degrees"  # text, not a number: neutralised as well


def test_raw_cells_writes_them_as_stored(formula_db: str, tmp_path: Path) -> None:
    rows = export_csv(formula_db, tmp_path / "raw.csv", "--raw-cells")
    for index, (start, row) in enumerate(zip(FORMULA_STARTS, rows, strict=False)):
        stored = formula_page(index, start)
        for column in TEXT_COLUMNS:
            assert row[column] == getattr(stored, column), (start, column)
        assert row["extract"] == stored.extract
        for column, number in NUMBERS.items():
            assert row[column] == number
    assert rows[-1]["text"] == "-5 degrees"


def test_jsonl_is_written_as_stored(formula_db: str) -> None:
    result = CliRunner().invoke(main, ["export", formula_db, "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    for index, (start, record) in enumerate(zip(FORMULA_STARTS, records, strict=False)):
        stored = formula_page(index, start)
        assert record["title"] == stored.title and record["url"] == stored.url
        assert record["score"] == -1.5 and record["status"] == 200
    assert records[0]["extract"] == {"price": "=1+1"}
    assert records[FORMULA_STARTS.index("-")]["extract"] == -1


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_no_password_reaches_an_export(formula_db: str, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"pages.{fmt}"
    result = CliRunner().invoke(main, ["export", formula_db, "--format", fmt, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert PASSWORD not in out.read_text(encoding="utf-8")
    if fmt == "csv":
        record: dict[str, object] = export_csv(formula_db, tmp_path / "again.csv")[-1]
    else:
        record = json.loads(out.read_text(encoding="utf-8").splitlines()[-1])
    # only the authority's userinfo goes: the @ in the path, query and fragment stay
    assert record["url"] == "http://127.0.0.1:9/a@b?q=x@y#f@g"
    assert record["final_url"] == "http://127.0.0.1:9/final"
    assert record["canonical"] == "http://127.0.0.1:9/c"
    assert record["duplicate_of"] == "https://127.0.0.1:9/orig"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:pw@host/x", "http://host/x"),
        ("https://user:p@ss@host:8443", "https://host:8443"),
        ("http://user@host?next=a@b", "http://host?next=a@b"),
        ("http://host#me@there", "http://host#me@there"),
        ("http://host/path/@user", "http://host/path/@user"),
        ("HTTP://u:p@HOST/", "HTTP://HOST/"),
        ("mailto:someone@example.com", "mailto:someone@example.com"),
        ("=1+1@x", "=1+1@x"),
        ("://u:p@host/", "://u:p@host/"),
        ("", ""),
    ],
)
def test_strip_userinfo(url: str, expected: str) -> None:
    assert strip_userinfo(url) == expected


def test_crawled_page_exported_to_csv(tmp_path: Path) -> None:
    """End to end: a site's title and text that would be formulas, through a real crawl."""
    with SiteServer() as site:
        site.routes = {"/": html_handler("<title>=SUM(1+1)*cmd|' /C calc'!A0</title>"
                                         "<p>@import the rest</p>")}  # fmt: skip
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(site.url + "/\n")
        db = str(tmp_path / "crawled.db")
        result = CliRunner().invoke(main, [str(seeds), "--db", db, *FAST])
        assert result.exit_code == 0, result.output
    (row,) = export_csv(db, tmp_path / "crawled.csv")
    assert row["title"] == "'=SUM(1+1)*cmd|' /C calc'!A0"
    assert row["text"] == "'@import the rest"
    assert row["status"] == "200" and row["depth"] == "0"
    assert row["url"] == site.url + "/"
    (raw,) = export_csv(db, tmp_path / "crawled-raw.csv", "--raw-cells")
    assert raw["title"] == "=SUM(1+1)*cmd|' /C calc'!A0" and raw["text"] == "@import the rest"


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a folder, the same folder mounted read-only): a bind mount, where this process may
    make one (root with CAP_SYS_ADMIN); skipped elsewhere."""
    source, mounted = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    mounted.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("needs root and mount(8) for a read-only bind mount")
    made = subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {made.stderr.decode(errors='replace').strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        yield source, mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=False)


def test_a_database_on_a_read_only_disk_is_read(read_only_mount: tuple[Path, Path]) -> None:
    """A crawl's database copied to a read-only mount, its WAL checkpointed away: SQLite
    cannot make the -shm file a WAL reader needs, so the file is read as immutable."""
    source, mounted = read_only_mount
    db = write_db(source / "c.db", [credentials_page()])
    assert not Path(db + "-wal").exists()  # the last connection's close checkpoints it
    result = CliRunner().invoke(main, ["export", str(mounted / "c.db")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["title"] == "Plain title"
