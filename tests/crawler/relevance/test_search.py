"""The persistent inverted index (``storage.sqlite.search``, ``crawler.relevance.search``):
the same BM25 scores and order as the full-corpus ``Ranker`` on a real SQLite crawl database,
kept up to date as pages are added, changed, emptied and deleted, merged past its segment
limit, and built once for a database of an older schema."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from crawler.relevance.ranking import CorpusIndex
from crawler.relevance.scoring import Ranker, TokenBatch
from crawler.relevance.search import SearchIndex
from parsers.postings import build, decode, unpack_blobs
from parsers.tokens import TokenCounts, decode_counts, encode_counts
from storage import segments
from storage.sqlite.search import SQLiteIndexTables
from storage.sqlite.store import SQLiteStore

VOCABULARY = 3000


def make_db(path: Path) -> None:
    async def go() -> None:
        store = SQLiteStore(str(path))
        await store.open()
        await store.close()

    asyncio.run(go())


def random_counts(rng: np.random.Generator, size: int) -> TokenCounts:
    """A document of Zipf-distributed words (ids hashed apart, as the tokenizer's are)."""
    words = np.minimum(rng.zipf(1.3, size), VOCABULARY).astype(np.uint64)
    ids, counts = np.unique((words * 2654435761) % (1 << 32), return_counts=True)
    order = rng.permutation(ids.size)
    return TokenCounts(ids[order].astype(np.uint32), counts[order].astype(np.uint32), int(size))


def put(path: Path, pages: dict[int, TokenCounts | None]) -> None:
    with sqlite3.connect(path) as conn:
        for n, counts in pages.items():
            blob = encode_counts(counts) if counts is not None else None
            conn.execute(
                "INSERT INTO pages (url, final_url, depth, fetched_at, title, tokens)"
                " VALUES (?, ?, 0, '2026-01-01', ?, ?) ON CONFLICT (url) DO UPDATE SET"
                " tokens = excluded.tokens",
                (f"http://t.test/{n}", f"http://t.test/{n}", f"page {n}", blob),
            )


def reference(path: Path, query: list[int], top: int) -> list[tuple[str, float]]:
    """What ``crawl rank`` gave before the index: every blob loaded, the fused kernel."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT url, tokens FROM pages WHERE tokens IS NOT NULL ORDER BY id"
        ).fetchall()
    ranker = Ranker(TokenBatch.from_counts([decode_counts(b) for _, b in rows]), "cpu")
    indices, scores = ranker.rank(np.array(query, dtype=np.uint32), top)
    return [(rows[i][0], float(s)) for i, s in zip(indices.tolist(), scores.tolist(), strict=True)]


def indexed(path: Path, query: list[int], top: int) -> list[tuple[str, float]]:
    index = SearchIndex(str(path))
    try:
        return ranked(index, query, top)
    finally:
        index.close()


def ranked(index: SearchIndex, query: list[int], top: int) -> list[tuple[str, float]]:
    """(url, score) of the ``top`` best pages of an open index."""
    page_ids, scores = index.rank(np.array(query, dtype=np.uint32), top)
    known = index.pages(page_ids.tolist())
    return [
        (known[p][0], float(s)) for p, s in zip(page_ids.tolist(), scores.tolist(), strict=True)
    ]


def assert_same(path: Path, queries: list[list[int]], top: int = 20) -> None:
    for query in queries:
        want, got = reference(path, query, top), indexed(path, query, top)
        assert [url for url, _ in got] == [url for url, _ in want], query
        assert [s for _, s in got] == [s for _, s in want]  # to the last bit


def queries_of(rng: np.random.Generator) -> list[list[int]]:
    ids = [(w * 2654435761) % (1 << 32) for w in range(1, 60)]
    return [rng.choice(ids, size=3, replace=False).tolist() for _ in range(8)] + [[ids[0]], [12345]]


def test_postings_do_not_depend_on_the_table_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The terms' hash table is keyed per process (pages choose their token ids, so a fixed
    slot function could be flooded): the postings built are the same under any key."""
    from parsers import postings

    rng = np.random.default_rng(11)
    docs = [random_counts(rng, int(rng.integers(0, 80))) for _ in range(200)]
    blobs = [encode_counts(d) for d in docs]
    built = []
    for key in (0, 1, 2**64 - 1):
        monkeypatch.setattr(postings, "TABLE_KEY", np.uint64(key))
        built.append([a.tolist() for a in build(*unpack_blobs(blobs)[:3])])
    assert built[0] == built[1] == built[2]


def test_postings_round_trip() -> None:
    rng = np.random.default_rng(7)
    docs = [random_counts(rng, int(rng.integers(0, 80))) for _ in range(300)]
    ids, counts, offsets, lengths = unpack_blobs([encode_counts(d) for d in docs])
    assert lengths.tolist() == [d.length for d in docs]
    terms, df, starts, postings = build(ids, counts, offsets)
    expected: dict[int, list[tuple[int, int]]] = {}
    for n, doc in enumerate(docs):
        for term, tf in zip(doc.ids.tolist(), doc.counts.tolist(), strict=True):
            expected.setdefault(term, []).append((n, tf))
    assert terms.tolist() == sorted(expected)
    live = np.arange(len(docs), dtype=np.int64)
    live[::3] = -1  # every third document gone
    for k, term in enumerate(terms.tolist()):
        out = [np.empty(int(df[k]), np.int64) for _ in range(3)]
        kept = decode(postings[starts[k] : starts[k + 1]], int(df[k]), live, *out, 0)
        want = [(d, tf, list(docs[d].ids).index(term)) for d, tf in expected[term] if d % 3]
        assert list(zip(*(a[:kept].tolist() for a in out), strict=True)) == want
    with pytest.raises(ValueError, match="token blob 1"):
        unpack_blobs([encode_counts(docs[0]), b"not a blob at all"])


def corpus(path: Path, seed: int, pages: int) -> tuple[np.random.Generator, list[list[int]]]:
    """A crawl database at ``path`` of ``pages`` random pages waiting to be indexed; the
    generator that made them and queries for them."""
    rng = np.random.default_rng(seed)
    make_db(path)
    put(path, {n: random_counts(rng, int(rng.integers(20, 200))) for n in range(pages)})
    return rng, queries_of(rng)


def test_the_index_ranks_as_the_whole_corpus_and_follows_changes(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    rng, queries = corpus(path, 11, 600)
    assert_same(path, queries)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM search_segments").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone()[0] == 0
    # recrawled pages change, some lose their tokens (a duplicate), one is deleted, new ones come
    put(path, {n: random_counts(rng, 50) for n in range(0, 600, 7)})
    put(path, {n: None for n in range(3, 600, 50)})
    put(path, {n: random_counts(rng, 90) for n in range(600, 700)})
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM pages WHERE url = 'http://t.test/5'")
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone()[0] > 100
    assert_same(path, queries)
    # many small catch-ups: merged into one segment past the limit
    for round_ in range(segments.MAX_SEGMENTS + 2):
        put(path, {700 + round_: random_counts(rng, 40), round_ * 11: random_counts(rng, 70)})
        assert_same(path, queries[:2])
    with sqlite3.connect(path) as conn:
        assert (
            conn.execute("SELECT count(*) FROM search_segments").fetchone()[0]
            <= segments.MAX_SEGMENTS
        )


def test_an_older_database_gets_its_index_built_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    path = tmp_path / "old.db"
    make_db(path)
    put(path, {n: random_counts(rng, 100) for n in range(200)})
    with sqlite3.connect(path) as conn:  # as a crawler of schema version 2 left it
        for name in ("search_page_added", "search_page_changed", "search_page_deleted"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP TABLE search_segments")
        conn.execute("DROP TABLE search_pending")
        conn.execute("DELETE FROM schema_migrations WHERE version = 3")
    index = CorpusIndex(str(path))
    assert index.device == "cpu (inverted index)" and index.pages == 200
    assert_same(path, queries_of(rng))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == 4


def test_a_read_only_index_that_is_behind_ranks_from_the_blobs(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    path = tmp_path / "ro.db"
    make_db(path)
    put(path, {n: random_counts(rng, 60) for n in range(50)})
    behind = CorpusIndex(str(path), read_only=True)  # 50 pages pending: not indexed
    assert behind.device == "cpu" and behind.pages == 50
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM search_segments").fetchone()[0] == 0
    CorpusIndex(str(path))  # caught up
    current = CorpusIndex(str(path), read_only=True)
    assert current.device == "cpu (inverted index)" and current.pages == 50
    words = "".join([])  # no words: nothing ranks
    assert current.rank(words) == [] == behind.rank(words)


def test_a_large_catch_up_builds_segments_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "PARALLEL_PAGES", 100)
    monkeypatch.setattr(segments.os, "cpu_count", lambda: 3)
    rng = np.random.default_rng(9)
    path = tmp_path / "p.db"
    make_db(path)
    put(path, {n: random_counts(rng, int(rng.integers(10, 120))) for n in range(400)})
    queries = queries_of(rng)
    assert_same(path, queries)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM search_segments").fetchone()[0] == 3
    put(path, {n: None for n in range(0, 400, 9)})  # removed: named by a newer segment
    put(path, {n: random_counts(rng, 30) for n in range(1, 400, 9)})
    assert_same(path, queries)


def test_a_corpus_past_the_segment_size_keeps_more_segments_before_merging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "SEGMENT_PAGES", 40)  # as 2 million: PostgreSQL's 1 GB
    rng = np.random.default_rng(13)
    path = tmp_path / "big.db"
    make_db(path)
    put(path, {n: random_counts(rng, 50) for n in range(200)})
    queries = queries_of(rng)
    assert_same(path, queries)

    def count() -> int:
        with sqlite3.connect(path) as conn:
            return int(conn.execute("SELECT count(*) FROM search_segments").fetchone()[0])

    assert count() == 5  # none over the size
    for round_ in range(segments.MAX_SEGMENTS):  # small catch-ups: a segment each
        put(path, {round_ * 3: random_counts(rng, 20)})
        assert_same(path, queries[:2])
    assert count() == 5 + segments.MAX_SEGMENTS  # under MAX_SEGMENTS + 200 // 40: no merge
    put(path, {1: random_counts(rng, 20)})
    assert_same(path, queries)
    assert count() == 5  # merged: every live page anew, in parts of the size


def test_postings_of_huge_counts_and_many_terms() -> None:
    """A term frequency past 16 bits, and more distinct terms than the term table's first
    size (it grows), come back as they went in."""
    rng = np.random.default_rng(4)
    docs = [random_counts(rng, 50) for _ in range(40)]
    docs.append(TokenCounts(np.array([5, 9], np.uint32), np.array([70_000, 3], np.uint32), 70_003))
    many = np.unique(rng.integers(1 << 20, 1 << 32, 20_000, dtype=np.uint64)).astype(np.uint32)
    docs.append(TokenCounts(many, np.ones(many.size, np.uint32), many.size))
    ids, counts, offsets, _ = unpack_blobs([encode_counts(d) for d in docs])
    terms, df, starts, postings = build(ids, counts, offsets)
    assert terms.tolist() == sorted(set(ids.tolist()))
    k = int(np.searchsorted(terms, 5))
    out = [np.empty(int(df[k]), np.int64) for _ in range(3)]
    kept = decode(postings[starts[k] : starts[k + 1]], int(df[k]), np.arange(42), *out, 0)
    assert (out[0][kept - 1], out[1][kept - 1], out[2][kept - 1]) == (40, 70_000, 0)
    k = int(np.searchsorted(terms, many[-1]))
    kept = decode(postings[starts[k] : starts[k + 1]], 1, np.arange(42), *out, 0)
    assert (kept, out[0][0], out[1][0], out[2][0]) == (1, 41, 1, many.size - 1)


def in_thread(work: Callable[[], segments.Plan]) -> segments.Plan:
    """A ``build`` that runs the catch-up's plan in another thread, as the warmer does."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


def snapshot_catch_up(path: Path, build: segments.Builder = in_thread) -> int | None:
    tables = SQLiteIndexTables(str(path))
    try:
        return tables.catch_up_on_snapshot(build)
    finally:
        tables.close()


def test_a_catch_up_built_on_a_snapshot_ranks_as_the_whole_corpus(tmp_path: Path) -> None:
    path = tmp_path / "snap.db"
    rng, queries = corpus(path, 5, 400)
    assert snapshot_catch_up(path) == 400  # the first: a build of every page
    put(path, {n: random_counts(rng, 60) for n in range(0, 400, 9)})  # changed
    put(path, {n: None for n in range(4, 400, 60)})  # no tokens any more
    put(path, {n: random_counts(rng, 80) for n in range(400, 430)})  # new
    assert snapshot_catch_up(path) == 45 + 7 + 30
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone()[0] == 0
        # the first build, the changed and new pages, the pages with no tokens any more
        assert conn.execute("SELECT count(*) FROM search_segments").fetchone()[0] == 3
    assert_same(path, queries)


def test_a_snapshot_another_connection_wrote_after_is_refused_whole(tmp_path: Path) -> None:
    """Another connection writes a page while the catch-up builds on its snapshot: SQLite
    refuses the snapshot's writes and nothing of them is kept; the write transaction's
    catch-up then has every page, the racing ones too."""
    rng = np.random.default_rng(6)
    path = tmp_path / "race.db"
    make_db(path)
    put(path, {n: random_counts(rng, 100) for n in range(200)})
    SearchIndex(str(path)).close()
    put(path, {n: random_counts(rng, 50) for n in range(200, 220)})
    builds: list[int] = []

    def racing(work: Callable[[], segments.Plan]) -> segments.Plan:
        planned = in_thread(work)
        builds.append(len(planned.ids))
        put(path, {7: random_counts(rng, 30), 500: random_counts(rng, 40)})  # a crawl writes
        return planned

    assert snapshot_catch_up(path, racing) is None
    assert builds == [20]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone()[0] == 22
        assert conn.execute("SELECT count(*) FROM search_segments").fetchone()[0] == 1
    index = SearchIndex(str(path))  # a write transaction's catch-up
    try:
        assert index.indexed_now == 22
    finally:
        index.close()
    assert_same(path, queries_of(rng))
