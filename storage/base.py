"""What the engine needs from a store, and the records it hands over.

Owns: the ``Store`` protocol and ``PageRecord``. Implementations: ``storage.sqlite``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRecord:
    """One fetched URL as stored: a parsed page, a non-HTML response or a failure.

    The parsed-page fields default to ``None``: records of responses that were not parsed
    leave them out.
    """

    url: str
    final_url: str
    status: int | None
    error: str | None
    content_type: str | None
    depth: int
    body_bytes: int | None
    fetched_at: str
    title: str | None = None
    text: str | None = None
    lang: str | None = None
    canonical: str | None = None
    meta_robots: str | None = None
    content_hash: str | None = None
    links_json: str = "[]"
    """Every outlink, as a JSON array of normalised URLs."""
    attempts: int = 1
    duplicate_of: str | None = None
    score: float | None = None
    tokens: bytes | None = None
    simhash: int | None = None
    """Unsigned 64-bit; stored as the signed integer with the same bits."""
    near_duplicate_of: str | None = None


@dataclass(frozen=True, slots=True)
class SkipRecord:
    """A URL the crawler decided not to fetch, and why."""

    url: str
    reason: str
    depth: int | None
    decided_at: str


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """A robots.txt as fetched: kept so that later runs reuse it for a while."""

    origin: str
    status: int
    body: bytes | None
    fetched_at: str


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The counters a run ends with."""

    status: str
    reason: str
    pages_ok: int
    pages_failed: int
    bytes: int


class Store(Protocol):
    """Persistence for one crawl. Opened with ``open()`` and closed with ``close()``."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def start_run(self, seeds: int, settings_json: str, started_at: str) -> int: ...

    async def save(self, pages: list[PageRecord], skips: list[SkipRecord], run_id: int) -> None:
        """Store pages (with their outlinks) and skip decisions in one transaction."""
        ...

    async def get_robots(self, origin: str) -> RobotsRecord | None: ...

    async def put_robots(self, record: RobotsRecord) -> None: ...

    async def finish_run(self, run_id: int, summary: RunSummary, ended_at: str) -> None: ...


class StoreError(Exception):
    """The database could not be opened, migrated, read or written. The message names it."""
