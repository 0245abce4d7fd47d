"""Ranking while numba's cache lacks the search kernels: the numpy scan of the stored blobs
(``crawler.relevance.scan``) gives the index's scores to the last bit and its order; a cold
``crawl rank`` answers from it and leaves a background warmer (``crawler.relevance.warmer``)
that compiles the kernels and builds the index, which the next run (and a ``CorpusIndex``
kept open) then uses."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from crawler.relevance.ranking import CorpusIndex
from crawler.relevance.scan import ScanIndex
from crawler.relevance.search import SearchIndex
from parsers.token_scan import TokenScan
from parsers.tokens import TokenCounts, encode_counts, query_ids
from storage.base import StoreError
from tests.crawler.relevance.test_search import make_db, put, queries_of, random_counts
from tests.proc import child_env
from tests.sites import PageSite, SiteServer

ROOT = Path(__file__).resolve().parents[3]


def both(path: Path, query: list[int], top: int = 15) -> None:
    scan, index = ScanIndex(str(path)), SearchIndex(str(path))
    try:
        q = np.array(query, dtype=np.uint32)
        for got, want in zip(scan.scores_of(q), index.scores_of(q), strict=True):
            assert got.dtype == want.dtype and np.array_equal(got, want)  # bit for bit
        for got, want in zip(scan.rank(q, top), index.rank(q, top), strict=True):
            assert np.array_equal(got, want)
        assert scan.n_docs == index.n_docs
    finally:
        scan.close()
        index.close()


def test_the_scan_scores_as_the_index_bit_for_bit(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    make_db(db)
    rng = np.random.default_rng(7)
    pages: dict[int, TokenCounts | None] = {n: random_counts(rng, int(rng.integers(1, 400)))
                                            for n in range(300)}  # fmt: skip
    pages[5] = None  # a page without tokens (a duplicate, a PDF) never ranks
    pages[6] = TokenCounts(np.array([7], np.uint32), np.array([300], np.uint32), 300)  # 2 B
    pages[7] = TokenCounts(np.array([7, 9], np.uint32), np.array([70_000, 1], np.uint32), 70_001)
    pages[8] = TokenCounts(np.empty(0, np.uint32), np.empty(0, np.uint32), 0)  # no words
    put(db, pages)
    ids = sorted({int(i) for c in pages.values() if c is not None for i in c.ids})
    for query in [*queries_of(rng), [7, 9], [7, 7, 9], [123456789], [], ids[:40]]:
        both(db, query)


def test_words_equal_to_a_term_outside_the_ids_are_not_hits() -> None:
    term = 0x00000101  # also the bytes of a header (TK\\x01\\x01) read as a little word
    counts = TokenCounts(np.array([5, 6], np.uint32), np.array([term, 2], np.uint32), term + 2)
    blob = encode_counts(counts)  # 4-byte counts: one of them is the term's bits
    scan = TokenScan.of([blob, b"", blob][::2])
    docs, terms, tfs = scan.hits(np.array([term], np.uint32))
    assert docs.size == 0
    docs, terms, tfs = scan.hits(np.array([5, 6], np.uint32))
    assert docs.tolist() == [0, 0, 1, 1] and terms.tolist() == [0, 1, 0, 1]
    assert tfs.tolist() == [term, 2, term, 2]
    assert scan.lengths.tolist() == [term + 2, term + 2]


def test_a_blob_that_is_not_one_is_named(tmp_path: Path) -> None:
    good = encode_counts(TokenCounts(np.array([1], np.uint32), np.array([1], np.uint32), 1))
    for bad in (b"short", good[:-1], b"XX" + good[2:]):
        with pytest.raises(ValueError, match="token blob 1 is not one"):
            TokenScan.of([good, bad])
    db = tmp_path / "bad.db"
    make_db(db)
    put(db, {0: TokenCounts(np.array([1], np.uint32), np.array([1], np.uint32), 1)})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE pages SET tokens = x'00112233'")
    with pytest.raises(StoreError, match=r"cannot rank pages\.tokens: token blob 0"):
        ScanIndex(str(db))


def test_a_cold_cache_answers_by_scan_and_warms_in_the_background(tmp_path: Path) -> None:
    db = tmp_path / "cold #1?%20.db"  # read-only URIs of such a name must be encoded
    make_db(db)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    ids = np.array(query_ids(" ".join(words)), dtype=np.uint32)
    rng = np.random.default_rng(3)
    pages: dict[int, TokenCounts | None] = {}
    for n in range(120):
        chosen = np.unique(rng.choice(ids, size=int(rng.integers(1, 5))))
        counts = rng.integers(1, 9, chosen.size).astype(np.uint32)
        pages[n] = TokenCounts(chosen, counts, int(counts.sum()) + int(rng.integers(0, 50)))
    put(db, pages)
    env = {k: v for k, v in os.environ.items() if k != "CRAWL_NO_BACKGROUND_WARM"}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")  # empty: as after an install
    env["TMPDIR"] = env["XDG_RUNTIME_DIR"] = str(tmp_path)  # this test's own warmer lock
    env["CRAWL_KERNEL_DIR"] = str(tmp_path / "kernels")  # what the warmer compiles, too
    crawl = [sys.executable, "-m", "crawler", "rank", str(db), "--query", "beta delta"]

    started = time.monotonic()
    cold = subprocess.run(crawl, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert cold.returncode == 0, cold.stderr
    assert "scan" in cold.stderr
    assert time.monotonic() - started < 60  # nothing compiled in the foreground

    wait_for_warmer(env)  # it compiles every kernel: seconds
    with sqlite3.connect(db) as conn:  # the warmer built this database's index too
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM search_segments").fetchone()[0] >= 1

    warm = subprocess.run(crawl, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert warm.returncode == 0, warm.stderr
    assert "inverted index" in warm.stderr
    assert warm.stdout == cold.stdout and cold.stdout.count("\n") == 10
    made = {p.name for p in tmp_path.iterdir() if p.name.startswith("cold")}
    assert made <= {db.name, db.name + "-shm", db.name + "-wal"}  # no file of a cut name


def wait_for_warmer(env: dict[str, str], seconds: float = 240) -> None:
    """Until the kernels are cached and no warmer runs (the one ``env`` names by TMPDIR)."""
    deadline = time.monotonic() + seconds
    check = ("from crawler.relevance.search import kernels_cached;"
             "from crawler.relevance.warm import warming;"
             "print(kernels_cached() and not warming())")  # fmt: skip
    while True:
        done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                              text=True, cwd=ROOT, timeout=60)  # fmt: skip
        if done.stdout.strip() == "True":
            return
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.3)


def test_a_crawl_leaves_its_index_current_for_a_read_only_reader(tmp_path: Path) -> None:
    db = tmp_path / "crawled.db"
    seeds = tmp_path / "seeds.txt"
    kernels = tmp_path / "kernels"
    env = child_env(drop=("CRAWL_NO_BACKGROUND_WARM",), TMPDIR=str(tmp_path),
                    XDG_RUNTIME_DIR=str(tmp_path), CRAWL_KERNEL_DIR=str(kernels))  # fmt: skip
    site = PageSite(30, links=3)
    with SiteServer() as server:
        site.serve(server)
        seeds.write_text(server.url + "/\n")
        crawl = [sys.executable, "-m", "crawler", str(seeds), "--db", str(db), "--delay", "0",
                 "--per-host", "4", "--no-progress"]  # fmt: skip
        done = subprocess.run(crawl, env=env, capture_output=True, text=True, cwd=ROOT,
                              timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Started by the crawl's end, in the background, it compiles the parse kernels ahead of
    # time for the next crawl's workers (seconds), then indexes. Numba's search kernels may
    # be cached already (by an earlier test), so wait for its module first: a warmer not
    # yet started looks like one done.
    deadline = time.monotonic() + 240
    while not (kernels.is_dir() and any(p.suffix == ".so" for p in kernels.iterdir())):
        assert time.monotonic() < deadline, "no parse kernels compiled ahead of time"
        time.sleep(0.3)
    wait_for_warmer(env)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
        pages = conn.execute("SELECT count(*) FROM pages WHERE tokens IS NOT NULL").fetchone()
    reader = CorpusIndex(str(db), read_only=True)  # what crawl serve opens: it never writes
    assert reader.device == "cpu (inverted index)" and (reader.pages,) == pages == (30,)
    title_word = reader.rank("page", 3)
    assert len(title_word) == 3


def test_a_scanning_corpus_index_switches_to_the_index_when_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "switch.db"
    make_db(db)
    ids = np.array(query_ids("one two three four five"), dtype=np.uint32)
    put(db, {n: TokenCounts(ids[: 1 + n % 5], np.full(1 + n % 5, 1 + n % 3, np.uint32), 9 + n)
             for n in range(50)})  # fmt: skip
    from crawler.relevance import ranking

    cold = iter([False])  # cold when opened, warm (cached, no warmer) from then on
    monkeypatch.setattr(ranking, "kernels_cached", lambda: next(cold, True))
    monkeypatch.setattr(ranking, "start_warming", lambda db: True)
    monkeypatch.setattr(ranking, "RECHECK_S", 0.0)
    corpus = CorpusIndex(str(db))
    assert "scan" in corpus.device
    query = "two four"
    first = corpus.rank(query, 5)  # checks, finds the index ready, ranks with it
    assert corpus.device == "cpu (inverted index)"
    assert len(first) == 5 and first == corpus.rank(query, 5)


def test_an_index_that_fails_to_open_leaves_the_scan_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "busy.db"
    make_db(db)
    ids = np.array(query_ids("one two three"), dtype=np.uint32)
    put(db, {n: TokenCounts(ids[: 1 + n % 3], np.ones(1 + n % 3, np.uint32), 5) for n in range(9)})
    from crawler.relevance import ranking

    monkeypatch.setattr(ranking, "kernels_cached", lambda: False)
    monkeypatch.setattr(ranking, "start_warming", lambda db: True)
    corpus = CorpusIndex(str(db))
    monkeypatch.setattr(ranking, "kernels_cached", lambda: True)
    monkeypatch.setattr(ranking, "RECHECK_S", 0.0)

    def locked(*args: object) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(ranking, "SearchIndex", locked)
    assert len(corpus.rank("two", 4)) == 4 and "scan" in corpus.device


def test_the_warmer_compiles_at_idle_priority_and_catches_up_at_normal() -> None:
    from crawler.relevance.warmer import _at_idle_priority

    seen: list[int] = []
    _at_idle_priority(lambda: seen.append(os.sched_getscheduler(0)))
    assert seen == [os.SCHED_IDLE]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the catch-up's thread: not starved
    with pytest.raises(ZeroDivisionError):  # a failed compile fails the warmer
        _at_idle_priority(lambda: seen.append(1 // 0))
