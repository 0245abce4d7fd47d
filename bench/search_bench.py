"""``crawl rank``'s inverted index beside bm25s, on the same synthetic corpus.

    python bench/search_bench.py [--docs 100000 200000] [--queries 50] [--postgres DSN] [--gpu]

Per size: a crawl database made through the schema's public columns (``pages.tokens`` from
``parsers.tokens.encode_counts``; the store's triggers queue them), documents of 150-250
Zipf-distributed words; the same texts, as word lists, for bm25s (installed here if
missing; numpy backend, float64, k1 1.2, b 0.75, Lucene idf). Reports: the index's size on
disk, ``crawl rank``'s first query as a fresh process (as after an install, numba's cache
empty: a scan answers, a background warmer compiles and builds the index; then with the
kernels cached and the build; then with the index present), the median time of a further query (in process) for the index, the
full-corpus kernel it replaced and bm25s on one thread, and whether the top 10 agree with
bm25s (its Lucene scores are ours without Okapi's constant (k1 + 1) factor): the scores,
and the pages in order (equal scores may come in another order: ours breaks ties to the
lower page id). With ``--postgres`` (a server's maintenance DSN: a scratch database is made
and dropped there), the same pages copied into PostgreSQL: ``crawl rank``'s first query with
the build and with the index present, a further query, and whether its top 10 equal the
SQLite index's to the last bit. With ``--gpu``, the index on a CUDA GPU: a batch of the
queries and one at a time, top 10 against the CPU index's.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crawler.relevance.ranking import CorpusIndex  # noqa: E402
from crawler.relevance.scoring import Ranker, TokenBatch  # noqa: E402
from crawler.relevance.warm_work import compile_kernels  # noqa: E402
from parsers.tokens import TokenCounts, decode_counts, encode_counts, query_ids  # noqa: E402
from storage.postgres import PostgresStore  # noqa: E402
from storage.sqlite.store import SQLiteStore  # noqa: E402

VOCABULARY = 50_000
K1_PLUS_1 = 2.2


def word(rank: int) -> str:
    letters = ""
    rank += 1
    while rank:
        rank, digit = divmod(rank - 1, 26)
        letters = chr(97 + digit) + letters
    return "zq" + letters  # letters only: one token to both tokenizers, never a stopword


def corpus(n_docs: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(150, 251, n_docs)
    ranks = np.minimum(rng.zipf(1.1, int(lengths.sum())), VOCABULARY) - 1
    return np.split(ranks, np.cumsum(lengths)[:-1])


def make_db(path: Path, docs: list[np.ndarray]) -> None:
    async def schema() -> None:
        store = SQLiteStore(str(path))
        await store.open()
        await store.close()

    asyncio.run(schema())
    ids_of = np.array([query_ids(word(r))[0] for r in range(VOCABULARY)], dtype=np.uint32)
    with sqlite3.connect(path) as conn:
        rows = []
        for n, ranks in enumerate(docs):
            unique, counts = np.unique(ranks, return_counts=True)
            blob = encode_counts(TokenCounts(ids_of[unique], counts.astype(np.uint32), ranks.size))
            rows.append((f"http://bench.test/{n}", f"http://bench.test/{n}", blob))
        conn.executemany("INSERT INTO pages (url, final_url, depth, fetched_at, tokens) "
                         "VALUES (?, ?, 0, '2026-01-01', ?)", rows)  # fmt: skip


def ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def cold_cache_first_query(db: Path, query: str, work: Path) -> tuple[float, float]:
    """``crawl rank``'s first query on a copy of ``db`` as after an install (an empty numba
    cache: a scan answers, a background warmer compiles and builds the copy's index), and
    how long until that warmer is done."""
    copy = work / "cold.db"
    shutil.copyfile(db, copy)
    env = {k: v for k, v in os.environ.items() if k != "CRAWL_NO_BACKGROUND_WARM"}
    env["NUMBA_CACHE_DIR"] = str(work / "numba-cold")
    env["TMPDIR"] = env["XDG_RUNTIME_DIR"] = str(work)  # the warmer's lock, apart from others
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "crawler", "rank", str(copy), "--query", query],
                   check=True, capture_output=True, cwd=REPO, env=env)  # fmt: skip
    first = time.perf_counter() - started
    check = "from crawler.relevance.search import kernels_cached as k; print(k())"
    while True:
        time.sleep(0.2)
        done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                              cwd=REPO, env=env, check=True)  # fmt: skip
        if done.stdout.strip() == "True" and not lock_held(work):
            break
    return first, time.perf_counter() - started


def lock_held(folder: Path) -> bool:
    with open(folder / f"crawl-search-warm-{os.getuid()}.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def on_postgres(
    db: Path, admin_dsn: str, queries: list[str], index: CorpusIndex
) -> dict[str, object]:
    """``db``'s pages copied into a scratch PostgreSQL database: ``crawl rank`` there."""
    import asyncpg

    name = f"crawler_search_bench_{os.getpid()}"
    dsn = admin_dsn.rsplit("/", 1)[0] + "/" + name

    async def admin(sql: str) -> None:
        connection = await asyncpg.connect(admin_dsn)
        try:
            await connection.execute(sql)
        finally:
            await connection.close()

    async def copy() -> None:
        store = PostgresStore(dsn)
        await store.open()  # the schema
        await store.close()
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT url, final_url, depth, fetched_at, tokens FROM pages"
                                " ORDER BY id").fetchall()  # fmt: skip
        connection = await asyncpg.connect(dsn)
        try:
            await connection.copy_records_to_table(
                "pages", records=rows,
                columns=["url", "final_url", "depth", "fetched_at", "tokens"])  # fmt: skip
        finally:
            await connection.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        asyncio.run(copy())
        crawl = [sys.executable, "-m", "crawler", "rank", dsn, "--query", queries[0]]
        timings = []
        for _ in range(2):  # the first builds the index, the second finds it
            started = time.perf_counter()
            subprocess.run(crawl, check=True, capture_output=True, cwd=REPO)
            timings.append(time.perf_counter() - started)
        with CorpusIndex(dsn) as pg:
            for query in queries[:3]:
                pg.rank(query)
            further, same = [], 0
            for query in queries:
                t = time.perf_counter()
                found = pg.rank(query)
                further.append(time.perf_counter() - t)
                same += found == index.rank(query)
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return {
        "postgres_crawl_rank_first_query_with_build_s": round(timings[0], 2),
        "postgres_crawl_rank_first_query_indexed_s": round(timings[1], 2),
        "postgres_ms_per_query": ms(further),
        "postgres_top10_equal_to_sqlite": f"{same}/{len(queries)}",
    }


def on_gpu(db: Path, queries: list[str], index: CorpusIndex) -> dict[str, object]:
    """The index's postings on the GPU (``--device gpu``): the queries as one batch, and
    one at a time; top 10 against the CPU index's."""
    started = time.perf_counter()
    with CorpusIndex(str(db), "gpu") as gpu:
        opened = time.perf_counter() - started
        gpu.rank_many(queries[:3])  # kernels compiled
        t = time.perf_counter()
        batched = gpu.rank_many(queries)
        batch_s = time.perf_counter() - t
        alone = []
        for query in queries:
            t = time.perf_counter()
            gpu.rank(query)
            alone.append(time.perf_counter() - t)
    cpu = [index.rank(query) for query in queries]
    same = sum([p.url for p in g] == [p.url for p in c] for g, c in zip(batched, cpu, strict=True))
    return {
        "gpu_open_s": round(opened, 2),
        "gpu_ms_per_query_batched": round(batch_s / len(queries) * 1000, 3),
        "gpu_ms_per_query_alone": ms(alone),
        "gpu_top10_same_pages_as_cpu_index": f"{same}/{len(queries)}",
    }


def run_size(
    n_docs: int, n_queries: int, work: Path, postgres: str | None, gpu: bool = False
) -> dict[str, object]:
    import bm25s

    docs = corpus(n_docs)
    db = work / f"search-{n_docs}.db"
    db.unlink(missing_ok=True)
    made = time.perf_counter()
    make_db(db, docs)
    made = time.perf_counter() - made
    rng = np.random.default_rng(2)
    queries = [" ".join(word(int(r)) for r in rng.integers(100, 2000, 3)) for _ in range(n_queries)]
    cold_first, cold_warmed = cold_cache_first_query(db, queries[0], work)
    compile_kernels()  # numba's cache holds them from here on (the default cache)
    crawl = [sys.executable, "-m", "crawler", "rank", str(db), "--query", queries[0]]
    started = time.perf_counter()
    subprocess.run(crawl, check=True, capture_output=True, cwd=REPO)
    first_build = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run(crawl, check=True, capture_output=True, cwd=REPO)
    first_indexed = time.perf_counter() - started
    with sqlite3.connect(db) as conn:
        index_bytes = conn.execute(
            "SELECT sum(length(docs) + length(lengths) + length(removed) + length(terms)"
            " + length(df) + length(starts) + length(postings)) FROM search_segments"
        ).fetchone()[0]
        blobs = [b for (b,) in conn.execute("SELECT tokens FROM pages ORDER BY id")]
    index = CorpusIndex(str(db))
    for query in queries[:3]:
        index.rank(query)  # numba's cache loaded
    ours = []
    for query in queries:
        t = time.perf_counter()
        index.rank(query)
        ours.append(time.perf_counter() - t)
    ranker = Ranker(TokenBatch.from_counts([decode_counts(b) for b in blobs]), "cpu")
    full = []
    for query in queries[:10]:
        t = time.perf_counter()
        ranker.rank(query_ids(query), 10)
        full.append(time.perf_counter() - t)
    texts = [[word(int(r)) for r in ranks] for ranks in docs]
    built = time.perf_counter()
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene", dtype="float64")
    retriever.index(texts, show_progress=False)
    built = time.perf_counter() - built
    theirs, same_scores, same_order = [], 0, 0
    for query in queries:
        t = time.perf_counter()
        found, scores = retriever.retrieve([query.split()], k=10, n_threads=1, show_progress=False)
        theirs.append(time.perf_counter() - t)
        mine = index.rank(query, 10)
        their_urls = [f"http://bench.test/{d}" for d in found[0].tolist()]
        same_scores += bool(np.allclose([p.score / K1_PLUS_1 for p in mine], scores[0], rtol=1e-9))
        same_order += [p.url for p in mine] == their_urls  # ties: ours to the lower page id
    more = on_postgres(db, postgres, queries, index) if postgres else {}
    if gpu:
        more.update(on_gpu(db, queries, index))
    index.close()
    return {
        "docs": n_docs, "db_made_s": round(made, 1), "index_mb": round(index_bytes / 2**20, 1),
        "crawl_rank_first_query_cold_numba_cache_s": round(cold_first, 2),
        "background_warmer_done_after_s": round(cold_warmed, 1),
        "crawl_rank_first_query_with_build_s": round(first_build, 2),
        "crawl_rank_first_query_indexed_s": round(first_indexed, 2),
        "ours_ms_per_query": ms(ours), "full_corpus_kernel_ms_per_query": ms(full),
        "bm25s_1_thread_ms_per_query": ms(theirs), "bm25s_build_s": round(built, 1),
        "top10_scores_equal_to_bm25s": f"{same_scores}/{len(queries)}",
        "top10_same_pages_in_same_order": f"{same_order}/{len(queries)}", **more,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        help="also on PostgreSQL (a scratch "
        "database made and dropped on the server this maintenance DSN names)",
    )
    parser.add_argument("--gpu", action="store_true", help="also the index on a CUDA GPU")
    args = parser.parse_args()
    try:
        import bm25s  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "bm25s"], check=True)
    work = REPO / "bench" / "work"
    with tempfile.TemporaryDirectory(dir=work if work.is_dir() else None) as tmp:
        for n_docs in args.docs:
            print(
                json.dumps(run_size(n_docs, args.queries, Path(tmp), args.postgres, args.gpu)),
                flush=True,
            )


if __name__ == "__main__":
    main()
