"""The SQLite store's multi-row writes (``storage.sqlite.sql.Rows``): the same rows as one
statement step per row, on real database files."""

from __future__ import annotations

import _sqlite3
import asyncio
import contextlib
import ctypes
import random
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from storage.base import PageRecord, SkipRecord, UrlRecord
from storage.sqlite import SQLiteStore
from storage.sqlite.sql import (
    FETCHED_URL,
    NEW_URL,
    SKIPPED_URL,
    TOUCH_PAGE_ONE,
    UPSERT_PAGE,
    Rows,
    touch_statements,
)
from storage.sqlite.store import _in_transaction

STAMP = "2026-11-30T10:00:00+00:00"


@asynccontextmanager
async def _run(path: Path) -> AsyncIterator[tuple[SQLiteStore, int]]:
    """An open store on ``path`` and a run recorded in it."""
    store = SQLiteStore(str(path))
    await store.open()
    try:
        yield store, await store.start_run(1, "{}", STAMP)
    finally:
        await store.close()


_opened: list[sqlite3.Connection] = []


@pytest.fixture(autouse=True)
def _close_schemas() -> Iterator[None]:
    """Close what ``_schema`` opened (a connection left to the garbage collector warns)."""
    yield
    while _opened:
        _opened.pop().close()


def _schema(path: Path) -> sqlite3.Connection:
    async def create() -> None:
        async with _run(path):
            pass

    asyncio.run(create())
    connection = sqlite3.connect(path, isolation_level=None)
    _opened.append(connection)
    return connection


def _dump(connection: sqlite3.Connection) -> tuple[list[tuple], list[tuple]]:
    urls = connection.execute("SELECT * FROM urls ORDER BY id").fetchall()
    pages = connection.execute("SELECT * FROM pages ORDER BY id").fetchall()
    return urls, pages


def _batch(rng: random.Random, size: int) -> dict[Rows, list[tuple]]:
    """Rows of one batch, drawn from a small URL space: repeats within a batch and across
    batches (a URL queued then skipped, a page written twice) are the cases that matter."""

    def urls(count: int) -> list[str]:
        return [f"http://h{rng.randrange(3)}.test/p{rng.randrange(400)}" for _ in range(count)]

    pages = [
        (u, u, 200, None, "text/html", f"t{i}", "text " * rng.randrange(3), None, None, None,
         rng.randrange(5), 10, f"h{rng.randrange(3)}", STAMP, 1, "[]", 1, None, rng.random(),
         bytes([i % 256]), rng.randrange(-(1 << 63), 1 << 63), None, None, None, None, None,
         None, STAMP)
        for i, u in enumerate(urls(size))
    ]  # fmt: skip
    new = [(u, "o", None, rng.randrange(5), rng.random(), STAMP, 1) for u in urls(size)]
    skipped = [(u, "o", 2, rng.choice(["scope", "trap"]), STAMP, 1) for u in urls(size * 2)]
    fetched = [(p[0], "o", "done", p[10], 1, 1.0, 2.0, STAMP, 1) for p in pages]
    return {NEW_URL: new, UPSERT_PAGE: pages, FETCHED_URL: fetched, SKIPPED_URL: skipped}


@pytest.mark.parametrize("size", [1, 7, 35, 36, 129, 300])
def test_multi_row_writes_equal_one_row_statements(tmp_path: Path, size: int) -> None:
    many = _schema(tmp_path / "many.db")
    single = _schema(tmp_path / "single.db")
    rng = random.Random(size)
    for _ in range(3):
        batch = _batch(rng, size)
        for connection, multi in ((many, True), (single, False)):
            connection.execute("BEGIN IMMEDIATE")
            for insert, rows in batch.items():
                if multi:
                    for sql, parameters in insert.statements(rows):
                        connection.executemany(sql, parameters)
                else:
                    connection.executemany(insert.sql(1), rows)
            connection.execute("COMMIT")
    assert _dump(many) == _dump(single)
    assert len(_dump(many)[0]) > size  # something was written


@pytest.mark.parametrize("size", [5, 40, 300])
def test_touching_unchanged_pages_equals_one_row_updates(tmp_path: Path, size: int) -> None:
    """A recrawl's unchanged pages: validators kept when the new ones are missing, URLs not
    stored left alone, a repeated URL applied in order."""
    many = _schema(tmp_path / "many.db")
    single = _schema(tmp_path / "single.db")
    rng = random.Random(size)
    pages = _batch(rng, 400)[UPSERT_PAGE]
    urls = sorted({p[0] for p in pages} | {"http://nowhere.test/x"})
    later = "2026-12-01T00:00:00+00:00"
    touched = [
        (later, 2, rng.randrange(1, 4), rng.choice([None, '"e"']), rng.choice([None, "lm"]), u)
        for u in rng.sample(urls, min(size, len(urls)))
    ]
    repeated = [*touched[:3], *touched[:3]]
    for rows in (touched, repeated):
        for connection, multi in ((many, True), (single, False)):
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(UPSERT_PAGE.sql(1), pages)
            for sql, parameters in touch_statements(rows) if multi else [(TOUCH_PAGE_ONE, rows)]:
                connection.executemany(sql, parameters)
            connection.execute("COMMIT")
        assert _dump(many) == _dump(single)
    assert len(touch_statements(touched)) <= 3  # not a statement a row
    assert touch_statements(repeated) == [(TOUCH_PAGE_ONE, repeated)]


def test_chunks_stay_within_the_smallest_parameter_limit() -> None:
    for insert in (NEW_URL, UPSERT_PAGE, FETCHED_URL, SKIPPED_URL):
        assert insert.chunk * insert.width <= 999
        rows = [tuple(range(insert.width))] * (insert.chunk * 2 + 3)
        statements = insert.statements(rows)
        assert [len(parameters) for _, parameters in statements] == [2, 1]
        assert all(len(p) == sql.count("?") for sql, parameters in statements for p in parameters)
        assert insert.statements([]) == []


def test_big_pages_are_written_a_few_to_a_statement(tmp_path: Path) -> None:
    """SQLite copies every bound value: a chunk of pages holds at most ``max_bytes`` of
    text and bodies (a 3 MB page goes alone), and the rows still land in order."""
    big, small = "x" * (3 << 20), "y"
    rows = [
        (f"http://a.test/{i}", f"http://a.test/{i}", 200, None, "text/html", "t",
         big if i % 3 == 0 else small, None, None, None, 1, 10, "h", STAMP, 1, "[]", 1,
         None, None, None, None, None, None, None, None, None, None, STAMP)
        for i in range(12)
    ]  # fmt: skip
    statements = UPSERT_PAGE.statements(rows)
    sizes = [sql.count("(?,") for sql, parameters in statements for _ in parameters]
    assert sum(sizes) == 12 and len(sizes) > 1
    for _sql, parameters in statements:
        for flat in parameters:
            texts = flat[6 :: UPSERT_PAGE.width]
            assert len(texts) == 1 or sum(map(len, texts)) <= UPSERT_PAGE.max_bytes
    connection = _schema(tmp_path / "big.db")
    connection.execute("BEGIN IMMEDIATE")
    for sql, parameters in statements:
        connection.executemany(sql, parameters)
    connection.execute("COMMIT")
    stored = connection.execute("SELECT url, length(text) FROM pages ORDER BY id").fetchall()
    assert stored == [(row[0], len(row[6])) for row in rows]


def _sqlite_memory_used() -> Callable[[], int] | None:
    """SQLite's ``sqlite3_memory_used``, from the library the ``sqlite3`` module runs on."""
    try:
        library = ctypes.CDLL(_sqlite3.__file__)  # its symbols, and its dependencies'
        used = library.sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    used.restype = ctypes.c_int64
    return used


@pytest.mark.parametrize("unbind", [True, False])
def test_written_pages_are_not_kept_by_the_cached_statement(tmp_path: Path, unbind: bool) -> None:
    """SQLite keeps a copy of every value bound to a statement until it is bound again, and
    the statement stays in Python's cache: without ``unbinding`` the last chunk's 6 MB of
    text stay in memory after the commit; with it, they do not, nothing more is written,
    and the statement still works."""
    used = _sqlite_memory_used()
    if used is None:
        pytest.skip("no sqlite3_memory_used in this sqlite3 module's library")
    rows = [
        (f"http://a.test/{i}", f"http://a.test/{i}", 200, None, "text/html", "t", "x" * (2 << 20),
         None, None, None, 1, 10, "h", STAMP, 1, "[]", 1, None, None, None, None, None, None,
         None, None, None, None, STAMP)
        for i in range(3)
    ]  # fmt: skip
    connection = _schema(tmp_path / "unbind.db")
    connection.execute("PRAGMA cache_size=-256")  # a page cache too small to hide the values
    statements = UPSERT_PAGE.statements(rows)
    before = used()
    _in_transaction(connection, statements, UPSERT_PAGE.unbinding(statements) if unbind else [])
    kept = used() - before
    assert connection.execute("SELECT count(*) FROM pages").fetchone() == (3,)
    if unbind:
        assert kept < 1 << 20
        changed = [*rows[:2], (*rows[2][:6], "z", *rows[2][7:])]
        _in_transaction(connection, UPSERT_PAGE.statements(changed))
        stored = connection.execute("SELECT count(*), sum(length(text)) FROM pages").fetchone()
        assert stored == (3, 2 * (2 << 20) + 1)
    else:
        assert kept > 5 << 20  # what the test is about: the copies stay without it


def test_unbinding_only_weighed_statements_once_each() -> None:
    rows = [tuple(range(NEW_URL.width))] * 3
    assert NEW_URL.unbinding(NEW_URL.statements(rows)) == []
    page = (None,) * UPSERT_PAGE.width
    statements = UPSERT_PAGE.statements([page] * (UPSERT_PAGE.chunk * 2 + 3))
    unbind = UPSERT_PAGE.unbinding(statements)
    assert [sql for sql, _ in unbind] == [sql for sql, _ in statements]  # 2 sizes: 2 entries
    assert all(nulls == (None,) * sql.count("?") for sql, nulls in unbind)


@pytest.mark.parametrize("one_hop", [True, False])
def test_store_save_writes_a_large_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_hop: bool
) -> None:
    """Through ``SQLiteStore.save``: pages, new URLs and skips past a chunk's size, in one
    hop to the connection's thread and, as without aiosqlite's private queue, statement by
    statement."""
    monkeypatch.setattr("storage.sqlite.store._ONE_HOP", one_hop)
    path = tmp_path / "store.db"

    async def scenario() -> None:
        async with _run(path) as (store, run_id):
            pages = [
                PageRecord(url=f"http://a.test/{i}", final_url=f"http://a.test/{i}", status=200,
                           error=None, content_type="text/html", depth=1, body_bytes=10,
                           fetched_at=STAMP, title=f"t{i}", text="x")
                for i in range(300)
            ]  # fmt: skip
            found = [UrlRecord(f"http://a.test/new{i}", 2, 0.0, True, STAMP) for i in range(300)]
            skips = [SkipRecord(f"http://b.test/{i}", "scope", 2, STAMP) for i in range(500)]
            await store.save(pages, found, skips, run_id)

    asyncio.run(scenario())
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        states = dict(connection.execute("SELECT state, count(*) FROM urls GROUP BY state"))
        titles = connection.execute("SELECT count(*), count(DISTINCT title) FROM pages")
        assert states == {"done": 300, "queued": 300, "skipped": 500}
        assert titles.fetchone() == (300, 300)


def test_claim_leases_more_ids_than_one_update_holds(tmp_path: Path) -> None:
    path = tmp_path / "claim.db"

    async def scenario() -> int:
        async with _run(path) as (store, run_id):
            found = [UrlRecord(f"http://a.test/{i}", 1, float(i % 7), False, STAMP)
                     for i in range(2500)]  # fmt: skip
            await store.save([], found, [], run_id)
            claimed = await store.claim(run_id, 2100, 0.0)
            assert len({q.url for q in claimed}) == 2100
            assert [q.priority for q in claimed] == sorted(
                (q.priority for q in claimed), reverse=True
            )
            return run_id

    run_id = asyncio.run(scenario())
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        leases = dict(connection.execute("SELECT lease, count(*) FROM urls GROUP BY lease"))
    assert leases == {run_id: 2100, None: 400}


def test_connection_settings(tmp_path: Path) -> None:
    """What a crawl's writes rely on: WAL with NORMAL sync (a committed batch survives
    ``kill -9``), foreign keys on, and statement journals in memory (a multi-row upsert's
    journal would otherwise spill to a temp file past 64 KiB: 353 MB of writes a
    10,000-page crawl)."""

    async def scenario() -> list[object]:
        async with _run(tmp_path / "store.db") as (store, _):
            values = []
            for pragma in ("journal_mode", "synchronous", "foreign_keys", "temp_store"):
                async with store.db.execute(f"PRAGMA {pragma}") as cursor:
                    values.append((await cursor.fetchone())[0])  # type: ignore[index]
            return values

    assert asyncio.run(scenario()) == ["wal", 1, 1, 2]
