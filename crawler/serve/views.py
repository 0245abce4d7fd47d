"""The HTML of ``crawl serve``'s views, from the JSON-ready dicts its API returns.

Owns: every page's markup. Pure: dicts in, HTML text out. Invariant: every string that
came from the database (and so from a site: titles, URLs, headers, text, reasons) goes
through ``escape`` or ``_link`` (which also refuses any scheme but http and https as a link
target); no inline script or style is written, so the Content-Security-Policy can forbid
both; a view of a running crawl refreshes itself (``<meta http-equiv=refresh>``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from crawler.serve.chart import bars, line_chart, rates

REFRESH_S = 5
"""A view of a running crawl reloads itself this often."""


def _text(value: object) -> str:
    return "" if value is None else escape(str(value))


TITLE_CHARS = 300
"""A page title shown at most this long (a site's <title> can be megabytes)."""


def shown_title(value: object) -> str:
    """A stored title (or URL) cut to ``TITLE_CHARS`` for display; the JSON keeps it whole."""
    text = "" if value is None else str(value)
    return text if len(text) <= TITLE_CHARS else text[:TITLE_CHARS] + "…"


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else _text(value)


def _link(url: object, label: object | None = None) -> str:
    """A link to a site's URL, only for http(s) targets; any other is shown as text."""
    text = _text(url if label is None else label)
    if isinstance(url, str) and url.lower().startswith(("http://", "https://")):
        return f'<a href="{escape(url, quote=True)}" rel="noreferrer noopener nofollow">{text}</a>'
    return text


def page_link(url: str, label: object | None = None) -> str:
    """A link to this server's view of the stored page ``url``."""
    text = _text(url if label is None else label)
    return f'<a href="/page?{urlencode({"url": url})}">{text}</a>'


def _bytes(n: object) -> str:
    if not isinstance(n, int):
        return ""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    return str(n)


def duration_s(started: object, ended: object, now: float) -> float | None:
    """Seconds between two ISO-8601 times (``now`` for a run still running)."""
    try:
        start = datetime.fromisoformat(str(started)).timestamp()
        end = datetime.fromisoformat(str(ended)).timestamp() if ended else now
    except ValueError:
        return None
    return max(0.0, end - start)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def layout(title: str, body: str, db: str, *, refresh: bool = False, query: str = "") -> str:
    """A whole page: head (styles from /static, no script), navigation, search box, body."""
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{escape(title)} · crawl serve</title>"
        '<link rel="stylesheet" href="/static/style.css"><link rel="icon" href="/static/icon.svg">'
        "</head><body><header><nav>"
        '<a class="brand" href="/">crawl serve</a><a href="/">Overview</a>'
        '<a href="/hosts">Hosts</a><a href="/api">API</a>'
        f'<span class="db">{escape(db)}</span></nav>'
        '<form class="search" action="/search" method="get" role="search">'
        f'<input type="search" name="q" value="{escape(query, quote=True)}" maxlength="500" '
        'placeholder="Search the crawl" aria-label="Search the crawl">'
        "<button type=submit>Search</button></form></header>"
        f"<main>{body}</main></body></html>"
    )


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    cells = "".join(f"<th scope=col>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'


def overview(data: dict[str, Any], now: float) -> str:
    """``/``: the runs, the newest (or running) run's chart, status mix, errors, skips, queue."""
    runs = data["runs"]
    counts = data["counts"]
    running = [run for run in runs if run["status"] == "running"]
    parts = ["<h1>Overview</h1>"]
    live = data.get("live")
    if running and live:
        parts.append(
            '<section class="live"><h2>Running now: run '
            f'#{_text(running[0]["id"])}</h2><dl class="figures">'
            f"<div><dt>pages</dt><dd>{_num(live['done'])}</dd></div>"
            f"<div><dt>failed</dt><dd>{_num(live['failed'])}</dd></div>"
            f"<div><dt>queued</dt><dd>{_num(live['queued'])}</dd></div>"
            f"<div><dt>in flight</dt><dd>{_num(live['in_flight'])}</dd></div>"
            f"<div><dt>downloaded</dt><dd>{_bytes(live['bytes'])}</dd></div>"
            f"<div><dt>elapsed</dt><dd>{_duration(live['elapsed_s'])}</dd></div>"
            "</dl></section>"
        )
    chart_run = data.get("chart_run")
    if chart_run is not None:
        pages, errors = rates(data["samples"])
        title = f"Run #{chart_run}: pages/s and errors/s over the run"
        parts.append(f"<section><h2>{escape(title)}</h2>")
        if pages:
            parts.append(line_chart(title, [("pages/s", "pages", pages),
                                            ("errors/s", "errors", errors)], "per second"))  # fmt: skip
        else:
            parts.append('<p class="empty">no progress samples for this run yet</p>')
        parts.append("</section>")
    rows = []
    for run in runs:
        seconds = duration_s(run["started_at"], run["ended_at"], now)
        rows.append([
            f'<a href="/?run={run["id"]}">#{_text(run["id"])}</a>',
            f'<span class="status {_text(run["status"])}">{_text(run["status"])}</span>',
            _text(run["reason"]), _text(run["started_at"]), _duration(seconds),
            _num(run["pages_ok"]), _num(run["pages_failed"]), _num(run["pages_unchanged"]),
            _bytes(run["bytes"]),
        ])  # fmt: skip
    parts.append("<section><h2>Runs</h2>")
    head = ["run", "status", "reason", "started (UTC)", "duration", "ok", "failed", "unchanged",
            "bytes"]  # fmt: skip
    parts.append(_table(head, rows, "runs") if rows else '<p class="empty">no runs yet</p>')
    parts.append("</section>")
    queue = counts["queue"]
    parts.append(
        '<section class="grid3"><div><h2>Queue</h2><dl class="figures">'
        f"<div><dt>queued</dt><dd>{_num(queue['queued'])}</dd></div>"
        f"<div><dt>due now</dt><dd>{_num(queue['due_now'])}</dd></div>"
        f"<div><dt>due later</dt><dd>{_num(queue['due_later'])}</dd></div>"
        f"<div><dt>pages stored</dt><dd>{_num(counts['pages'])}</dd></div>"
        f"<div><dt>URLs known</dt><dd>{_num(counts['urls'])}</dd></div></dl></div>"
        "<div><h2>Status mix</h2>"
        + bars("pages by HTTP status", list(counts["by_status"].items()), "bar")
        + "</div><div><h2>Errors by kind</h2>"
        + bars("errors by kind", list(counts["errors"].items()), "bar bad")
        + "</div><div><h2>Skipped URLs by reason</h2>"
        + bars("skipped URLs by reason", list(counts["skipped"].items()), "bar skip")
        + "</div></section>"
    )
    return "".join(parts)


HOST_COLUMNS = (("origin", "host"), ("done", "pages"), ("failed", "failed"),
                ("errors", "errors"), ("s429", "429"), ("s503", "503"), ("queued", "queued"),
                ("skipped", "skipped"))  # fmt: skip


def hosts(rows: list[dict[str, Any]], sort: str, offset: int, limit: int) -> str:
    """``/hosts``: one row per origin, sortable by each count."""
    head = [
        (f"<b>{label}</b>" if key == sort else f'<a href="/hosts?sort={key}">{label}</a>')
        for key, label in HOST_COLUMNS
    ] + ["robots.txt", "Crawl-delay"]
    body = []
    for row in rows:
        robots = "not fetched" if row["robots_status"] is None else f"HTTP {row['robots_status']}"
        delay = row.get("crawl_delay_s")
        body.append([_link(row["origin"]), *(_num(row[key]) for key, _ in HOST_COLUMNS[1:]),
                     _text(robots), "" if delay is None else f"{delay:g} s"])  # fmt: skip
    pager = _pager("/hosts", {"sort": sort}, offset, limit, len(rows))
    return (
        "<h1>Hosts</h1>"
        + (_table(head, body, "hosts") if body else '<p class="empty">no hosts</p>')
        + pager
        + '<p class="note">429 and 503 count pages whose last answer was that status. '
        "The adaptive delay a run keeps per host lives in its memory and is not stored.</p>"
    )


def _pager(path: str, params: dict[str, str], offset: int, limit: int, shown: int) -> str:
    links = []
    if offset > 0:
        links.append(f'<a rel="prev" href="{path}?'
                     f'{escape(urlencode({**params, "offset": max(0, offset - limit)}))}">'
                     "← previous</a>")  # fmt: skip
    if shown >= limit:
        links.append(f'<a rel="next" href="{path}?'
                     f'{escape(urlencode({**params, "offset": offset + limit}))}">next →</a>')  # fmt: skip
    return f'<nav class="pager">{" ".join(links)}</nav>' if links else ""


def search(data: dict[str, Any]) -> str:
    """``/search?q=``: ranked pages with title, URL, score and a marked snippet."""
    query = data["query"]
    if not query:
        return "<h1>Search</h1><p>Type words to find in the crawled pages.</p>"
    results = data["results"]
    parts = [f"<h1>Search: {escape(query)}</h1>",
             f'<p class="note">{_num(data["pages"])} pages indexed; ranked by BM25 on '
             f'{escape(data["device"])} in {data["took_ms"]:.1f} ms.</p>']  # fmt: skip
    if not results:
        parts.append('<p class="empty">no page holds these words</p>')
    items = []
    for result in results:
        title = shown_title(result["title"] or result["url"])
        items.append(
            f'<li value="{result["rank"]}"><h2>{page_link(result["url"], title)}</h2>'
            f'<div class="url">{_link(result["url"])}</div>'
            f'<div class="score">score {result["score"]:.4f}</div>'
            f'<p class="snippet">{result["snippet_html"]}</p></li>'
        )
    if items:
        parts.append(f'<ol class="results">{"".join(items)}</ol>')
    parts.append(_pager("/search", {"q": query}, data["offset"], data["limit"], len(results)))
    return "".join(parts)


def _header_table(title: str, headers: Any) -> str:
    """``title`` over a table of ``headers`` ((name, value) pairs, or a dict)."""
    pairs = headers.items() if isinstance(headers, dict) else headers
    lines = []
    for pair in pairs if isinstance(pairs, Iterable) else ():
        name, value = pair if isinstance(pair, tuple | list) and len(pair) == 2 else (pair, "")
        lines.append([_text(name), _text(value)])
    return f"<h2>{escape(title)}</h2>" + _table(["name", "value"], lines, "headers")


def page(data: dict[str, Any]) -> str:
    """``/page?url=``: one stored page and where it stands in the frontier."""
    title = shown_title(data["title"] or data["url"])
    facts = [
        ("URL", _link(data["url"])), ("final URL", _link(data["final_url"])),
        ("status", _text(data["status"])), ("error", _text(data["error"])),
        ("content type", _text(data["content_type"])), ("language", _text(data["lang"])),
        ("score", _num(data["score"])), ("depth", _num(data["depth"])),
        ("size", _bytes(data["body_bytes"])), ("fetched", _text(data["fetched_at"])),
        ("run", _text(data["run_id"])), ("attempts", _num(data["attempts"])),
        ("canonical", _link(data["canonical"])), ("meta robots", _text(data["meta_robots"])),
        ("duplicate of", page_link(data["duplicate_of"]) if data["duplicate_of"] else ""),
        ("near-duplicate of",
         page_link(data["near_duplicate_of"]) if data["near_duplicate_of"] else ""),
        ("SimHash", _text(data["simhash"])), ("content hash", _text(data["content_hash"])),
        ("previous version", _text(data["previous_hash"])),
        ("changed at", _text(data["changed_at"])), ("ETag", _text(data["etag"])),
        ("Last-Modified", _text(data["last_modified"])), ("URL state", _text(data["state"])),
        ("next fetch", _text(data["next_fetch"])),
        ("recrawl interval", _duration(data["interval_s"])),
        ("linked from", f"{_num(data['inlinks'])}{'+' if data['inlinks_capped'] else ''} "
                        "stored pages"),
    ]  # fmt: skip
    rows = "".join(f"<tr><th scope=row>{k}</th><td>{v}</td></tr>" for k, v in facts if v)
    parts = [f"<h1>{escape(str(title))}</h1>", f'<table class="facts">{rows}</table>']
    headers = data["headers"]
    if isinstance(headers, dict) and "headers" in headers:  # the stored exchange (--store-body)
        status = " ".join(str(headers.get(k) or "") for k in ("status", "reason")).strip()
        line = f"HTTP/{headers.get('http_version') or '1.1'} {status}"
        parts.append(_header_table(f"Response headers ({line})", headers["headers"]))
        request = headers.get("request")
        if isinstance(request, dict) and request.get("headers"):
            parts.append(_header_table("Request headers (as sent)", request["headers"]))
    elif headers:
        parts.append(_header_table("Response headers", headers))
    links = data["outlinks"]
    shown = f"{len(links):,} of {data['outlinks_total']:,}" if links else "none"
    parts.append(f"<h2>Outlinks ({shown})</h2>")
    if links:
        parts.append('<ul class="links">' + "".join(
            f"<li>{page_link(link)} {_link(link, '↗')}</li>" for link in links) + "</ul>")  # fmt: skip
    return "".join(parts)


def api_index(endpoints: Sequence[tuple[str, str]]) -> str:
    """``/api``: what each JSON endpoint returns."""
    rows = [[f"<code>{escape(path)}</code>", escape(what)] for path, what in endpoints]
    return "<h1>JSON API</h1>" + _table(["endpoint", "returns"], rows, "api")


def error(status: int, message: str) -> str:
    return f'<h1>{status}</h1><p class="empty">{escape(message)}</p>'
