"""The database schema, as named, numbered migrations applied in order.

Owns: the tables' shape (a public interface, documented in the README) and its versions.
Invariant: each migration runs in one transaction together with its row in
``schema_migrations``, so a database is always at exactly one known version.
Never edit a released migration: add a new one.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple


class Migration(NamedTuple):
    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial",
        """
        CREATE TABLE runs (
            id            INTEGER PRIMARY KEY,
            started_at    TEXT NOT NULL,             -- ISO-8601 UTC
            ended_at      TEXT,                      -- NULL while running
            status        TEXT NOT NULL,             -- running | finished | interrupted | failed
            reason        TEXT,                      -- why it stopped (done, max-pages, error ...)
            seeds         INTEGER NOT NULL DEFAULT 0,
            pages_ok      INTEGER NOT NULL DEFAULT 0, -- 2xx responses
            pages_failed  INTEGER NOT NULL DEFAULT 0, -- no response, or 4xx/5xx
            bytes         INTEGER NOT NULL DEFAULT 0,
            settings      TEXT                       -- JSON of the run's settings
        );
        CREATE TABLE pages (
            id            INTEGER PRIMARY KEY,
            url           TEXT NOT NULL UNIQUE,      -- normalised URL that was requested
            final_url     TEXT NOT NULL,             -- after redirects
            status        INTEGER,                   -- HTTP status; NULL when no response
            error         TEXT,                      -- NULL, or why it failed (timeout, connect ...)
            content_type  TEXT,
            title         TEXT,
            text          TEXT,                      -- visible text; NULL if not HTML or noindex
            lang          TEXT,                      -- <html lang>
            canonical     TEXT,                      -- <link rel=canonical>, resolved
            meta_robots   TEXT,
            depth         INTEGER NOT NULL,          -- links from a seed (seeds: 0)
            body_bytes    INTEGER,
            content_hash  TEXT,                      -- BLAKE2b-128 of the body, hex
            fetched_at    TEXT NOT NULL,             -- ISO-8601 UTC
            run_id        INTEGER REFERENCES runs(id),
            outlinks      TEXT NOT NULL DEFAULT '[]', -- JSON array of every outlink
            attempts      INTEGER NOT NULL DEFAULT 1, -- requests made (1 + retries)
            duplicate_of  TEXT,                      -- same content (or canonical) as this URL
            score         REAL,                      -- BM25 relevance to the run's --query
            tokens        BLOB,                      -- token ids + counts (parsers.tokens)
            simhash       INTEGER,                   -- 64-bit SimHash of the text, as signed
            near_duplicate_of TEXT                   -- a page within Hamming distance 3
        );
        -- One row per outlink of every stored page, followed or not. A view over
        -- pages.outlinks: writing one JSON array per page instead of ~50 index entries
        -- halves the store's share of a crawl's CPU time (bench/RESULTS.md).
        CREATE VIEW links (src_url, dst_url) AS
            SELECT pages.url, link.value FROM pages, json_each(pages.outlinks) AS link;
        CREATE TABLE skipped (
            url           TEXT PRIMARY KEY,          -- a URL the crawler decided not to fetch
            reason        TEXT NOT NULL,             -- robots, scope, trap, ssrf, host-limit ...
            depth         INTEGER,
            decided_at    TEXT NOT NULL,             -- ISO-8601 UTC
            run_id        INTEGER REFERENCES runs(id)
        );
        CREATE TABLE robots (
            origin        TEXT PRIMARY KEY,          -- scheme://host[:port]
            status        INTEGER NOT NULL,          -- HTTP status of /robots.txt
            body          BLOB,                      -- the file (2xx only), capped at 500 KiB
            fetched_at    TEXT NOT NULL              -- ISO-8601 UTC; reused for 24 h
        );
        """,
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)
"""


def pending(applied: set[int]) -> list[Migration]:
    """The migrations not yet applied, in order."""
    return [m for m in MIGRATIONS if m.version not in applied]


def split_statements(script: str) -> list[str]:
    """The complete SQL statements of a migration script (comments stay with their statement)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        raise ValueError(f"incomplete SQL statement in migration: {current.strip()[:80]!r}")
    return statements
