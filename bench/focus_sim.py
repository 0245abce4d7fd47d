"""A best-first crawl simulated on a site's link graph: the ceiling for a focused crawl.

    python bench/focus_sim.py --shape clusters [--pages 3000] [--budgets 300,750,1500]

The simulation reads every page of a ``bench/shapesite.py`` site (links, anchor texts and
words, parsed with selectolax as the crawler does), then crawls it one page at a time from
``/``, always taking the queued URL of the highest priority, a URL's priority rising as more pages link
to it. Priorities are the crawler's own (``parsers.priority``: the sum over the pages
linking to a URL of their relevance and their anchor's query words), from the same counts, so ``harvest_bench.py``'s ratio of the real crawl to this one measures
what concurrency, politeness and the engine cost the order, not the weighting. No network,
no time: a page is known the moment it is taken.
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser
from shapesite import SHAPES, Site, build

from parsers.priority import REOFFER_MAX, REOFFER_MIN, link_evidence, page_relevance

_WORDS = re.compile(r"\w+")


@dataclass(slots=True)
class Node:
    """A page as the simulation knows it once fetched."""

    relevance: float
    links: list[tuple[str, int]]  # (path, query words in the anchor)


def graph(site: Site) -> dict[str, Node]:
    """Every page of ``site`` parsed: its relevance and its links' anchor hits."""
    query = site.query.lower().split()
    terms = frozenset(query)
    nodes = {}
    for path, body in site.pages.items():
        tree = LexborHTMLParser(body)
        links = []
        for a in tree.css("a[href]"):
            href = a.attributes.get("href") or ""
            anchor = set(_WORDS.findall(a.text().lower()))
            links.append((href, len(terms & anchor)))
        for node in tree.css("a, title"):
            node.decompose()
        words = _WORDS.findall((tree.body.text() if tree.body else "").lower())
        tf = [words.count(q) for q in dict.fromkeys(query)]
        nodes[path] = Node(page_relevance(tf, len(words)), links)
    return nodes


def best_first(nodes: dict[str, Node], query_words: int, budget: int) -> list[str]:
    """The pages a sequential best-first crawl from ``/`` fetches, in order."""
    priority: dict[str, float] = {"/": 0.0}
    heap: list[tuple[float, int, str]] = [(0.0, 0, "/")]
    done: list[str] = []
    fetched: set[str] = set()
    again: dict[str, int] = {}
    seq = 0
    while heap and len(done) < budget:
        negative, _, path = heapq.heappop(heap)
        if path in fetched or priority.get(path) != -negative:
            continue  # fetched, or replaced by a higher entry
        fetched.add(path)
        done.append(path)
        node = nodes.get(path)
        if node is None:
            continue
        for target, hits in node.links:
            if target in fetched:
                continue
            known = priority.get(target)
            evidence = link_evidence(node.relevance, hits if known is None else 0, query_words)
            if known is not None:  # offered again as a parse worker does: from a relevant
                times = again.get(target, 0)  # page, a few times, its anchor not read again
                if node.relevance < REOFFER_MIN or times >= REOFFER_MAX:
                    continue
                again[target] = times + 1
            priority[target] = evidence + (known or 0.0)
            seq += 1
            heapq.heappush(heap, (-priority[target], seq, target))
    return done


def harvest(site: Site, budgets: list[int]) -> dict[int, int]:
    """On-topic pages among the first B pages of the simulated crawl, for each B."""
    order = best_first(graph(site), len(set(site.query.lower().split())), max(budgets))
    return {b: sum(p in site.on_topic for p in order[:b]) for b in budgets}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, default="clusters")
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budgets", default="300,750,1500")
    args = parser.parse_args(argv)
    site = build(args.shape, args.pages, args.seed)
    budgets = [int(b) for b in args.budgets.split(",")]
    for budget, on in harvest(site, budgets).items():
        print(f"{args.shape}: B={budget}: {on} on-topic ({on / budget:.0%}); "
              f"{len(site.on_topic)} on-topic in the site")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
