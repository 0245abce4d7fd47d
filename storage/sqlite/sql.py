"""The SQLite store's statements, and the rows they take.

Owns: the SQL a ``SQLiteStore`` writes a batch with, and ``Rows``, which writes one
statement for many rows. Invariants: a batch's rows go in multi-row statements (a few
statement steps a batch, not one a row), each within SQLite's smallest limit of bound
parameters (999); the upsert of a page shares its ``SET`` list with the PostgreSQL store
(``storage.schema.page_upsert_set``), so a new column reaches both.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import Callable, Sequence

from parsers.links import url_origin
from storage.base import PageRecord
from storage.schema import page_upsert_set, signed64


class Rows:
    """A statement written for many rows at once: ``head``, then ``VALUES`` with ``row``
    repeated, then ``tail`` (an ``INSERT``'s upsert clause, which SQLite applies row by row,
    in order; or the rest of an ``UPDATE ... FROM (VALUES ...)``).

    ``executemany`` of a one-row statement steps the statement once per row, and each step
    releases the GIL and takes it back: with the event loop thread busy, taking it back
    waits up to the interpreter's switch interval (``sys.getswitchinterval()``), so a batch
    written row by row beside a busy thread is slower by orders of magnitude. Rows go in
    chunks of at most 999 parameters (the smallest limit an SQLite build may have), so a
    batch of pages costs a few steps.
    """

    def __init__(
        self,
        head: str,
        row: str,
        tail: str = "",
        weigh: Callable[[tuple[object, ...]], int] | None = None,
        max_bytes: int = 8 << 20,
    ) -> None:
        self.head = head
        self.row = row
        self.tail = tail
        self.width = row.count("?")
        self.chunk = min(128, 999 // self.width)
        self.weigh = weigh
        """The size of a row's large values: SQLite copies every bound value when binding,
        so a chunk holds at most ``max_bytes`` of them (pages of a few MB each stay a few to
        a statement)."""
        self.max_bytes = max_bytes

    @functools.cache  # noqa: B019 -- a few module-level instances, a few sizes each
    def sql(self, rows: int) -> str:
        return f"{self.head}\nVALUES {', '.join([self.row] * rows)}\n{self.tail}"

    def statements(self, rows: Sequence[tuple[object, ...]]) -> list[tuple[str, list[tuple]]]:
        """(sql, parameter lists) for ``rows``, in order: chunks of at most ``chunk`` rows
        and ``max_bytes``, consecutive chunks of one size sharing their statement."""
        out: list[tuple[str, list[tuple]]] = []
        flat = itertools.chain.from_iterable
        weigh, start, count = self.weigh, 0, len(rows)
        while start < count:
            end = min(start + self.chunk, count)
            if weigh is not None:
                size = 0
                for i in range(start, end):
                    size += weigh(rows[i])
                    if size > self.max_bytes and i > start:
                        end = i
                        break
            sql = self.sql(end - start)
            parameters = tuple(flat(rows[start:end]))
            if out and out[-1][0] == sql:
                out[-1][1].append(parameters)
            else:
                out.append((sql, [parameters]))
            start = end
        return out

    def unbinding(self, statements: list[tuple[str, list[tuple]]]) -> list[tuple[str, tuple]]:
        """Each distinct statement of ``statements`` with every parameter NULL, for
        ``_in_transaction`` to run and roll back once they are done.

        SQLite copies each bound value into the statement and keeps it until it is bound
        again, and Python's statement cache keeps the statement: a page upsert's last
        chunk, up to ``max_bytes`` of text, outlinks and body, stayed in memory for each
        chunk size in the cache (at a million URLs ~6 of SQLite's ~20 MB; with pages of
        megabytes, several times ``max_bytes``). Binding NULLs frees them; the statement
        stays prepared and cached."""
        if self.weigh is None:
            return []
        seen: dict[str, tuple] = {}
        for sql, rows in statements:
            if rows and sql not in seen:
                seen[sql] = (None,) * len(rows[0])
        return list(seen.items())


def _page_weight(row: tuple[object, ...]) -> int:
    """A page row's large values: text, outlinks, tokens, body, headers, extract."""
    values = (row[6], row[15], row[19], row[24], row[25], row[26])
    return sum(len(value) for value in values if isinstance(value, str | bytes))


UPSERT_PAGE = Rows(
    """INSERT INTO pages (url, final_url, status, error, content_type, title, text, lang,
                   canonical, meta_robots, depth, body_bytes, content_hash, fetched_at, run_id,
                   outlinks, attempts, duplicate_of, score, tokens, simhash, near_duplicate_of,
                   etag, last_modified, body, headers, extract, changed_at)""",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "ON CONFLICT (url) DO UPDATE SET" + page_upsert_set(least="MIN", differs="IS NOT"),
    weigh=_page_weight,
)
TOUCH_PAGE = Rows(
    """UPDATE pages SET fetched_at = v.column1, run_id = v.column2, attempts = v.column3,
    etag = coalesce(v.column4, pages.etag),
    last_modified = coalesce(v.column5, pages.last_modified)
FROM (""",
    "(?, ?, ?, ?, ?, ?)",
    ") AS v WHERE pages.url = v.column6",
)
"""A recrawl's unchanged pages (``UPDATE ... FROM`` needs SQLite 3.33)."""
TOUCH_PAGE_ONE = """
UPDATE pages SET fetched_at = ?, run_id = ?, attempts = ?, etag = coalesce(?, etag),
    last_modified = coalesce(?, last_modified)
WHERE url = ?
"""
_UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)


def touch_statements(rows: Sequence[tuple[object, ...]]) -> list[tuple[str, list[tuple]]]:
    """``TOUCH_PAGE`` for ``rows`` (the URL last); one statement a row where ``UPDATE ...
    FROM`` is missing, or a URL repeats (``FROM`` would apply one of its rows, not each)."""
    if _UPDATE_FROM and len({row[-1] for row in rows}) == len(rows):
        return TOUCH_PAGE.statements(rows)
    return [(TOUCH_PAGE_ONE, list(rows))]


FETCHED_URL = Rows(
    """INSERT INTO urls (url, origin, state, depth, attempts, next_fetch_at, interval_s,
                  updated_at, run_id)""",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    """ON CONFLICT (url) DO UPDATE SET
    state = excluded.state, lease = NULL, attempts = excluded.attempts,
    next_fetch_at = excluded.next_fetch_at, interval_s = excluded.interval_s,
    updated_at = excluded.updated_at, run_id = excluded.run_id, reason = NULL""",
)
NEW_URL = Rows(
    "INSERT INTO urls (url, origin, state, lease, depth, priority, updated_at, run_id)",
    "(?, ?, 'queued', ?, ?, ?, ?, ?)",
    "ON CONFLICT (url) DO NOTHING",
)
SKIPPED_URL = Rows(
    "INSERT INTO urls (url, origin, state, depth, reason, updated_at, run_id)",
    "(?, ?, 'skipped', ?, ?, ?, ?)",
    """ON CONFLICT (url) DO UPDATE SET
    state = 'skipped', lease = NULL, reason = excluded.reason, updated_at = excluded.updated_at,
    run_id = excluded.run_id
WHERE urls.state = 'queued'""",
)
SEED_URL = """
INSERT INTO urls (url, origin, state, depth, updated_at, run_id) VALUES (?, ?, 'queued', 0, ?, ?)
ON CONFLICT (url) DO UPDATE SET state = 'queued', depth = 0, reason = NULL,
    updated_at = excluded.updated_at, run_id = excluded.run_id
WHERE urls.state = 'skipped'
"""
CLAIM = """
SELECT u.id, u.url, u.depth, u.priority, u.interval_s, p.etag, p.last_modified, p.content_hash
FROM urls AS u LEFT JOIN pages AS p ON p.url = u.url
WHERE u.state = 'queued' AND u.lease IS NULL
ORDER BY u.priority DESC, u.id
LIMIT ?
"""


def page_row(record: PageRecord, run_id: int) -> tuple[object, ...]:
    return (
        record.url,
        record.final_url,
        record.status,
        record.error,
        record.content_type,
        record.title,
        record.text,
        record.lang,
        record.canonical,
        record.meta_robots,
        record.depth,
        record.body_bytes,
        record.content_hash,
        record.fetched_at,
        run_id,
        record.links_json,
        record.attempts,
        record.duplicate_of,
        record.score,
        record.tokens,
        signed64(record.simhash),
        record.near_duplicate_of,
        record.etag,
        record.last_modified,
        record.body,
        record.headers,
        record.extract,
        record.fetched_at,
    )


def fetched_url_row(record: PageRecord, run_id: int) -> tuple[object, ...]:
    return (
        record.url,
        url_origin(record.url),
        record.state,
        record.depth,
        record.attempts,
        record.next_fetch_at,
        record.interval_s,
        record.fetched_at,
        run_id,
    )


ADD_SAMPLE = (
    "INSERT INTO run_samples (run_id, at, elapsed_s, done, failed, queued, in_flight, bytes) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, elapsed_s) DO NOTHING"
)
"""A progress sample (``run_samples``)."""
