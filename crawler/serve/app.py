"""``crawl serve``'s web application on aiohttp: the views, their JSON, the safety rules.

Owns: the routes (``ENDPOINTS``: each HTML view at ``/...`` has its JSON at ``/api/...``,
the same data), reading a request's parameters (bounded: ``MAX_LIMIT`` rows a page,
``MAX_OFFSET``, ``MAX_QUERY_CHARS``; a bad one is a 400 that names it), and the headers
every response carries (``_secured``): a ``Content-Security-Policy`` that allows only this
origin's stylesheet and images, no script at all, no framing; ``nosniff``; no referrer.
Served on loopback, it answers only requests named for loopback (``Host``): a page elsewhere
that points its own name at 127.0.0.1 (DNS rebinding) would otherwise read the crawl.
The database is read through ``storage.dashboard`` (read-only, queries with deadlines);
search through ``crawler.serve.search`` (a query slower than ``SEARCH_DEADLINE_S`` is a 503).
"""

from __future__ import annotations

import importlib.resources
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from crawler.policy.robots import RobotsRules
from crawler.serve import views
from crawler.serve.search import MAX_QUERY_CHARS, Search, SearchTimeout, query_words, snippet
from crawler.settings import Settings
from storage.base import StoreError
from storage.dashboard import HOST_SORTS, Dashboard, open_dashboard

MAX_LIMIT = 200
"""Rows a page of hosts or results holds at most."""
MAX_OFFSET = 10_000
"""How deep a pager goes (search ranks offset + limit pages)."""
SEARCH_DEADLINE_S = 5.0
MAX_URL_CHARS = 8192
LIVE_SAMPLE_S = 60.0
"""A run marked running is shown live while its newest progress sample is this recent (a
crawl samples every 2 s): a run whose process died unrecorded (``kill -9``) is not."""
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")  # fmt: skip

ENDPOINTS = (
    ("/api/overview[?run=ID]", "runs (newest first), the chosen (or latest) run's progress "
     "samples and the live figures of a running one, pages by status, errors by kind, skipped "
     "URLs by reason, the queue (queued, due now, due later)"),
    ("/api/runs/{id}/samples", "one run's progress samples: elapsed_s, at, done, failed, "
     "queued, in_flight, bytes (cumulative)"),
    ("/api/hosts[?sort=COL&offset=N&limit=N]", f"one row per origin, sorted by one of "
     f"{', '.join(HOST_SORTS)}: done, failed, queued, skipped URLs; errors, 429s, 503s; "
     "robots.txt status and Crawl-delay"),
    ("/api/search?q=TEXT[&offset=N&limit=N]", "pages ranked by BM25: rank, url, title, score, "
     "snippet_html (escaped, query words in <mark>)"),
    ("/api/page?url=URL", "one stored page: status, final URL, headers, title, language, "
     "score, outlinks, inlinks, duplicates, versions and recrawl schedule"),
)  # fmt: skip

log = logging.getLogger(__name__)

_DASHBOARD = web.AppKey("dashboard", Dashboard)
_SEARCH = web.AppKey("search", Search)
_DB_NAME = web.AppKey("db_name", str)
_HOSTS = web.AppKey("hosts", frozenset)
"""The ``Host`` names (no port) the app answers to; empty: any."""
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class BadParameter(web.HTTPBadRequest):
    def __init__(self, message: str) -> None:
        super().__init__(text=message)
        self.message = message


class NotFound(web.HTTPNotFound):
    """A 404 whose message is the answer's (aiohttp's ``reason`` is a status line: no CR or
    LF, which a requested URL may hold)."""

    def __init__(self, message: str) -> None:
        super().__init__(text=message)
        self.message = message


def _int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadParameter(f"{name}: not a whole number: {raw[:40]!r}") from None
    if not low <= value <= high:
        raise BadParameter(f"{name}: {value} is not between {low} and {high}")
    return value


def _wants_json(request: web.Request) -> bool:
    return request.path.startswith("/api/")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _secured(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Errors as HTML or JSON (never a traceback), and the safety headers on every answer."""
    response: web.StreamResponse
    try:
        if not _host_allowed(request):
            response = _error(request, 421, "this server answers only to its loopback address")
        else:
            response = await handler(request)
    except (BadParameter, NotFound) as exc:
        response = _error(request, exc.status, exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = _error(request, exc.status, exc.reason)
    except SearchTimeout as exc:
        response = _error(request, 503, str(exc))
    except StoreError as exc:
        response = _error(request, 503, str(exc))
    except Exception:  # a defect: logged, and answered as one, with the headers below
        log.exception("crawl serve: %s %s", request.method, request.path)
        response = _error(request, 500, "internal error")
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _host_allowed(request: web.Request) -> bool:
    """Whether the request's ``Host`` (its port aside) is one the app answers to. A request
    without one (HTTP/1.0) is not a browser's, which is what rebinding needs."""
    allowed = request.app[_HOSTS]
    host = request.headers.get("Host")
    if not allowed or host is None:
        return True
    name = host.strip().lower()
    if name.startswith("["):
        name = name[: name.find("]") + 1]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    return name in allowed


def serving_names(host: str) -> frozenset[str]:
    """The ``Host`` names to answer to when listening on ``host``: the loopback names where
    it is a loopback address (or ``localhost``), else any (``frozenset()``)."""
    if host == "localhost":
        return LOOPBACK_NAMES
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return frozenset()
    if not address.is_loopback:
        return frozenset()
    shown = f"[{address}]" if address.version == 6 else str(address)
    return LOOPBACK_NAMES | {shown}


def _error(request: web.Request, status: int, message: str) -> web.Response:
    if _wants_json(request):
        return web.json_response({"error": message, "status": status}, status=status)
    name = request.app[_DB_NAME]
    html = views.layout(str(status), views.error(status, message), name)
    return web.Response(text=html, status=status, content_type="text/html")


def _html(request: web.Request, title: str, body: str, **options: Any) -> web.Response:
    html = views.layout(title, body, request.app[_DB_NAME], **options)
    return web.Response(text=html, content_type="text/html")


# -- data: what each view and its JSON show ------------------------------------------------------


async def overview_data(request: web.Request) -> dict[str, Any]:
    dashboard = request.app[_DASHBOARD]
    now = time.time()
    runs = await dashboard.runs()
    chosen = _int(request, "run", 0, 0, 2**62)
    chart_run = chosen or (runs[0]["id"] if runs else None)
    samples = await dashboard.samples(chart_run) if chart_run is not None else []
    live = None
    running = [run for run in runs if run["status"] == "running"]
    if running:
        latest = samples if running[0]["id"] == chart_run else await dashboard.samples(
            running[0]["id"])  # fmt: skip
        if latest and now - float(latest[-1]["at"]) < LIVE_SAMPLE_S:
            live = latest[-1]
    return {"db": dashboard.name, "runs": runs, "chart_run": chart_run, "samples": samples,
            "live": live, "counts": await dashboard.counts(now)}  # fmt: skip


async def hosts_data(request: web.Request) -> dict[str, Any]:
    sort = request.query.get("sort", "done")
    if sort not in HOST_SORTS:
        raise BadParameter(f"sort: one of {', '.join(HOST_SORTS)}, not {sort[:40]!r}")
    limit = _int(request, "limit", 100, 1, MAX_LIMIT)
    offset = _int(request, "offset", 0, 0, MAX_OFFSET)
    rows = await request.app[_DASHBOARD].hosts(sort, limit, offset)
    agent = Settings().user_agent
    for row in rows:
        body = row.pop("robots_body")
        delay = None
        if row["robots_status"] is not None and 200 <= row["robots_status"] < 300 and body:
            delay = RobotsRules.parse(bytes(body)).crawl_delay(agent)
        row["crawl_delay_s"] = delay
    return {"sort": sort, "offset": offset, "limit": limit, "hosts": rows}


async def search_data(request: web.Request) -> dict[str, Any]:
    query = request.query.get("q", "").strip()
    if len(query) > MAX_QUERY_CHARS:
        raise BadParameter(f"q: longer than {MAX_QUERY_CHARS} characters")
    limit = _int(request, "limit", 10, 1, MAX_LIMIT)
    offset = _int(request, "offset", 0, 0, MAX_OFFSET)
    data: dict[str, Any] = {"query": query, "offset": offset, "limit": limit, "results": [],
                            "device": "", "pages": 0, "took_ms": 0.0}  # fmt: skip
    if not query:
        return data
    started = time.perf_counter()
    found, device, pages = await request.app[_SEARCH].rank(query, offset + limit,
                                                           SEARCH_DEADLINE_S)  # fmt: skip
    found = found[offset : offset + limit]
    data.update(device=device, pages=pages, took_ms=(time.perf_counter() - started) * 1000)
    texts = await request.app[_DASHBOARD].texts([page.url for page in found])
    words = query_words(query)
    data["results"] = [
        {"rank": offset + i, "url": page.url, "title": page.title, "score": page.score,
         "snippet_html": snippet(texts.get(page.url, ""), words)}
        for i, page in enumerate(found, start=1)
    ]  # fmt: skip
    return data


async def page_data(request: web.Request) -> dict[str, Any]:
    url = request.query.get("url", "")
    if not url or len(url) > MAX_URL_CHARS:
        raise BadParameter(f"url: a stored page's URL, at most {MAX_URL_CHARS} characters")
    page = await request.app[_DASHBOARD].page(url)
    if page is None:
        raise NotFound(f"not a stored page: {url[:200]!r}")
    due = page.pop("next_fetch_at")
    page["next_fetch"] = (datetime.fromtimestamp(due, UTC).isoformat(timespec="seconds")
                          if isinstance(due, int | float) else None)  # fmt: skip
    return page


# -- handlers -------------------------------------------------------------------------------------


async def overview(request: web.Request) -> web.Response:
    data = await overview_data(request)
    live = data["live"] is not None  # a run still sampling: the view refreshes itself
    return _html(request, "Overview", views.overview(data, time.time()), refresh=live)


async def hosts(request: web.Request) -> web.Response:
    data = await hosts_data(request)
    body = views.hosts(data["hosts"], data["sort"], data["offset"], data["limit"])
    return _html(request, "Hosts", body)


async def search(request: web.Request) -> web.Response:
    data = await search_data(request)
    return _html(request, f"Search {data['query']}", views.search(data), query=data["query"])


async def page(request: web.Request) -> web.Response:
    data = await page_data(request)
    return _html(request, views.shown_title(data["title"] or data["url"]), views.page(data))


async def api_index(request: web.Request) -> web.Response:
    return _html(request, "API", views.api_index(ENDPOINTS))


def _json(fetch: Callable[[web.Request], Awaitable[dict[str, Any]]]) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(await fetch(request))

    return handler


async def samples(request: web.Request) -> web.Response:
    raw = request.match_info["run"]
    try:
        run_id = int(raw)
    except ValueError:
        raise BadParameter(f"run: not a whole number: {raw[:40]!r}") from None
    if not 0 <= run_id <= 2**62:
        raise BadParameter(f"run: {raw[:40]} is not between 0 and {2**62}")
    return web.json_response({"run": run_id,
                              "samples": await request.app[_DASHBOARD].samples(run_id)})  # fmt: skip


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    types = {"style.css": "text/css", "icon.svg": "image/svg+xml"}
    if name not in types:
        raise NotFound("no such file")
    body = importlib.resources.files("crawler.serve").joinpath("static", name).read_bytes()
    response = web.Response(body=body, content_type=types[name])
    response.headers["Cache-Control"] = "max-age=3600"
    return response


def make_app(
    dashboard: Dashboard, search_index: Search, names: frozenset[str] = frozenset()
) -> web.Application:
    """The application over an open ``dashboard`` and ``search_index`` (closed with it),
    answering to the ``Host`` names ``names`` only (``serving_names``; empty: any)."""
    app = web.Application(middlewares=[_secured], client_max_size=64 * 1024)
    app[_DASHBOARD], app[_SEARCH], app[_DB_NAME] = dashboard, search_index, dashboard.name
    app[_HOSTS] = names

    async def close(app: web.Application) -> None:
        await app[_DASHBOARD].close()
        app[_SEARCH].close()

    app.on_cleanup.append(close)
    app.router.add_get("/", overview)
    app.router.add_get("/hosts", hosts)
    app.router.add_get("/search", search)
    app.router.add_get("/page", page)
    app.router.add_get("/api", api_index)
    app.router.add_get("/api/overview", _json(overview_data))
    app.router.add_get("/api/hosts", _json(hosts_data))
    app.router.add_get("/api/search", _json(search_data))
    app.router.add_get("/api/page", _json(page_data))
    app.router.add_get("/api/runs/{run}/samples", samples)
    app.router.add_get("/static/{name}", static)
    return app


async def build_app(db: str, device: str = "auto", host: str = "127.0.0.1") -> web.Application:
    """``make_app`` over the database ``db`` (``StoreError`` if it cannot be read), to be
    served on ``host``."""
    dashboard = await open_dashboard(db)
    return make_app(dashboard, Search(db, device), serving_names(host))
