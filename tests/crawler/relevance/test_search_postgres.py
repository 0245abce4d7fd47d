"""The inverted index on PostgreSQL (``storage.postgres.search``): the same results and scores,
to the last bit, as the SQLite index on the same pages; kept up to date as pages change; a
page written while a catch-up runs is indexed the next time, never lost; a reader whose
segments another process merged away reads the new ones. A real server (``tests.pg``)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest

from crawler.relevance.ranking import CorpusIndex
from crawler.relevance.search import SearchIndex
from parsers.tokens import TokenCounts, encode_counts
from storage import segments
from storage.postgres.search import PostgresIndexTables
from tests.crawler.relevance.test_search import (
    indexed,
    make_db,
    put,
    queries_of,
    random_counts,
    ranked,
    reference,
)
from tests.pg import query, scalar


@pytest.fixture
def pg_dsn(pg_dsn: str) -> str:
    PostgresIndexTables(pg_dsn).close()  # the crawl schema, migrated as a crawl would
    return pg_dsn


def put_pg(dsn: str, pages: dict[int, TokenCounts | None]) -> None:
    """As ``test_search.put``: insert, or replace the tokens of, ``http://t.test/N``."""

    rows = [(f"http://t.test/{n}", f"page {n}", encode_counts(c) if c else None)
            for n, c in pages.items()]  # fmt: skip

    async def go() -> None:
        connection = await asyncpg.connect(dsn, timeout=5)
        try:
            await connection.executemany(
                "INSERT INTO pages (url, final_url, depth, fetched_at, title, tokens)"
                " VALUES ($1, $1, 0, '2026-01-01', $2, $3) ON CONFLICT (url) DO UPDATE SET"
                " tokens = excluded.tokens",
                rows,
            )
        finally:
            await connection.close()

    asyncio.run(go())


def on_both(sqlite: Path, dsn: str, pages: dict[int, TokenCounts | None]) -> None:
    put(sqlite, pages)
    put_pg(dsn, pages)


def assert_same(sqlite: Path, dsn: str, queries: list[list[int]], top: int = 20) -> None:
    index = SearchIndex(dsn)
    try:
        for words in queries:
            want = reference(sqlite, words, top)
            assert indexed(sqlite, words, top) == want
            assert ranked(index, words, top) == want, words  # urls, order, scores to the bit
    finally:
        index.close()


def test_the_postgres_index_ranks_as_sqlite_and_follows_changes(
    tmp_path: Path, pg_dsn: str
) -> None:
    rng = np.random.default_rng(17)
    sqlite = tmp_path / "same.db"
    make_db(sqlite)
    on_both(sqlite, pg_dsn, {n: random_counts(rng, int(rng.integers(20, 200))) for n in range(500)})
    queries = queries_of(rng)
    assert_same(sqlite, pg_dsn, queries)
    assert scalar(pg_dsn, "SELECT count(*) FROM search_segments") == 1
    assert scalar(pg_dsn, "SELECT count(*) FROM search_pending") == 0
    # recrawled pages change, some lose their tokens, one is deleted, new ones come
    on_both(sqlite, pg_dsn, {n: random_counts(rng, 50) for n in range(0, 500, 7)})
    on_both(sqlite, pg_dsn, {n: None for n in range(3, 500, 50)})
    on_both(sqlite, pg_dsn, {n: random_counts(rng, 90) for n in range(500, 580)})
    query(pg_dsn, "DELETE FROM pages WHERE url = 'http://t.test/5'")
    with sqlite3.connect(sqlite) as conn:
        conn.execute("DELETE FROM pages WHERE url = 'http://t.test/5'")
    assert scalar(pg_dsn, "SELECT count(*) FROM search_pending") > 80
    assert_same(sqlite, pg_dsn, queries)
    for round_ in range(segments.MAX_SEGMENTS + 2):  # small catch-ups: merged past the limit
        on_both(sqlite, pg_dsn, {600 + round_: random_counts(rng, 40),
                                 round_ * 11: random_counts(rng, 70)})  # fmt: skip
        assert_same(sqlite, pg_dsn, queries[:2])
    assert scalar(pg_dsn, "SELECT count(*) FROM search_segments") <= segments.MAX_SEGMENTS
    with CorpusIndex(pg_dsn) as corpus:  # what crawl rank opens for a DSN
        assert corpus.device == "cpu (inverted index)" and corpus.pages == 500 + 80 + 10 - 10 - 1


def test_a_page_written_during_a_catch_up_is_indexed_the_next_time(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(23)
    sqlite = tmp_path / "race.db"
    make_db(sqlite)
    on_both(sqlite, pg_dsn, {n: random_counts(rng, 60) for n in range(300)})
    SearchIndex(pg_dsn).close()
    on_both(sqlite, pg_dsn, {n: random_counts(rng, 60) for n in range(0, 300, 10)})  # pending
    late = {0: random_counts(rng, 80), 5: random_counts(rng, 80), 900: random_counts(rng, 30)}
    put(sqlite, late)  # the final state; PostgreSQL gets it from a crawl mid-catch-up
    writers: list[threading.Thread] = []
    real_built = segments.built

    def built_while_a_crawl_writes(rows: list[Any]) -> Any:
        if not writers:  # a crawl writes a logged page, an unlogged one and a new one
            writer = threading.Thread(target=put_pg, args=(pg_dsn, late))
            writer.start()
            writers.append(writer)
            writer.join(0.5)  # it waits for the catch-up's commit: the log row is taken
        return real_built(rows)

    monkeypatch.setattr(segments, "built", built_while_a_crawl_writes)
    SearchIndex(pg_dsn).close()
    writers[0].join(30)
    assert not writers[0].is_alive()
    monkeypatch.setattr(segments, "built", real_built)
    pending = {row[0] for row in query(pg_dsn, "SELECT p.url FROM search_pending s"
                                                " JOIN pages p ON p.id = s.page_id")}  # fmt: skip
    assert pending == {f"http://t.test/{n}" for n in late}  # logged again, for the next one
    assert_same(sqlite, pg_dsn, queries_of(rng))


def test_a_reader_whose_segments_were_merged_away_reads_the_new_ones(
    tmp_path: Path, pg_dsn: str
) -> None:
    rng = np.random.default_rng(29)
    sqlite = tmp_path / "merged.db"
    make_db(sqlite)
    on_both(sqlite, pg_dsn, {n: random_counts(rng, 80) for n in range(200)})
    SearchIndex(pg_dsn).close()
    reader = SearchIndex(pg_dsn, read_only=True)  # as crawl serve's: it never catches up
    words = queries_of(rng)[0]
    before = ranked(reader, words, 10)
    on_both(sqlite, pg_dsn, {n: random_counts(rng, 80) for n in range(200)})  # all: a rebuild
    SearchIndex(pg_dsn).close()  # another process: the segments the reader loaded are gone
    assert scalar(pg_dsn, "SELECT min(id) FROM search_segments") > max(
        s.id for s in reader._segments)  # fmt: skip
    after = ranked(reader, words, 10)
    assert after == reference(sqlite, words, 10) != before
    reader.close()


def test_a_read_only_reader_of_a_log_behind_ranks_from_the_blobs(pg_dsn: str) -> None:
    rng = np.random.default_rng(31)
    put_pg(pg_dsn, {n: random_counts(rng, 50) for n in range(40)})
    with CorpusIndex(pg_dsn, read_only=True) as behind:
        assert behind.device == "cpu" and behind.pages == 40
    assert scalar(pg_dsn, "SELECT count(*) FROM search_segments") == 0  # nothing written
    with CorpusIndex(pg_dsn) as writer:  # caught up
        assert writer.rank("anything") == []
    with CorpusIndex(pg_dsn, read_only=True) as current:
        assert current.device == "cpu (inverted index)" and current.pages == 40
