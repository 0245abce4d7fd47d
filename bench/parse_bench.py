"""A parse worker's cost per page, in process: for A/B tests of parser changes.

    python bench/parse_bench.py [--pages 600] [--rounds 9] [--repo PATH]

Whole crawls on a 2-core machine cannot resolve a few per cent: the machine's speed drifts by
10-25 % within minutes, and the second crawl of an interleaved pair runs faster than the first
(bench/RESULTS.md, session 11). This times what a parse worker does with a batch
(``parsers.html.parse_batch``: lexbor, links, text, tokens, SimHash, the outlink memo) on
files read into memory, one process, no I/O: the minimum over --rounds rounds moved by ~5 %
between runs on the session 11 machine, where whole crawls moved by 25 %. Corpora: the first --pages pages of the synthetic site (bench/sitegen.py,
generated under bench/work/ if missing) and of the Python HTML docs where installed
(/usr/share/doc/python3.*/html, Debian's python3-doc), each without and with a 3-word query
(anchor words counted, query-term counts). The kernels are loaded before timing.

--repo times another checkout's ``parsers`` (for A/B: run this with --repo A, --repo B,
alternately, a few times each). --stages also splits a page's cost into the steps of
``parsers.html.parse_page`` (with the query): where a worker's time goes, for the tree's
steps and, where the scan of lexbor's tokens runs (``parsers.page_scan``), for its steps.
"""

from __future__ import annotations

import argparse
import glob
import inspect
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
SITE_DIR = BENCH / "work" / "parse-site"
SITE_URL = "http://127.0.0.1:18089"


def corpora(pages: int) -> dict[str, tuple[str, Path, list[Path]]]:
    """name -> (base URL, root directory, files)."""
    sys.path.insert(0, str(BENCH))
    from sitegen import ensure_site

    ensure_site(SITE_DIR, 2_000, SITE_URL)
    found = {"site": (SITE_URL, SITE_DIR, sorted(SITE_DIR.glob("**/*.html"))[:pages])}
    docs = sorted(glob.glob("/usr/share/doc/python3.*/html"))
    if docs:
        root = Path(docs[-1])
        found["docs"] = ("http://127.0.0.1:18090", root, sorted(root.glob("**/*.html"))[:pages])
    else:
        print("no /usr/share/doc/python3.*/html (apt-get install python3-doc): site only")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repo", type=Path, default=BENCH.parent)
    parser.add_argument("--stages", action="store_true", help="time each step of a parse too")
    args = parser.parse_args()
    found = corpora(args.pages)
    sys.path.insert(0, str(args.repo.resolve()))
    import parsers.preload  # noqa: F401  - kernels loaded, as in the fork server
    from parsers.worker import keep_batch_buffers

    keep_batch_buffers()  # the heap a worker has (else lexbor faults in pages per parse)
    from parsers import html
    from parsers.page import ParseJob
    from parsers.terms import query_token_ids

    print(f"parsers from {Path(html.__file__).parent}; min (median) of {args.rounds} rounds\n")
    print("| corpus | pages | KB/page | query | us/page |")
    print("|---|---:|---:|---|---:|")
    stages: dict[str, dict[str, float]] = {}
    for name, (base, root, files) in found.items():
        bodies = [(f, f.read_bytes()) for f in files]
        size = sum(len(b) for _, b in bodies) / len(bodies) / 1024
        for query in ("", "python event loop" if name == "docs" else "kosa derilepu page"):
            jobs = []
            for path, body in bodies:
                url = f"{base}/{path.relative_to(root).as_posix()}"
                jobs.append(ParseJob(url, url, 200, "text/html", None, body,
                                     query_terms=tuple(query.split()),
                                     query_ids=query_token_ids(query) if query else ()))  # fmt: skip
            html.parse_batch(jobs[:20])  # warm
            times = []
            for _ in range(args.rounds):
                html._offered.clear()  # every round sees the links as new, like a fresh worker
                start = time.perf_counter()
                html.parse_batch(jobs)
                times.append((time.perf_counter() - start) / len(jobs) * 1e6)
            print(f"| {name} | {len(jobs)} | {size:.1f} | {query or '-'} | "
                  f"{min(times):.0f} ({statistics.median(times):.0f}) |")  # fmt: skip
        if args.stages:
            stages[f"{name}, the tree's steps"] = stage_times(html, jobs, args.rounds)
            if getattr(getattr(html, "page_scan", None), "scans", False):
                stages[f"{name}, the scan's steps"] = scan_stage_times(html, jobs, args.rounds)
    for name, times in stages.items():
        print(f"\n{name}, with the query: us/page by step, min of {args.rounds} rounds\n")
        print("| " + " | ".join(times) + " | sum |")
        print("|" + "---:|" * (len(times) + 1))
        print(
            "| "
            + " | ".join(f"{t:.0f}" for t in times.values())
            + f" | {sum(times.values()):.0f} |"
        )


def stage_times(html: Any, jobs: list[Any], rounds: int) -> dict[str, float]:
    """The steps of ``html.parse_page`` timed one by one (min over ``rounds`` of their total
    over ``jobs``), us a page. Mirrors ``parse_page`` without its rarer branches. Where the
    C walk reads the text with the links (``_links``' ``text_below``), "links" holds both and
    "visible text" is next to nothing: compare their sum with an older tree's."""
    from parsers.native import page_terms
    from parsers.page import content_hash

    best: dict[str, float] = {}
    for _ in range(rounds):
        html._offered.clear()
        spent = dict.fromkeys(STAGES, 0.0)
        for job in jobs:
            t0 = time.perf_counter()
            tree = html._document(job)
            t1 = time.perf_counter()
            html._head(tree)
            t2 = time.perf_counter()
            walk = html.tree_walk.native  # the C walk, where it runs (parse_document's choice)
            invisible: list[Any] | None = [] if walk is None else None
            args = (tree, job.final_url, job.max_links, frozenset(job.query_terms),
                    html._offered, 1, invisible, None, walk)  # fmt: skip
            if "text_below" in inspect.signature(html._links).parameters:  # read in one walk
                below = html.tree_walk.text_root(tree) if walk is not None else None
                links, _, _, text = html._links(*args, below)
            else:  # a tree from before it (``--repo``)
                (links, _, _), text = html._links(*args), None
            if invisible:
                html.remove(invisible)
            t3 = time.perf_counter()
            if text is None:
                text = html.visible_text(tree, walk)
            t4 = time.perf_counter()
            page_terms(text, job.query_ids)
            t5 = time.perf_counter()
            content_hash(job.body)
            html.links_json(links)
            t6 = time.perf_counter()
            for stage, spent_s in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5),
                                      strict=True):  # fmt: skip
                spent[stage] += spent_s
        for stage, total in spent.items():
            best[stage] = min(best.get(stage, total), total)
    return {stage: total / len(jobs) * 1e6 for stage, total in best.items()}


STAGES = ("lexbor parse", "head", "links", "visible text", "tokens + SimHash", "hash + links JSON")


def scan_stage_times(html: Any, jobs: list[Any], rounds: int) -> dict[str, float]:
    """``stage_times`` for the pages read from lexbor's tokens (``parsers.page_scan``, which
    ``parse_document`` tries first): the scan itself (links, text, head in one pass, no
    tree), the links resolved and kept, the terms, the hash and JSON; us a page over the
    pages the scan reads (min over ``rounds``)."""
    from parsers.links import Resolver, resolve_url
    from parsers.native import page_terms, resolve_all
    from parsers.page import content_hash

    steps = ("scan (no tree)", "links", "tokens + SimHash", "hash + links JSON")
    best: dict[str, float] = {}
    read = 0
    for _ in range(rounds):
        html._offered.clear()
        spent = dict.fromkeys(steps, 0.0)
        read = 0
        for job in jobs:
            t0 = time.perf_counter()
            scanned = html.page_scan.scan(html._markup(job), 4 * job.max_links)
            t1 = time.perf_counter()
            if scanned is None:
                continue
            read += 1
            base = resolve_url(job.final_url, scanned.head.base) if scanned.head.base else None
            resolver = Resolver(base or job.final_url)
            urls = html.page_scan.resolve(resolver, scanned.hrefs, resolve_all)
            links, _, _ = html._kept(urls, scanned.rels, job.max_links, frozenset(job.query_terms),
                                     html._offered, 1, html.tree_walk.native, scanned.anchors,
                                     scanned.anchors.text)  # fmt: skip
            t2 = time.perf_counter()
            page_terms(scanned.text, job.query_ids)
            t3 = time.perf_counter()
            content_hash(job.body)
            html.links_json(links)
            t4 = time.perf_counter()
            for step, spent_s in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                spent[step] += spent_s
        for step, total in spent.items():
            best[step] = min(best.get(step, total), total)
    return {step: total / max(read, 1) * 1e6 for step, total in best.items()}


if __name__ == "__main__":
    main()
