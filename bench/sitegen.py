"""Generate a deterministic synthetic static web site for the crawl benchmark.

`python bench/sitegen.py OUT_DIR --pages 10000 --base-url http://127.0.0.1:8089 [--seed 1]`

Writes N HTML pages (15-40 KB each: a <title>, <style> and <script> blocks, paragraphs of
Zipfian English-like words) under OUT_DIR, plus `robots.txt`, `urls.txt` (every in-scope URL a
complete crawl must fetch, one a line, the seed `/index.html` first) and `site.json` (the
parameters and counts). Pages live in the root and in subdirectories; about 4 % carry a
`<base href>` pointing at another directory. Each page has 20-80 links in mixed forms:
relative (`p12.html`, `sub/p5.html`, `../a/p7.html`, `./p3.html`), absolute-path
(`/a/b/p7.html`, `/sub/../p7.html`), full absolute (`http://127.0.0.1:PORT/...`), with
fragments (`p9.html#sec2`, `#top`), query duplicates of the hub pages (`p9.html?ref=nav`,
`?ref=footer`: the same file for nginx, distinct URLs for a crawler), external links
(`http://example.invalid/...`, never to be fetched) and `mailto:`. A random spanning tree
rooted at `/index.html` makes every page reachable. robots.txt disallows `/private/`, to
which nothing links. Everything derives from the seeded RNG, so the same arguments give the
same bytes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import posixpath
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

DIRS = ("", "", "", "", "sub", "a", "a/b", "docs", "docs/guide", "docs/guide/deep")
HUBS = 20  # pages 1..HUBS are linked with query variants as well
QUERY_VARIANTS = ("?ref=nav", "?ref=footer")
EXTERNAL = ("http://example.invalid", "https://example.invalid", "http://cdn.example.invalid")
BASE_HREF_SHARE = 0.04
COMMON = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "one",
    "all",
    "we",
    "their",
]
TOPICAL = [
    "crawler",
    "spider",
    "index",
    "search",
    "python",
    "fast",
    "link",
    "page",
    "query",
    "engine",
]
SYLLABLES = [c + v for c in "bcdfghklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ou", "ea")]
ROBOTS = "User-agent: *\nDisallow: /private/\n"
GENERATOR_VERSION = 2  # bump when the output changes, so stale sites are regenerated


@dataclass
class Page:
    """One generated page: its path under the root and where its relative links resolve."""

    idx: int
    path: str
    base_dir: str  # the directory relative links are written against
    base_href: str | None = None
    targets: list[int] = field(default_factory=list)


# ---------------------------------------------------------------- text


def make_vocabulary(rng: random.Random, size: int = 8000) -> list[str]:
    """Common English words first, then syllable-built words; topical words at mid ranks."""
    words = list(COMMON)
    seen = set(words) | set(TOPICAL)
    while len(words) < size:
        word = "".join(rng.choices(SYLLABLES, k=rng.choice((1, 2, 2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    for rank, word in zip(range(150, 1150, 100), TOPICAL, strict=True):
        words.insert(rank, word)
    return words


def make_corpus(rng: random.Random, vocab: list[str], size: int = 400_000) -> list[str]:
    """A long Zipf(s=1.05)-distributed word stream; paragraphs are slices of it."""
    weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(vocab))]
    cum = list(itertools.accumulate(weights))
    return rng.choices(vocab, cum_weights=cum, k=size)


def paragraph(rng: random.Random, corpus: list[str], words: tuple[int, int]) -> str:
    n = rng.randint(*words)
    start = rng.randrange(len(corpus) - n)
    text = " ".join(corpus[start : start + n])
    return text[0].upper() + text[1:] + "."


def style_block(rng: random.Random, idx: int) -> str:
    rules = [
        f".c{idx}-{k} {{ margin: {rng.randint(0, 40)}px; color: #{rng.randrange(16**6):06x}; }}"
        for k in range(rng.randint(15, 40))
    ]
    return "<style>\n" + "\n".join(rules) + "\n</style>"


def script_block(rng: random.Random, corpus: list[str], idx: int) -> str:
    names = rng.sample(corpus[:5000], 12)
    body = "\n".join(
        f"  var {name}_{k} = {rng.randint(0, 10**6)}; // {name} {idx}"
        for k, name in enumerate(names)
    )
    return f"<script>\n(function () {{\n{body}\n  window.page = {idx};\n}})();\n</script>"


# ---------------------------------------------------------------- structure


def layout(rng: random.Random, n_pages: int, base_url: str) -> list[Page]:
    """Place pages in directories, give some a <base href>, and wire the links."""
    pages = [Page(0, "index.html", "")]
    for i in range(1, n_pages):
        directory = rng.choice(DIRS)
        path = f"{directory}/p{i}.html" if directory else f"p{i}.html"
        page = Page(i, path, directory)
        if rng.random() < BASE_HREF_SHARE:
            page.base_dir = rng.choice([d for d in dict.fromkeys(DIRS) if d != directory])
            href_path = f"/{page.base_dir}/" if page.base_dir else "/"
            page.base_href = href_path if rng.random() < 0.5 else base_url + href_path
        pages.append(page)
    for i in range(1, n_pages):  # random recursive tree: every page reachable from index
        pages[rng.randrange(i)].targets.append(i)
    for page in pages:
        want = max(rng.randint(20, 80), len(page.targets) + 5)
        while len(page.targets) < want:
            hub = rng.random() < 0.2
            page.targets.append(rng.randrange(min(100, n_pages)) if hub else rng.randrange(n_pages))
        rng.shuffle(page.targets)
    return pages


def href_for(rng: random.Random, src: Page, target: str, base_url: str) -> str:
    """One link to the site path `target`, in a randomly chosen form."""
    roll = rng.random()
    if roll < 0.50:
        href = posixpath.relpath(target, src.base_dir or ".")
    elif roll < 0.55:
        rel = posixpath.relpath(target, src.base_dir or ".")
        href = rel if rel.startswith("../") else "./" + rel
    elif roll < 0.80:
        href = "/" + target
    elif roll < 0.84:
        href = "/sub/../" + target
    else:
        href = f"{base_url}/{target}"
    if rng.random() < 0.1:
        href += f"#sec{rng.randint(1, 6)}"
    return href


def extra_links(rng: random.Random, pages: list[Page], src: Page) -> list[tuple[str, str | None]]:
    """External, mailto, fragment-only and hub query-variant links: (href, in-scope key)."""
    links: list[tuple[str, str | None]] = []
    for _ in range(rng.randint(1, 4)):
        links.append((f"{rng.choice(EXTERNAL)}/p{rng.randrange(10**5)}.html", None))
    if rng.random() < 0.3:
        links.append(("mailto:webmaster@example.invalid", None))
    if rng.random() < 0.3 and not src.base_href:  # under <base href>, "#x" leaves the page
        links.append((f"#sec{rng.randint(1, 6)}", None))
    hubs = range(1, min(HUBS, len(pages) - 1) + 1)
    chosen = list(hubs) if src.idx == 0 else [h for h in hubs if rng.random() < 0.05]
    for hub in chosen:
        for query in QUERY_VARIANTS if src.idx == 0 else [rng.choice(QUERY_VARIANTS)]:
            rel = posixpath.relpath(pages[hub].path, src.base_dir or ".")
            links.append((rel + query, pages[hub].path + query))
    return links


# ---------------------------------------------------------------- rendering


def render(rng: random.Random, ctx: Site, page: Page) -> tuple[str, set[str]]:
    """The page's HTML and the in-scope keys (path[?query]) it links to."""
    links: list[tuple[str, str | None]] = [
        (href_for(rng, page, ctx.pages[t].path, ctx.base_url), ctx.pages[t].path)
        for t in page.targets
    ]
    links += extra_links(rng, ctx.pages, page)
    rng.shuffle(links)
    keys = {key for _, key in links if key is not None}
    anchors = [
        f'<a href="{href}">{" ".join(rng.sample(ctx.vocab[:400], 2))}</a>' for href, _ in links
    ]
    split = len(anchors) // 2
    nav, inline = anchors[:split], anchors[split:]
    title = " ".join(rng.sample(ctx.vocab[:2000], 4)).title() + f" - page {page.idx}"
    head = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">']
    head.append(f"<title>{title}</title>")
    if page.base_href:
        head.append(f'<base href="{page.base_href}">')
    head += [style_block(rng, page.idx), script_block(rng, ctx.corpus, page.idx), "</head>"]
    body = ['<body id="top">', f"<header><h1>{title}</h1><nav><ul>"]
    body += [f"<li>{a}</li>" for a in nav]
    body.append("</ul></nav></header>\n<main>")
    size = sum(map(len, head)) + sum(map(len, body)) + sum(map(len, inline))
    target_size, section = rng.randint(15_000, 40_000) - 200, 0
    while size < target_size or inline:
        if section < 6 and rng.random() < 0.15:
            section += 1
            body.append(f'<h2 id="sec{section}">{paragraph(rng, ctx.corpus, (2, 6))}</h2>')
        text = paragraph(rng, ctx.corpus, (40, 160))
        if inline:
            take = rng.randint(1, 4)
            text += " " + " ".join(inline[:take])
            del inline[:take]
        body.append(f"<p>{text}</p>")
        size += len(body[-1])
    body.append(f"</main>\n<footer><p>{paragraph(rng, ctx.corpus, (10, 20))}</p></footer>")
    body.append(script_block(rng, ctx.corpus, page.idx) + "\n</body></html>\n")
    return "\n".join(head + body), keys


@dataclass
class Site:
    """Everything `render` needs about the whole site."""

    base_url: str
    pages: list[Page]
    vocab: list[str]
    corpus: list[str]


def generate(out: Path, n_pages: int, base_url: str, seed: int = 1) -> dict[str, object]:
    """Write the site into `out` and return its summary (also written to site.json)."""
    if n_pages < 2:
        raise ValueError("need at least 2 pages")
    base_url = base_url.rstrip("/")
    rng = random.Random(seed)
    vocab = make_vocabulary(rng)
    site = Site(base_url, layout(rng, n_pages, base_url), vocab, make_corpus(rng, vocab))
    out.mkdir(parents=True, exist_ok=True)
    keys: set[str] = {"index.html"}
    total_bytes = 0
    for page in site.pages:
        html, page_keys = render(rng, site, page)
        keys |= page_keys
        target = out / page.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(html)
        total_bytes += len(html)
    return write_manifest(out, site, keys, seed, total_bytes)


def write_manifest(
    out: Path, site: Site, keys: set[str], seed: int, total_bytes: int
) -> dict[str, object]:
    order = {page.path: page.idx for page in site.pages}
    ranked = sorted(keys, key=lambda k: (order[k.split("?")[0]], k))
    (out / "urls.txt").write_text("".join(f"{site.base_url}/{k}\n" for k in ranked))
    (out / "robots.txt").write_text(ROBOTS)
    summary: dict[str, object] = {
        "generator": GENERATOR_VERSION,
        "pages": len(site.pages),
        "seed": seed,
        "base_url": site.base_url,
        "seed_url": f"{site.base_url}/index.html",
        "expected_urls": len(keys),
        "query_variant_urls": len(keys) - len(site.pages),
        "base_href_pages": sum(1 for p in site.pages if p.base_href),
        "total_bytes": total_bytes,
    }
    (out / "site.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# ---------------------------------------------------------------- checking


def verify(out: Path) -> list[str]:
    """Crawl the generated files offline (selectolax + urljoin) and compare with urls.txt."""
    from urllib.parse import urldefrag, urljoin, urlsplit

    from selectolax.lexbor import LexborHTMLParser

    summary = json.loads((out / "site.json").read_text())
    expected = set((out / "urls.txt").read_text().split())
    origin = urlsplit(summary["base_url"]).netloc
    seen, todo, problems = {summary["seed_url"]}, [summary["seed_url"]], []
    while todo:
        url = todo.pop()
        file = out / urlsplit(url).path.lstrip("/")
        if not file.is_file():
            problems.append(f"links to a missing page: {url}")
            continue
        tree = LexborHTMLParser(file.read_bytes())
        base = tree.css_first("base[href]")
        base_url = urljoin(url, base.attributes["href"]) if base else url
        for node in tree.css("a[href]"):
            link = urldefrag(urljoin(base_url, node.attributes["href"] or "")).url
            parts = urlsplit(link)
            if parts.scheme in ("http", "https") and parts.netloc == origin and link not in seen:
                seen.add(link)
                todo.append(link)
    problems += [f"reachable but not in urls.txt: {u}" for u in sorted(seen - expected)[:10]]
    problems += [f"in urls.txt but unreachable: {u}" for u in sorted(expected - seen)[:10]]
    return problems


def ensure_site(out: Path, n_pages: int, base_url: str, seed: int = 1) -> dict[str, object]:
    """Reuse `out` when its site.json matches the parameters, else (re)generate it."""
    stamp = out / "site.json"
    if stamp.exists():
        summary = json.loads(stamp.read_text())
        same = [summary.get(k) for k in ("generator", "pages", "seed", "base_url")]
        if same == [GENERATOR_VERSION, n_pages, seed, base_url.rstrip("/")]:
            return summary
    print(f"[sitegen] generating {n_pages} pages for {base_url} into {out}", flush=True)
    if stamp.exists():  # a stale site: start from an empty directory
        shutil.rmtree(out)
    start = time.perf_counter()
    summary = generate(out, n_pages, base_url, seed)
    print(f"[sitegen] done in {time.perf_counter() - start:.1f} s: {summary}", flush=True)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description="Generate the synthetic benchmark site.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--base-url", default="http://127.0.0.1:8089")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verify", action="store_true", help="offline-crawl the result")
    args = parser.parse_args()
    summary = ensure_site(args.out, args.pages, args.base_url, args.seed)
    print(json.dumps(summary, indent=2))
    if args.verify:
        problems = verify(args.out)
        print("\n".join(problems) if problems else "verify: every URL reachable, urls.txt exact")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
