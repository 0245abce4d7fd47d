"""The database schema, as named, numbered migrations applied in order: the SQLite
migrations (the reference that ``storage.postgres.schema`` mirrors, version for version),
and what both stores share (``Migration``, ``MIGRATIONS_TABLE``, the page upsert's ``SET``
list, ``signed64``).

Owns: the tables' shape (a public interface, documented in the README) and its versions.
Invariant: each migration runs in one transaction together with its row in
``schema_migrations``, so a database is always at exactly one known version.
Never edit a released migration: add a new one.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple


def page_upsert_set(*, least: str, differs: str) -> str:
    """The ``ON CONFLICT (url) DO UPDATE SET`` list of a page write, shared by the SQLite and
    PostgreSQL stores (one list of columns, so a new column reaches both). ``least`` is the
    dialect's two-argument minimum (``MIN`` / ``LEAST``), ``differs`` its null-safe "is
    different from" (``IS NOT`` / ``IS DISTINCT FROM``). A changed body keeps the previous
    hash and stamps ``changed_at``."""
    return f"""
    final_url = excluded.final_url, status = excluded.status, error = excluded.error,
    content_type = excluded.content_type, title = excluded.title, text = excluded.text,
    lang = excluded.lang, canonical = excluded.canonical, meta_robots = excluded.meta_robots,
    depth = {least}(pages.depth, excluded.depth), body_bytes = excluded.body_bytes,
    previous_hash = CASE WHEN pages.content_hash {differs} excluded.content_hash
                         THEN pages.content_hash ELSE pages.previous_hash END,
    changed_at = CASE WHEN pages.content_hash {differs} excluded.content_hash
                      THEN excluded.fetched_at ELSE pages.changed_at END,
    content_hash = excluded.content_hash, fetched_at = excluded.fetched_at,
    run_id = excluded.run_id, outlinks = excluded.outlinks, attempts = excluded.attempts,
    duplicate_of = excluded.duplicate_of, score = excluded.score, tokens = excluded.tokens,
    simhash = excluded.simhash, near_duplicate_of = excluded.near_duplicate_of,
    etag = excluded.etag, last_modified = excluded.last_modified, body = excluded.body,
    headers = excluded.headers, extract = excluded.extract
"""


def signed64(value: int | None) -> int | None:
    """SQLite integers and PostgreSQL's BIGINT are signed 64-bit: an unsigned 64-bit hash
    (``pages.simhash``) is stored as the signed integer with the same bits."""
    if value is None:
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


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
            content_hash  TEXT,                      -- parsers.page.content_hash of the body
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
    Migration(
        2,
        "persistent frontier and recrawl",
        """
        -- Every URL the crawl knows and its state: the frontier lives here, so a run killed
        -- at any moment resumes from the database; memory holds only a window of it.
        CREATE TABLE urls (
            id            INTEGER PRIMARY KEY,       -- order of discovery
            url           TEXT NOT NULL UNIQUE,      -- normalised URL
            origin        TEXT NOT NULL,             -- scheme://host[:port]
            state         TEXT NOT NULL,             -- queued | done | failed | skipped
            lease         INTEGER,                   -- run holding it (its window, in flight)
            depth         INTEGER NOT NULL,
            priority      REAL NOT NULL DEFAULT 0,   -- higher first (focused crawls)
            attempts      INTEGER NOT NULL DEFAULT 0, -- requests made at its last fetch
            next_fetch_at REAL,                      -- unix time it is due again (done, failed)
            interval_s    REAL,                      -- current recrawl interval
            reason        TEXT,                      -- skipped: why (robots, scope, trap ...)
            updated_at    TEXT NOT NULL,             -- ISO-8601 UTC of the last state change
            run_id        INTEGER REFERENCES runs(id)
        );
        CREATE INDEX urls_queue ON urls (priority DESC, id)
            WHERE state = 'queued' AND lease IS NULL;
        CREATE INDEX urls_due ON urls (next_fetch_at) WHERE state IN ('done', 'failed');
        INSERT INTO urls (url, origin, state, depth, attempts, next_fetch_at, interval_s,
                          updated_at, run_id)
            SELECT url,
                   substr(url, 1, instr(url, '//') + instr(substr(url, instr(url, '//') + 2), '/')),
                   CASE WHEN error IS NULL AND status < 400 THEN 'done' ELSE 'failed' END,
                   depth, attempts, CAST(strftime('%s', fetched_at) AS REAL) + 86400, 86400,
                   fetched_at, run_id
            FROM pages;
        INSERT OR IGNORE INTO urls (url, origin, state, depth, reason, updated_at, run_id)
            SELECT url,
                   substr(url, 1, instr(url, '//') + instr(substr(url, instr(url, '//') + 2), '/')),
                   'skipped', coalesce(depth, 0), reason, decided_at, run_id
            FROM skipped;
        DROP TABLE skipped;
        -- URLs not fetched and why: a view of urls, as it was a table before version 2.
        CREATE VIEW skipped (url, reason, depth, decided_at, run_id) AS
            SELECT url, reason, depth, updated_at, run_id FROM urls WHERE state = 'skipped';
        ALTER TABLE pages ADD COLUMN etag TEXT;           -- validators for conditional GET
        ALTER TABLE pages ADD COLUMN last_modified TEXT;
        ALTER TABLE pages ADD COLUMN previous_hash TEXT;  -- content_hash of the version before
        ALTER TABLE pages ADD COLUMN changed_at TEXT;     -- when content_hash last changed
        ALTER TABLE pages ADD COLUMN body BLOB;           -- --store-body: raw body, zlib
        ALTER TABLE pages ADD COLUMN headers TEXT;        -- --store-body: JSON, see README
        ALTER TABLE pages ADD COLUMN extract TEXT;        -- JSON from the extract hook
        UPDATE pages SET changed_at = fetched_at;
        ALTER TABLE runs ADD COLUMN pages_unchanged INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    Migration(
        3,
        "search index",
        """
        -- The inverted index of pages.tokens for crawl rank (storage.sqlite.search): segments
        -- of compressed postings, built from the pages the log below names. A page's
        -- postings count only in the newest segment that names it (in docs or removed).
        CREATE TABLE search_segments (
            id            INTEGER PRIMARY KEY,
            docs          BLOB NOT NULL,             -- page ids, ascending (int64 LE)
            lengths       BLOB NOT NULL,             -- their token counts (uint32 LE)
            removed       BLOB NOT NULL,             -- page ids whose postings end here
            terms         BLOB NOT NULL,             -- term ids, ascending (uint32 LE)
            df            BLOB NOT NULL,             -- postings of each term (uint32 LE)
            starts        BLOB NOT NULL,             -- each term's byte offset (int64 LE, +1)
            postings      BLOB NOT NULL,             -- variable-byte (doc gap, tf) pairs
            built_at      TEXT NOT NULL              -- ISO-8601 UTC
        );
        -- Pages whose tokens changed since the index last caught up: kept by triggers, so
        -- that any writer of pages (a crawl, another tool) keeps the index's to-do list.
        CREATE TABLE search_pending (page_id INTEGER PRIMARY KEY);
        CREATE TRIGGER search_page_added AFTER INSERT ON pages WHEN new.tokens IS NOT NULL
            BEGIN INSERT INTO search_pending (page_id) VALUES (new.id) ON CONFLICT DO NOTHING; END;
        CREATE TRIGGER search_page_changed AFTER UPDATE OF tokens ON pages
            WHEN old.tokens IS NOT new.tokens
            BEGIN INSERT INTO search_pending (page_id) VALUES (new.id) ON CONFLICT DO NOTHING; END;
        CREATE TRIGGER search_page_deleted AFTER DELETE ON pages WHEN old.tokens IS NOT NULL
            BEGIN INSERT INTO search_pending (page_id) VALUES (old.id) ON CONFLICT DO NOTHING; END;
        -- an older database: every page with tokens is to be indexed, once
        INSERT INTO search_pending (page_id) SELECT id FROM pages WHERE tokens IS NOT NULL;
        """,
    ),
    Migration(
        4,
        "run samples and harvest",
        """
        -- With a query: the run's scored pages by relevance band, per quarter (JSON)
        ALTER TABLE runs ADD COLUMN harvest TEXT;
        -- A running crawl's progress, sampled every few seconds (crawler.engine.sampler):
        -- what crawl serve charts as pages/s and errors/s over a run's time.
        CREATE TABLE run_samples (
            run_id        INTEGER NOT NULL REFERENCES runs(id),
            at            REAL NOT NULL,             -- unix time of the sample
            elapsed_s     REAL NOT NULL,             -- seconds since the run started
            done          INTEGER NOT NULL,          -- pages fetched (ok, failed, unchanged)
            failed        INTEGER NOT NULL,          -- of which no response, or 4xx/5xx
            queued        INTEGER NOT NULL,          -- URLs waiting in the frontier
            in_flight     INTEGER NOT NULL,          -- requests under way
            bytes         INTEGER NOT NULL,          -- body bytes downloaded
            PRIMARY KEY (run_id, elapsed_s)
        );
        """,
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

DEAD_RUN_COUNTS = """
    pages_ok = (SELECT count(*) FROM pages AS p WHERE p.run_id = runs.id
                AND p.error IS NULL AND p.status >= 200 AND p.status < 400),
    pages_failed = (SELECT count(*) FROM pages AS p WHERE p.run_id = runs.id
                    AND NOT (p.error IS NULL AND p.status >= 200 AND p.status < 400)),
    bytes = (SELECT coalesce(sum(p.body_bytes), 0) FROM pages AS p WHERE p.run_id = runs.id)
"""
"""The counts of a run whose process died before it could record them (an ``UPDATE runs
SET`` clause, both stores): from the pages it stored, as the crawl counts them (ok: no
error and a 2xx or 3xx status). A page fetched again by a later run is that run's."""

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
