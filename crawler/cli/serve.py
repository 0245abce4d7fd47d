"""``crawl serve DB``: the dashboard and search over a crawl database, in the browser."""

from __future__ import annotations

import asyncio
import contextlib

import click
from aiohttp import web

from crawler.cli.app import EXIT_USAGE, fail
from crawler.serve.app import build_app, serving_names
from crawler.settings import DEVICES
from storage.base import StoreError


@click.command("serve")
@click.argument("db")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (another than loopback exposes the crawl: a warning).")  # fmt: skip
@click.option("--port", type=click.IntRange(0, 65535), default=8800, show_default=True,
              help="Port to listen on (0: any free one, printed).")  # fmt: skip
@click.option("--device", type=click.Choice(DEVICES), default="auto", show_default=True,
              help="Where search's BM25 kernel runs.")  # fmt: skip
def command(db: str, host: str, port: int, device: str) -> None:
    """Serve a read-only dashboard and search of DB (a SQLite file or a PostgreSQL DSN)."""
    if not serving_names(host):  # none: not loopback, any name is answered
        click.echo(f"crawl serve: warning: listening on {host}: anyone who can reach it reads "
                   "the crawl", err=True)  # fmt: skip

    async def serve() -> None:
        try:
            app = await build_app(db, device, host)
        except StoreError as exc:
            fail(EXIT_USAGE, str(exc))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            fail(EXIT_USAGE, f"--host {host} --port {port}: cannot listen: {exc.strerror or exc}")
        for address in runner.addresses:
            shown = f"[{address[0]}]" if ":" in str(address[0]) else address[0]
            click.echo(f"crawl serve: http://{shown}:{address[1]}/ (Ctrl-C stops)", err=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the normal way to stop
        asyncio.run(serve())
