"""Pull structured data out of every page with an ``extract`` hook; write it as JSON Lines.

What it shows:

- an ``extract`` hook: a function ``(tree, url) -> JSON value`` that the crawler runs in
  its parse worker processes, on the document they have parsed anyway (a selectolax
  ``LexborHTMLParser``: ``tree.css(...)``, ``tree.css_first(...)``). There is no second
  parse, and no HTML travels back to the main process: only the hook's small result;
- the rules for the hook: define it at module level (the workers import it by name,
  from your script re-imported as ``spawn`` does; a lambda or a nested function is refused with
  ``ConfigError``), return what ``json.dumps`` accepts, and do not modify the tree. If it
  raises on a page, that page is stored without an extract and a warning is logged;
- its result twice: on ``CrawledPage.extract`` while streaming, and in the database
  (``SELECT url, extract FROM pages``, a JSON text column) for later.

Run it::

    python examples/custom_extract.py https://example.com/ --out pages.jsonl --max-pages 50

Each line of the output is one HTML page: ``{"url", "title", "h1", "h2", "description",
"links", "images", "words"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import crawler


def extract_fields(tree: Any, url: str) -> dict[str, Any]:
    """The hook: runs in a parse worker, once per HTML page. ``tree`` is the parsed page."""
    description = tree.css_first('meta[name="description"]')
    body = tree.body
    return {
        "h1": [node.text(strip=True) for node in tree.css("h1")],
        "h2": [node.text(strip=True) for node in tree.css("h2")],
        "description": description.attributes.get("content") if description else None,
        "links": len(tree.css("a[href]")),
        "images": len(tree.css("img")),
        "words": len(body.text(separator=" ").split()) if body is not None else 0,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("seeds", nargs="+", help="absolute http(s) URLs to start from")
    parser.add_argument("--out", default="pages.jsonl", help="JSON Lines file to write")
    parser.add_argument("--db", default="crawl.db", help="SQLite file the crawl writes to")
    parser.add_argument("--max-pages", type=int, default=None, help="stop after this many")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds between requests")
    parser.add_argument("--workers", type=int, default=None, help="parse processes")
    return parser.parse_args(argv)


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    settings = crawler.Settings(db=args.db, max_pages=args.max_pages, delay=args.delay,
                                workers=args.workers, progress=False)  # fmt: skip
    written = 0
    with open(args.out, "w", encoding="utf-8") as out:
        async with crawler.Crawler(settings, extract=extract_fields) as crawl:
            async for page in crawl.pages(args.seeds):
                if page.extract is None:  # not HTML, an error page, or the hook failed
                    continue
                record = {"url": page.url, "title": page.title, **page.extract}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
    report = crawl.report
    assert report is not None  # set when the loop has ended
    print(f"{written} pages with an extract written to {args.out}; "
          f"crawl {report.status} ({report.reason}): {report.pages_ok} ok, "
          f"{report.pages_failed} failed")  # fmt: skip
    return 0


if __name__ == "__main__":  # required: the parse workers re-import this file
    sys.exit(asyncio.run(main(sys.argv[1:])))
