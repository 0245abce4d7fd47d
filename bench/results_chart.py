"""Draw bench/RESULTS.md's chart: pages/s by crawler and corpus, from crawl_bench's JSON.

    python bench/results_chart.py [--site bench/results/crawl-site.json]
        [--docs bench/results/crawl-docs.json] [--out bench/results.png]

`python bench/crawl_bench.py ... --json FILE` writes one corpus's medians; each file may
hold the peers of several runs of it (a later run's peers replace an earlier's, see
`crawl_bench.save_json`). The chart is one panel per corpus, a bar per crawler (log
scale: Scrapy and Wget2 differ 40-fold), each bar labelled with its pages/s and, for the
peers, with what ours is to them. Drawn by matplotlib (Agg, no display).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
ORDER = ("ours", "wget2", "fetch", "single", "crawlee", "scrapy")
"""Bars top to bottom: ours, then the peers from the fastest kind to the slowest."""
COLOURS = {"ours": "#1f6feb", "fetch": "#8b949e"}
PEER_COLOUR = "#d29922"


def load(path: Path) -> dict[str, object] | None:
    """One corpus's results, or None where the file is missing."""
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def draw(corpora: list[tuple[str, dict]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(corpora), 1, figsize=(8.5, 2.1 + 1.9 * len(corpora)),
                             squeeze=False)  # fmt: skip
    for ax, (title, data) in zip(axes[:, 0], corpora, strict=True):
        peers = data["peers"]
        names = [n for n in ORDER if n in peers]
        rates = [peers[n]["pages_per_s"] for n in names]
        labels = [peers[n].get("label", n) for n in names]
        ours = peers.get("ours", {}).get("pages_per_s")
        y = list(range(len(names)))[::-1]
        bars = ax.barh(y, rates, color=[COLOURS.get(n, PEER_COLOUR) for n in names])
        ax.set_xscale("log")
        ax.set_yticks(y, labels)
        ax.set_xlim(min(rates) / 2, max(rates) * 6)
        for bar, name, rate in zip(bars, names, rates, strict=True):
            text = f"{rate:,.0f} pages/s"
            if ours and name != "ours":
                text += f"  (ours {ours / rate:.2f}x)"
            ax.text(bar.get_width() * 1.08, bar.get_y() + bar.get_height() / 2, text,
                    va="center", fontsize=8.5)  # fmt: skip
        ax.set_title(f"{title}: {data.get('caption', '')}", fontsize=10, loc="left")
        ax.grid(axis="x", which="both", alpha=0.25)
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1, 0].set_xlabel("pages/s (log scale; median of the runs, peers alternating)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=RESULTS_DIR / "crawl-site.json")
    parser.add_argument("--docs", type=Path, default=RESULTS_DIR / "crawl-docs.json")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results.png")
    args = parser.parse_args(argv)
    corpora = [(title, data) for title, path in (("Synthetic site", args.site),
               ("Python docs", args.docs)) if (data := load(path)) is not None]  # fmt: skip
    if not corpora:
        print(f"no results: run crawl_bench.py with --json {args.site} first", file=sys.stderr)
        return 2
    draw(corpora, args.out)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
