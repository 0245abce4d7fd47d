"""Local test sites: real aiohttp servers on 127.0.0.1 (port 0), run in a background thread.

Each server records every request it receives (path, arrival and end times), so tests assert
politeness and completeness from the server's side.

``LinkGraph`` is a generated site whose expected pages and outlinks are computed from the
way it was built (not with the crawler's own URL code).
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import itertools
import random
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Hit:
    path: str
    start: float
    end: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    """The request's headers."""
    status: int = 0
    """The response's status; 0 while in flight, or if the client went away before it."""
    method: str = "GET"

    def header(self, name: str) -> str | None:
        """A request header, looked up case-insensitively."""
        lowered = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lowered), None)


class SiteServer:
    """An aiohttp application served on 127.0.0.1 from a thread. Use as a context manager."""

    def __init__(self, routes: dict[str, Handler] | None = None, *, latency_s: float = 0.0,
                 fallback: Handler | None = None, host: str = "127.0.0.1",
                 tls: ssl.SSLContext | None = None) -> None:  # fmt: skip
        self.routes = dict(routes or {})
        self.tls = tls
        """A server-side TLS context: then the site is served over https."""
        self.fallback = fallback
        self.latency_s = latency_s
        self.host = host
        self.hits: list[Hit] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def __enter__(self) -> SiteServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("test server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def paths(self) -> list[str]:
        return [hit.path for hit in self.hits]

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, ssl_context=self.tls)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path_qs
        hit = Hit(path, time.monotonic(), headers=dict(request.headers), method=request.method)
        self.hits.append(hit)
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            handler = self.routes.get(path) or self.routes.get(request.path) or self.fallback
            if handler is None:
                response: web.StreamResponse = web.Response(
                    status=404, text="not found", content_type="text/html"
                )
            else:
                response = await handler(request)
            hit.status = response.status
            return response
        except web.HTTPException as exc:
            hit.status = exc.status
            raise
        finally:
            hit.end = time.monotonic()


def make_certificate(directory: Path, ip: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for ``ip`` and its key (openssl), valid two days."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is needed to make a TLS test's certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={ip}", "-addext", f"subjectAltName=IP:{ip}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def server_tls(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def html_handler(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, status=status, content_type="text/html",
                            headers=headers)  # fmt: skip

    return handle


def new_links_handler(links: int, suffix: str = "") -> Handler:
    """Every page links to ``links`` URLs never seen before (below its own path)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        n = request.match_info["tail"].strip("/") or "root"
        anchors = "".join(f'<a href="/{n}-{k}{suffix}">{k}</a>' for k in range(links))
        return web.Response(text=f"<title>{n}</title>{anchors}", content_type="text/html")

    return handle


def max_concurrency(hits: list[Hit]) -> int:
    """The most requests the server was handling at one moment."""
    events = sorted([(h.start, 1) for h in hits] + [(h.end, -1) for h in hits])
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def min_start_gap(hits: list[Hit]) -> float:
    starts = sorted(h.start for h in hits)
    return min((b - a for a, b in itertools.pairwise(starts)), default=float("inf"))


# -- a generated link graph ------------------------------------------------------------------
class LinkGraph:
    """A deterministic site of ``n`` HTML pages (+ a few PDFs and 404s) under ``/s<k>/``.

    Links come in every form a crawler meets: relative, ``../``, absolute-path, absolute
    with upper-case scheme and dot segments, ``<base href>``, fragments, query variants,
    ``mailto:``/``javascript:``, and links to an external server that must never be hit.
    ``expected_pages`` and ``expected_links`` are built from the construction.
    """

    def __init__(
        self, n: int = 600, *, seed: int = 7, external: str = "", stable: bool = False
    ) -> None:
        self.n = n
        self.external = external
        self.rng = random.Random(seed)
        self.stable = stable
        """Each URL's words from its own generator: the same page whatever the crawl's
        order (else from one, in the order of the requests)."""
        self.seed = seed
        self.origin = ""  # set by serve()
        self.dirs = 10
        self._plan: dict[int, list[tuple[str, str]]] = {}

    def path(self, i: int) -> str:
        return "/index.html" if i == 0 else f"/s{i % self.dirs}/p{i}.html"

    def serve(self, server: SiteServer) -> None:
        self.origin = server.url
        server.fallback = self._handle
        self._plan = {i: self._links_of(i) for i in range(self.n)}

    def _links_of(self, i: int) -> list[tuple[str, str]]:
        """(href as written, path+query it resolves to, or "" if it leaves the site)."""
        rng = random.Random(i * 7919 + 1)
        targets = {i + 1} if i + 1 < self.n else set()  # a chain reaches every page
        targets |= {rng.randrange(self.n) for _ in range(rng.randrange(5, 15))}
        links: list[tuple[str, str]] = []
        base_dir = f"/s{(i + 3) % self.dirs}/" if i % 17 == 5 else None
        for j in sorted(targets):
            links.append(self._href(i, j, rng, base_dir))
        if i % 10 == 3:
            links.append((f"/files/doc{i}.pdf", f"/files/doc{i}.pdf"))
        if i % 25 == 4:
            links.append((f"/missing{i}.html", f"/missing{i}.html"))
        if i % 7 == 0:
            links.append((f"{self.external}/ext{i}.html", ""))
        links += [("mailto:someone@example.com", ""), ("javascript:void(0)", "")]
        links.append(("#top", base_dir or self.path(i)))  # a fragment-only link: the base itself
        return links

    def _href(self, i: int, j: int, rng: random.Random, base_dir: str | None) -> tuple[str, str]:
        target = self.path(j)
        form = rng.randrange(7)
        if base_dir is not None:
            # relative to <base href>: climb out of base_dir
            return f"..{target}", target
        if form == 0:
            return target, target
        if form == 1:
            return f"{target}#sec{j % 3}", target
        if form == 2 and j % 40 == 1:
            return f"{target}?ref=nav", f"{target}?ref=nav"
        if form == 3:
            here = self.path(i).rsplit("/", 1)[0]
            if j != 0 and here == target.rsplit("/", 1)[0]:
                return target.rsplit("/", 1)[1], target
            return f"..{target}" if i != 0 else target.lstrip("/"), target
        if form == 4:
            return f"HTTP://{self.origin.split('//')[1]}/./s0/..{target}", target
        if form == 5:
            return f"{self.origin}{target}", target
        return f"  {target}  ", target

    def page_html(self, i: int, path_qs: str = "") -> str:
        links = self._plan[i]
        base = ""
        if i % 17 == 5:
            base = f'<base href="/s{(i + 3) % self.dirs}/">'
        anchors = "\n".join(f'<p>see <a href="{href}">page {k}</a></p>'
                            for k, (href, _) in enumerate(links))  # fmt: skip
        rng = random.Random(f"{self.seed} {path_qs}") if self.stable else self.rng
        words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(30))
        return (
            f"<!DOCTYPE html><html lang='en'><head><title>Page {i}</title>{base}"
            f"<style>p {{color: red}}</style><script>var secret = 'hidden{i}';</script></head>"
            f"<body><h1>Heading {i}</h1><p>{words}</p>{anchors}</body></html>"
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/":
            raise web.HTTPFound("/index.html")
        if path.startswith("/files/"):
            return web.Response(body=b"%PDF-1.4 fake", content_type="application/pdf")
        index = self._index_of(path)
        if index is None:
            return web.Response(status=404, text="<p>missing</p>", content_type="text/html")
        return web.Response(text=self.page_html(index, request.path_qs), content_type="text/html")

    def _index_of(self, path: str) -> int | None:
        if path == "/index.html":
            return 0
        name = path.rsplit("/", 1)[-1]
        if not (name.startswith("p") and name.endswith(".html")):
            return None
        try:
            index = int(name[1:-5])
        except ValueError:
            return None
        return index if 0 < index < self.n and self.path(index) == path else None

    def expected_paths(self) -> set[str]:
        """Every path (with query) a complete crawl from ``/`` fetches."""
        seen = {"/", "/index.html"}
        queue = [0]
        while queue:
            i = queue.pop()
            for _, target in self._plan[i]:
                if not target or target in seen:
                    continue
                seen.add(target)
                index = self._index_of(target.split("?")[0])
                if index is not None:
                    queue.append(index)
        return seen

    def expected_links(self, i: int, query: str = "") -> set[str]:
        """The outlinks page ``i`` (fetched with ``query``) must have in the links table."""
        out = set()
        for href, target in self._plan[i]:
            if href == "#top" and i % 17 != 5:
                out.add(self.origin + self.path(i) + query)
            elif target:
                out.add(self.origin + target)
            elif href.startswith(self.external) and self.external:
                out.add(href)
        return out


# -- a generated site for recrawls: stable bodies, versions, HTTP validators ------------------
class PageSite:
    """``n`` HTML pages, every one ``200`` with a ``<title>``: ``/`` (page 0) and ``/p<i>.html``.

    Each page links to the next one (a chain from ``/`` reaches them all) and to ``links``
    others picked by a seeded RNG, so a complete crawl from ``/`` fetches exactly
    ``paths()``; nothing else on the server answers 200 (``/robots.txt`` is a 404).

    A page's body is a pure function of its index and version: two fetches of one version are
    byte-identical. ``change(i)`` makes a new version (new text, same links).

    Validators, for conditional GET: with ``etag=True`` a page is sent with a strong ETag
    (BLAKE2b of the body), with ``last_modified=True`` with a Last-Modified date (a day before
    the site was built; the time of the change for a changed page). A request whose
    ``If-None-Match`` matches (weak comparison, RFC 9110 13.1.2) or, without If-None-Match,
    whose ``If-Modified-Since`` is not before Last-Modified, is answered ``304`` with no
    body. The server's ``Hit.status`` and ``Hit.header()`` record what happened.
    """

    def __init__(self, n: int = 100, *, links: int = 6, seed: int = 1, etag: bool = False,
                 last_modified: bool = False) -> None:  # fmt: skip
        self.n = n
        self.etag = etag
        self.last_modified = last_modified
        self.origin = ""  # set by serve()
        self.versions = [0] * n
        built = int(time.time()) - 86_400
        self.modified = [built] * n
        rng = random.Random(seed)
        self.outlinks: list[list[int]] = []
        for i in range(n):
            targets = {i + 1} if i + 1 < n else set()
            targets |= {rng.randrange(n) for _ in range(links)}
            self.outlinks.append(sorted(targets))

    # -- what the site holds ---------------------------------------------------------------
    @staticmethod
    def path(i: int) -> str:
        return "/" if i == 0 else f"/p{i}.html"

    def paths(self) -> set[str]:
        return {self.path(i) for i in range(self.n)}

    def urls(self) -> set[str]:
        """The URLs a complete crawl seeded with ``origin + "/"`` stores (needs ``serve``)."""
        return {self.origin + p for p in self.paths()}

    def index(self, path: str) -> int | None:
        if path == "/":
            return 0
        if path.startswith("/p") and path.endswith(".html"):
            try:
                i = int(path[2:-5])
            except ValueError:
                return None
            return i if 0 < i < self.n and self.path(i) == path else None
        return None

    def index_of_url(self, url: str) -> int | None:
        """The page an absolute URL of this site names, or ``None``."""
        prefix = self.origin + "/"
        return self.index(url[len(self.origin) :]) if url.startswith(prefix) else None

    def title(self, i: int) -> str:
        return f"Page {i}"

    def marker(self, i: int) -> str:
        """A phrase in the visible text that names the page's version."""
        return f"edition {self.versions[i]} of page {i}"

    def body(self, i: int) -> bytes:
        anchors = "".join(f'<li><a href="{self.path(j)}">page {j}</a></li>'
                          for j in self.outlinks[i])  # fmt: skip
        words = " ".join(("alpha", "beta", "gamma", "delta")[(i * 7 + k) % 4] for k in range(20))
        return (
            f"<!DOCTYPE html><html lang='en'><head><title>{self.title(i)}</title></head>"
            f"<body><h1>Heading {i}</h1><p>{self.marker(i)}: {words}</p>"
            f"<ul>{anchors}</ul></body></html>"
        ).encode()

    def etag_of(self, i: int) -> str:
        return '"' + hashlib.blake2b(self.body(i), digest_size=16).hexdigest() + '"'

    def last_modified_of(self, i: int) -> str:
        return email.utils.formatdate(self.modified[i], usegmt=True)

    def change(self, *indices: int) -> None:
        """New content (and validators) for these pages; their links stay the same."""
        now = int(time.time())
        for i in indices:
            self.versions[i] += 1
            self.modified[i] = max(now, self.modified[i] + 1)

    # -- serving ---------------------------------------------------------------------------
    def serve(self, server: SiteServer) -> None:
        self.origin = server.url
        server.fallback = self._handle

    def page_hits(self, hits: list[Hit]) -> list[Hit]:
        """The hits on pages of this site (not /robots.txt, /sitemap.xml or other paths)."""
        return [h for h in hits if self.index(h.path.split("?")[0]) is not None]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        i = self.index(request.path)
        if i is None:
            return web.Response(status=404, text="<p>missing</p>", content_type="text/html")
        headers = {}
        if self.etag:
            headers["ETag"] = self.etag_of(i)
        if self.last_modified:
            headers["Last-Modified"] = self.last_modified_of(i)
        if self._not_modified(i, request):
            return web.Response(status=304, headers=headers)
        return web.Response(body=self.body(i), content_type="text/html", charset="utf-8",
                            headers=headers)  # fmt: skip

    def _not_modified(self, i: int, request: web.Request) -> bool:
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match is not None:  # RFC 9110 13.2.2: it takes precedence over the date
            if not self.etag:
                return False
            tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
            return "*" in tags or self.etag_of(i) in tags
        since = request.headers.get("If-Modified-Since")
        if since is None or not self.last_modified:
            return False
        try:
            when = email.utils.parsedate_to_datetime(since)
        except (TypeError, ValueError):
            return False
        return self.modified[i] <= when.timestamp()
