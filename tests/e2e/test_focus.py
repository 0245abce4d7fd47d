"""Relevance in the crawl: batched BM25 scores, best-first frontier, rank, near-duplicates."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import crawler
from crawler import Settings
from crawler.cli import main
from crawler.frontier.hosts import FetchJob, Frontier
from crawler.relevance.focus import Focus
from crawler.relevance.neardup import MAX_DISTANCE, NearDuplicates
from crawler.relevance.scoring import BM25Stats, TokenBatch, reference_bm25, score_batch
from parsers.tokens import (
    TokenCounts,
    encode_counts,
    query_ids,
    reference_tokenize,
    term_counts,
    tokenize,
)
from tests.proc import ROOT as ROOT_DIR
from tests.proc import child_env
from tests.sites import SiteServer, html_handler

REPO = ROOT_DIR
TOPIC = "telescope galaxy nebula"
FAST = {"concurrency": 1, "per_host": 1, "delay": 0.0, "workers": 1, "progress": False,
        "sitemaps": False}  # fmt: skip


def test_scores_from_worker_term_counts_equal_full_token_scores() -> None:
    """What the crawl does: workers send each page's query-term counts and length, the main
    process scores those as they come (each page after the statistics count it); the result
    must equal scoring the full token blobs the same way, page after page."""
    docs = ["a telescope sees a galaxy", "cooking pasta", "nebula nebula telescope", "",
            "galaxy " * 50 + "telescope nebula words words"]  # fmt: skip
    counts = [tokenize(d) for d in docs]

    async def go() -> list[float]:
        focus = Focus(TOPIC, "cpu")
        return await asyncio.gather(
            *(focus.score_terms(term_counts(c, focus.ids), c.length) for c in counts)
        )

    terms = asyncio.run(go())
    stats = BM25Stats(query_ids(TOPIC))
    full = []
    for c in counts:
        batch = TokenBatch.from_counts([c])
        stats.observe(batch)
        full.extend(score_batch(batch, stats, query_ids(TOPIC), "cpu", parallel=False).tolist())
    assert terms == pytest.approx(full, rel=1e-12)
    assert full[2] > full[1] == 0.0


def test_focus_scores_equal_the_reference_page_by_page() -> None:
    """Each page is scored when it arrives, with the statistics of the pages so far (itself
    included): the reference BM25 over that prefix of the corpus."""
    docs = ["a telescope sees a galaxy", "cooking pasta", "nebula nebula telescope", ""]

    async def go() -> list[float]:
        focus = Focus(TOPIC, "cpu")
        return [await focus.score(encode_counts(tokenize(d))) for d in docs]

    scores = asyncio.run(go())
    counts = [reference_tokenize(d) for d in docs]
    lengths = [sum(c.values()) for c in counts]
    q = [int(i) for i in query_ids(TOPIC)]
    for n, got in enumerate(scores, start=1):
        seen = counts[:n]
        df = {t: sum(1 for c in seen if t in c) for t in q}
        want = reference_bm25(seen, lengths[:n], q, n, sum(lengths[:n]) / n, df)[-1]
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    assert scores[2] > scores[0] > 0 == scores[1] == scores[3]


def test_on_the_cpu_a_page_is_scored_without_waiting() -> None:
    """No batching on the CPU: ``score_terms`` returns without yielding to the event loop
    (a batch would only add a timer and a wait to each page)."""

    async def go() -> float:
        focus = Focus(TOPIC, "cpu", wait_s=60.0)
        step = focus.score_terms((1,) * len(focus.ids), 10).__await__()
        try:
            next(step)
        except StopIteration as done:
            return float(done.value)
        raise AssertionError("score_terms waited")

    assert asyncio.run(go()) > 0


def test_frontier_is_best_first_within_a_host() -> None:
    f = Frontier(per_host=1, delay_s=0.0, check_robots=False)
    f.add("http://a.com/low", 1, 0.0, priority=0.5)
    f.add("http://a.com/high", 1, 0.0, priority=9.0)
    f.add("http://a.com/mid", 1, 0.0, priority=3.0)
    f.add("http://a.com/mid2", 1, 0.0, priority=3.0)
    order = []
    while isinstance(job := f.next(0.0), FetchJob):
        order.append(job.url.rsplit("/", 1)[1])
        f.release(job, 0.0)
    assert order == ["high", "mid", "mid2", "low"]


def test_near_duplicates_index() -> None:
    index = NearDuplicates()
    assert index.first_near(0b1011, "a") is None
    assert index.first_near(0b1011 ^ 0b111 << 40, "b") == "a"  # distance 3
    assert index.first_near(0b1011 ^ 0b1111 << 20, "c") is None  # distance 4: filed
    assert index.first_near((1 << 64) - 1, "d") is None


def test_near_duplicates_index_against_brute_force() -> None:
    """Every page against every page filed before it: ``None`` exactly when none is within
    the distance, else one at the smallest distance (clustered hashes, so both happen)."""
    rng = random.Random(7)
    centres = [rng.getrandbits(64) for _ in range(40)]
    index = NearDuplicates()
    filed: list[tuple[int, str]] = []
    for i in range(3000):
        simhash = rng.choice(centres)
        for _ in range(rng.randrange(6)):
            simhash ^= 1 << rng.randrange(64)
        url = f"u{i}"
        found = index.first_near(simhash, url)
        distances = {u: (simhash ^ h).bit_count() for h, u in filed}
        nearest = min(distances.values(), default=64)
        if nearest <= MAX_DISTANCE:
            assert found is not None and distances[found] == nearest
        else:
            assert found is None
            filed.append((simhash, url))


def _topic_site(site: SiteServer) -> None:
    off = "cooking pasta recipes tomato basil olive oil garlic " * 20
    on = "telescope galaxy nebula astronomy observation stars " * 20
    site.routes = {
        "/": html_handler(
            '<a href="/off1">recipes</a><a href="/off2">pasta</a><a href="/on1">stars</a>'
            '<a href="/off3">garlic</a><a href="/on2">telescope galaxy</a>'
        ),
        "/on1": html_handler(f"<title>on1</title><p>{on}</p><a href='/on3'>nebula</a>"),
        "/on2": html_handler(f"<title>on2</title><p>{on} nebula</p>"),
        "/on3": html_handler(f"<title>on3</title><p>{on}</p>"),
    }
    for page in ("/off1", "/off2", "/off3"):
        site.routes[page] = html_handler(f"<title>off</title><p>{page} {off}</p>")


def test_focused_crawl_scores_pages_and_goes_best_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "focus.db")
    with SiteServer() as site:
        _topic_site(site)
        report = crawler.run([site.url + "/"], Settings(db=db, query=TOPIC, **FAST))
        order = [p for p in site.paths() if p != "/robots.txt"]
    assert report.pages_ok == 7, site.paths()
    assert order[:2] == ["/", "/on2"]  # the anchor with two query words first
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        scores = {
            url.removeprefix(site.url): score
            for url, score in c.execute("SELECT url, score FROM pages")
        }
        assert c.execute("SELECT count(*) FROM pages WHERE score IS NULL").fetchone() == (0,)
        assert c.execute("SELECT count(*) FROM pages WHERE tokens IS NULL").fetchone() == (0,)
    assert min(scores[p] for p in ("/on1", "/on2", "/on3")) > max(
        scores[p] for p in ("/off1", "/off2", "/off3")
    )
    top = crawler.rank(db, "nebula", top=2)
    assert [p.url.rsplit("/", 1)[1] for p in top] == ["on2", "on1"] or top[0].url.endswith("on2")
    result = CliRunner().invoke(main, ["rank", db, "--query", "pasta", "--top", "3"])
    assert result.exit_code == 0 and result.output.count("/off") == 3


def test_near_duplicates_recorded_and_left_out_of_dedup_export(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "near.db")
    words = [f"word{i % 97} token{i % 89} item{i}" for i in range(400)]
    text_a = " ".join(words)
    words[200] = "changed"
    text_b = " ".join(words)
    with SiteServer() as site:
        site.routes = {
            "/": html_handler('<a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a>'),
            "/a": html_handler(f"<p>{text_a}</p>"),
            "/b": html_handler(f"<p>{text_b}</p>"),
        }
        site.fallback = html_handler("<p>" + " ".join(f"other{i}" for i in range(500)) + "</p>")
        crawler.run([site.url + "/"], Settings(db=db, **FAST))
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        near = dict(c.execute("SELECT url, near_duplicate_of FROM pages"))
    assert near[site.url + "/b"] == site.url + "/a"
    assert near[site.url + "/a"] is None and near[site.url + "/c"] is None
    result = CliRunner().invoke(main, ["export", db, "--dedup"])
    urls = [json.loads(line)["url"] for line in result.stdout.splitlines()]
    assert site.url + "/b" not in urls and site.url + "/a" in urls


def test_gpu_device_without_a_gpu_is_a_usage_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from crawler.relevance.scoring import select_device

    seeds = tmp_path / "s.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    result = CliRunner().invoke(main, [str(seeds), "--query", "x", "--device", "gpu"])
    if select_device("auto") == "cpu":
        assert result.exit_code == 2 and "crawl: error:" in result.stderr


@settings(max_examples=60, deadline=None)
@given(
    st.lists(  # batches of pages: (counts of the query's 3 terms, length)
        st.lists(
            st.tuples(st.tuples(*[st.integers(0, 40)] * 3), st.integers(0, 5_000)),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_crawl_scores_equal_the_serial_kernel(
    batches: list[list[tuple[tuple[int, ...], int]]],
) -> None:
    """The crawl scores in plain Python (``crawler.relevance.bm25``): batch after batch, with the running
    statistics, the scores must be the serial CPU kernel's (the same float64 operations in the
    same order; only the idf's logarithm may differ in its last bit: numpy's ``log1p`` is
    not libm's)."""
    import numpy as np

    focus = Focus(TOPIC, "cpu")
    ids = np.array(focus.ids, dtype=np.uint32)
    stats = BM25Stats(ids)
    for pages in batches:
        docs = [(tf, max(length, sum(tf))) for tf, length in pages]
        got = focus.score_now(docs)
        counts = [
            TokenCounts(ids[[c > 0 for c in tf]], np.array([c for c in tf if c], np.uint32), n)
            for tf, n in docs
        ]
        batch = TokenBatch.from_counts(counts)
        stats.observe(batch)
        want = score_batch(batch, stats, ids, "cpu", parallel=False).tolist()
        assert got == pytest.approx(want, rel=1e-14, abs=0)


CRAWL_ONCE = """
import logging, sys, time
import crawler
from crawler.pool.parse_pool import ParsePool
if __name__ == "__main__":
    url, db, query, slow = sys.argv[1:]
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logging.getLogger("crawler.engine.engine").addHandler(handler)
    logging.getLogger("crawler.engine.engine").setLevel(logging.DEBUG)
    if slow == "slow":  # the workers start late: the crawl process parses the pages itself
        spawn = ParsePool._spawn
        ParsePool._spawn = lambda pool: (time.sleep(0.5), spawn(pool))[1]
    settings = crawler.Settings(db=db, query=query, device="cpu", concurrency=1, per_host=1,
                                delay=0.0, workers=1, progress=False, sitemaps=False)
    assert crawler.run([url], settings).pages_ok == 7
    loaded = [name for name in ("numba", "numpy") if name in sys.modules]
    assert not loaded, loaded
    here = [m for m in messages if "parsed in the crawl process" in m]
    assert here or slow != "slow", messages
"""


@pytest.mark.parametrize("workers", ["slow", "quick"])
def test_a_crawl_with_a_query_on_the_cpu_loads_neither_numba_nor_numpy(  # type: ignore[no-untyped-def]
    tmp_path, workers: str
) -> None:
    """Scoring in the crawl process is a few multiply-adds a page: it must not cost the
    ~0.5 s of CPU that loading numba and its kernels takes at every start (the parse
    workers, which tokenize, load them). Nor do the pages the crawl process parses itself
    while its workers start (with "slow" workers, all of them here)."""
    program = tmp_path / "crawl_once.py"
    program.write_text(CRAWL_ONCE)
    db = tmp_path / "q.db"
    with SiteServer() as site:
        _topic_site(site)
        result = subprocess.run(
            [sys.executable, "-W", "error", str(program), site.url + "/", str(db), TOPIC, workers],
            cwd=REPO,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        scores = dict(c.execute("SELECT url, score FROM pages"))
    on_topic = [scores[site.url + p] for p in ("/on1", "/on2", "/on3")]
    assert min(on_topic) > max(scores[site.url + p] for p in ("/off1", "/off2", "/off3"))


def test_a_bad_batch_leaves_the_statistics_alone() -> None:
    from crawler.relevance.bm25 import TermScorer

    scorer = TermScorer((1, 2))
    with pytest.raises(ValueError, match="1 term counts for a query of 2 terms"):
        scorer.observe([((1, 0), 10), ((3,), 5)])
    assert (scorer.n_docs, scorer.total_length, scorer.df) == (0, 0, [0, 0])
    with pytest.raises(ValueError, match="distinct"):
        TermScorer((1, 1))


def _harvest(shape: str, pages: int, budget: int, tmp_path, **extra: object) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """A BFS and a focused crawl of ``bench/shapesite.py``'s ``shape`` site, ``budget``
    pages each: what each collected."""
    from bench.shapesite import build

    site_pages = build(shape, pages, seed=3)
    routes = {path: html_handler(body) for path, body in site_pages.pages.items()}
    out: dict[str, object] = {}
    with SiteServer(routes) as server:
        for mode in ("bfs", "focused"):
            db = str(tmp_path / f"{shape}-{mode}.db")
            query = {"query": site_pages.query} if mode == "focused" else {}
            settings = dict(FAST, concurrency=4, per_host=4, max_pages=budget, **extra)
            crawler.run([server.url + "/"], Settings(db=db, **query, **settings))
            with contextlib.closing(sqlite3.connect(db)) as c, c:
                rows = c.execute("SELECT url, score FROM pages WHERE status = 200").fetchall()
            on = [s for u, s in rows if u.removeprefix(server.url) in site_pages.on_topic]
            off = [s for u, s in rows if u.removeprefix(server.url) not in site_pages.on_topic]
            out[mode] = len(on)
            out[f"{mode}-pages"] = len(rows)
            out[f"{mode}-scores"] = (on, off)
    return out


def test_a_focused_crawl_keeps_its_focus_where_the_topic_is_a_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The shape of a site nobody tuned the crawler on (bench/shapesite.py ``clusters``):
    10 % of the pages on the topic, two of twenty hubs on it, off-topic pages linking into
    the topic with bland anchors. With a budget of 10 % of the site the focused crawl
    collects more than 5x breadth-first's on-topic pages, nearly all of its budget, every
    page scored, the on-topic pages scored higher."""
    got = _harvest("clusters", 3000, 300, tmp_path)
    assert got["bfs-pages"] == got["focused-pages"] == 300
    assert got["focused"] >= 270, got  # type: ignore[operator]
    assert got["focused"] >= 5 * got["bfs"], got  # type: ignore[operator]
    on, off = got["focused-scores"]  # type: ignore[misc]
    assert None not in on and None not in off
    assert sorted(on)[len(on) // 2] > max(off, default=0.0)


def test_a_focused_crawl_tunnels_through_off_topic_pages(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``tunnel``: no hub is on the topic, which lies behind a bridge page reached through
    an off-topic hub: breadth-first finds next to nothing, the focused crawl finds the
    bridges and then stays in the cluster."""
    got = _harvest("tunnel", 1000, 100, tmp_path)
    assert got["focused"] >= 40 and got["bfs"] <= 10, got  # type: ignore[operator]


def test_query_words_counted_here_equal_the_workers_counts() -> None:
    """``Focus.count_here`` (plain Python, for pages parsed before a worker is up) gives a
    page's query-word counts and length as the tokenizer kernel does (no length where no
    query word occurs: the relevance is 0 whatever it is)."""
    from parsers.worker import text_terms

    focus = Focus("Telescope galaxy NEBULA café 42", "cpu")
    rng = random.Random(7)
    words = ["telescope", "Galaxy", "nebula", "café", "42", "x", "naïve", "a-b", "C++", "日本"]
    for _ in range(50):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 300)))
        _, length, _, tf = text_terms(text, focus.ids)
        assert focus.count_here(text) == (tf, length if any(tf) else 0), text
