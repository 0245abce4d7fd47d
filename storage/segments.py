"""The search index's segments, whatever database holds them: their arrays, how they are
written as columns and read back, and ``catch_up``, which brings an index up to date.

A database keeps segments of postings (``search_segments``) and a log of pages to index
(``search_pending``, kept by triggers: migration 3 of ``storage.schema`` and of
``storage.postgres.schema``). ``catch_up`` indexes what the log names, in one write
transaction: the pages' token blobs become a new segment (``parsers.postings.build``; one a
CPU for many pages); past ``MAX_SEGMENTS`` segments, or when the log names most pages, every
live page is built anew (a merge: dead postings go). A page's postings count only in the
newest segment that names it, in its ``docs`` (live there) or its ``removed`` (gone: no
tokens any more, a duplicate, deleted).

Each database's ``IndexTables`` (``storage.sqlite.search``, ``storage.postgres.search``)
supplies the statements; this module holds what they share.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from parsers.postings import build, unpack_blobs
from storage.base import StoreError

MAX_SEGMENTS = 8
"""More segments than this are merged (each query reads every segment's runs)."""
PARALLEL_PAGES = 20_000
"""A catch-up of this many pages or more builds one segment a CPU, in parallel."""
SEGMENT_PAGES = 2_000_000
"""The most pages a segment holds: its postings stay well under PostgreSQL's 1 GB a value
(about 300 bytes a page of 200 words). A corpus past this many keeps a segment per part
beyond ``MAX_SEGMENTS`` before merging."""

TokenRow = tuple[int, bytes]
"""(page id, token blob)."""
Columns = tuple[Any, ...]
"""A segment as stored: docs, lengths, removed, terms, df, starts (bytes), postings (a
buffer: not copied), built_at (ISO 8601 text)."""
COLUMNS = "docs, lengths, removed, terms, df, starts, postings, built_at"


@dataclass(frozen=True, slots=True, eq=False)
class Segment:
    """One segment's arrays (postings stay in the database)."""

    id: int
    docs: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.uint32]
    removed: npt.NDArray[np.int64]
    terms: npt.NDArray[np.uint32]
    df: npt.NDArray[np.uint32]
    starts: npt.NDArray[np.int64]

    @property
    def postings_bytes(self) -> int:
        return int(self.starts[-1]) if self.starts.size else 0


def segment_of(row: Sequence[Any]) -> Segment:
    """A ``Segment`` from its stored row: id, docs, lengths, removed, terms, df, starts."""
    segment_id, docs, lengths, removed, terms, df, starts = row
    return Segment(
        int(segment_id),
        np.frombuffer(docs, "<i8").astype(np.int64),
        np.frombuffer(lengths, "<u4").astype(np.uint32),
        np.frombuffer(removed, "<i8").astype(np.int64),
        np.frombuffer(terms, "<u4").astype(np.uint32),
        np.frombuffer(df, "<u4").astype(np.uint32),
        np.frombuffer(starts, "<i8").astype(np.int64),
    )


Builder = Callable[[Callable[[], "Plan"]], "Plan"]
"""Runs a catch-up's ``plan`` (in a thread at idle priority, say) and returns it
(``storage.sqlite.search.SQLiteIndexTables.catch_up_on_snapshot``)."""


class Cursor(Protocol):
    def fetchmany(self, size: int) -> list[TokenRow]: ...


class Writer(Protocol):
    """One database's side of ``catch_up``, inside its write transaction."""

    def take_pending(self) -> list[int]:
        """The page ids the log names, ascending; none of them is logged again until the
        transaction ends (a page written meanwhile is logged for the next catch-up)."""
        ...

    def counts(self) -> tuple[int, int]:
        """(segments, pages with tokens)."""
        ...

    def clear_segments(self) -> None: ...

    def rows_of(self, page_ids: list[int]) -> list[TokenRow]:
        """The token rows of these pages (those that have tokens), by page id."""
        ...

    def all_rows(self) -> Cursor:
        """Every page with tokens, by page id."""
        ...

    def insert(self, columns: Columns) -> None: ...

    def clear_pending(self) -> None:
        """The log's rows that ``take_pending`` gave, gone."""
        ...


class IndexTables(Protocol):
    """The search index's tables of one crawl database, for ``crawler.relevance.search``."""

    writable: bool

    def has_index(self) -> bool: ...

    def pending_count(self) -> int: ...

    def catch_up(self) -> int:
        """Index the logged pages (see ``catch_up``); how many the log named."""
        ...

    def load(self) -> list[Segment]:
        """Every segment's arrays, oldest first."""
        ...

    def read(self, ranges: list[tuple[int, int, int]]) -> list[bytes]:
        """Bytes ``[start, end)`` of each (segment, start, end)'s postings; ``LookupError``
        if a segment is gone (merged by another process since ``load``)."""
        ...

    def token_rows(self) -> list[TokenRow]:
        """Every page with tokens, by page id."""
        ...

    def titles_urls(self, page_ids: list[int]) -> dict[int, tuple[str, str | None]]:
        """(url, title) of each page id."""
        ...

    def close(self) -> None: ...


@dataclass(slots=True)
class Plan:
    """A catch-up's work before its writes (``plan``): what ``apply`` then writes."""

    ids: list[int]
    """The page ids the log named."""
    rebuild: bool
    """Every live page built anew (the old segments go)."""
    segments: list[Built]
    removed: list[int]
    """Logged pages that have no tokens any more."""


def catch_up(writer: Writer) -> int:
    """Index the pages the log names (and merge, past ``MAX_SEGMENTS``), within the caller's
    write transaction; how many pages the log named."""
    planned = plan(writer)
    apply(writer, planned)
    return len(planned.ids)


def plan(reader: Writer) -> Plan:
    """A catch-up's reads and its segments built (nearly all of its CPU), nothing written:
    ``apply`` writes them, in the same transaction (or on the same snapshot, unchanged)."""
    ids = reader.take_pending()
    if not ids:
        return Plan([], False, [], [])
    segment_count, pages = reader.counts()
    # a merge, or most pages new: every live page anew, in one scan of the table
    rebuild = segment_count >= MAX_SEGMENTS + pages // SEGMENT_PAGES or len(ids) * 2 > pages
    done = _rebuilt(reader, pages) if rebuild else _built_segments(reader.rows_of(ids))
    present: set[int] = set()
    for segment in done:
        present.update(segment[0].tolist())
    removed = [page_id for page_id in ids if page_id not in present]
    return Plan(ids, rebuild, [segment for segment in done if segment[0].size], removed)


def apply(writer: Writer, planned: Plan) -> None:
    """Write what ``plan`` built, and empty the log of what it named."""
    if not planned.ids:
        return
    if planned.rebuild:
        writer.clear_segments()
    for segment in planned.segments:
        writer.insert(columns(segment, []))
    if planned.removed:
        writer.insert(columns(([], [], [], [], [], np.empty(0, np.uint8)), planned.removed))
    writer.clear_pending()


def parts(pages: int) -> int:
    return 1 if pages < PARALLEL_PAGES else min(os.cpu_count() or 1, 8)


def _built_segments(rows: list[TokenRow]) -> list[Built]:
    """``rows`` as segments: one, or past ``PARALLEL_PAGES`` one a CPU, built in parallel
    (the kernels run without the GIL)."""
    size = min(SEGMENT_PAGES, max(1, -(-len(rows) // parts(len(rows)))))
    chunks = [rows[start : start + size] for start in range(0, len(rows), size)] or [[]]
    with ThreadPoolExecutor(min(len(chunks), parts(len(rows)))) as pool:
        return [future.result() for future in [pool.submit(built, chunk) for chunk in chunks]]


def _rebuilt(reader: Writer, pages: int) -> list[Built]:
    """Every page with tokens as segments, one a CPU past ``PARALLEL_PAGES``: each part is
    built (without the GIL) while the next is read. One reader: two connections reading
    at once measured 1.7x slower (they contend for the GIL)."""
    rows = reader.all_rows()
    size = min(SEGMENT_PAGES, max(1, -(-pages // parts(pages))))
    with ThreadPoolExecutor(parts(pages)) as pool:
        futures: list[Future[Built]] = []
        while True:
            chunk = rows.fetchmany(size)
            if chunk or not futures:
                futures.append(pool.submit(built, chunk))
            if len(chunk) < size:
                break
        return [future.result() for future in futures]


Built = tuple[Any, ...]
"""docs, lengths, terms, df, starts, postings."""


def built(rows: list[TokenRow]) -> Built:
    """One segment's arrays from (page id, token blob) rows."""
    docs = np.fromiter((page_id for page_id, _ in rows), dtype=np.int64, count=len(rows))
    try:
        ids, counts, offsets, lengths = unpack_blobs([blob for _, blob in rows])
    except ValueError as exc:
        raise StoreError(f"cannot index pages.tokens: {exc}") from exc
    terms, df, starts, postings = build(ids, counts, offsets, overwrite=True)
    return docs, lengths, terms, df, starts, postings


def columns(done: Built, removed: list[int]) -> Columns:
    """A built segment (and the pages it removes) as the columns it is stored in."""
    docs, lengths, terms, df, starts, postings = (np.asarray(a) for a in done)
    return (
        docs.astype("<i8").tobytes(),
        lengths.astype("<u4").tobytes(),
        np.asarray(removed, dtype="<i8").tobytes(),
        terms.astype("<u4").tobytes(),
        df.astype("<u4").tobytes(),
        starts.astype("<i8").tobytes(),
        np.ascontiguousarray(postings, dtype=np.uint8).data,
        datetime.now(UTC).isoformat(),
    )
