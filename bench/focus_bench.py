"""Crawl-time scoring cost on each device: what ``--query`` adds to the crawl process.

    python bench/focus_bench.py [--pages 20000] [--batch 32] [--terms 3]

A crawl scores pages a batch at a time from the counts of the query's terms in each page
(``crawler.relevance.focus.Focus.score_now``; the parse workers count them). This times, per device
available here ("cpu" always; "gpu" where CUDA works):
- start: building a ``Focus`` (on the GPU: importing numba.cuda, compiling the kernel and
  the one-document probe), in a fresh interpreter, so that nothing is loaded already;
- per page: ``score_now`` over --pages pages in batches of --batch (the pool's batch size),
  the running statistics updated batch after batch as in a crawl.
Scores of the two devices must agree (checked). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

START = """
import sys, time
t = time.perf_counter()
from crawler.relevance.focus import Focus
f = Focus("alpha beta gamma", sys.argv[1])
print(f.device, time.perf_counter() - t)
"""


def start_s(device: str) -> tuple[str, float]:
    out = subprocess.run([sys.executable, "-c", START, device], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.split()  # fmt: skip
    return out[0], float(out[1])


def batches(
    pages: int, batch: int, terms: int, seed: int = 7
) -> list[list[tuple[tuple[int, ...], int]]]:
    rng = random.Random(seed)
    docs = [(tuple(rng.choice((0, 0, 0, 1, 2, 5)) for _ in range(terms)), rng.randint(200, 4000))
            for _ in range(pages)]  # fmt: skip
    return [docs[i : i + batch] for i in range(0, pages, batch)]


def per_page_us(
    device: str, work: list[list[tuple[tuple[int, ...], int]]], query: str
) -> tuple[float, list[float]]:
    from crawler.relevance.focus import Focus

    focus = Focus(query, device)
    focus.score_now(work[0])  # warm: the GPU's first launch
    focus = Focus(query, device)
    t = time.perf_counter()
    scores = [s for b in work for s in focus.score_now(b)]
    return (time.perf_counter() - t) / sum(map(len, work)) * 1e6, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--terms", type=int, default=3)
    args = parser.parse_args()
    from crawler.relevance.scoring import select_device

    query = " ".join(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"][: args.terms])
    devices = ["cpu"] + (["gpu"] if select_device("auto") == "gpu" else [])
    work = batches(args.pages, args.batch, args.terms)
    rows, results = [], {}
    for device in devices:
        chosen, start = start_s(device)
        us, scores = per_page_us(device, work, query)
        results[device] = scores
        rows.append((device, chosen, start, us))
    if "gpu" in results:
        worst = max(
            abs(a - b) / max(abs(b), 1e-12)
            for a, b in zip(results["gpu"], results["cpu"], strict=True)
        )
        assert worst < 1e-6, worst
    print(f"{args.pages:,} pages in batches of {args.batch}, {args.terms}-term query; "
          f"devices: {', '.join(devices)}\n")  # fmt: skip
    print("| device | Focus start (fresh interpreter) | score_now per page | per batch |")
    print("|---|---:|---:|---:|")
    for device, chosen, start, us in rows:
        print(f"| {device} ({chosen}) | {start:.2f} s | {us:.2f} us | {us * args.batch:.0f} us |")


if __name__ == "__main__":
    main()
