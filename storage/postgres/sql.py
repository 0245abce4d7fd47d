"""The PostgreSQL store's statements, and the arrays they take.

Owns: the SQL of ``PostgresStore``: a batch's writes over ``unnest`` arrays, the leasing of
hosts and of their queued URLs, the frontier's upkeep; and the conversion of a batch's
records into those arrays (``page_arrays``, ``url_changes``). Invariants: rows are written
in URL order (a stable lock order between processes); a statement touches a row once; whether
a host has work is one index probe a host (``_HAS_WORK``), so looking for hosts to take costs
O(hosts with work); the page upsert shares its ``SET`` list with the SQLite store
(``storage.schema.page_upsert_set``).
"""

from __future__ import annotations

from parsers.links import url_origin
from storage.base import PageRecord, SkipRecord, UrlRecord
from storage.schema import page_upsert_set, signed64

_CENSUS_PROBE = 1000
"""Free hosts with work counted at most, for the fair share."""
_PAGE_COLUMNS = (
    ("url", "text"), ("final_url", "text"), ("status", "int"), ("error", "text"),
    ("content_type", "text"), ("title", "text"), ("text", "text"), ("lang", "text"),
    ("canonical", "text"), ("meta_robots", "text"), ("depth", "int"), ("body_bytes", "bigint"),
    ("content_hash", "text"), ("fetched_at", "text"), ("outlinks", "text"), ("attempts", "int"),
    ("duplicate_of", "text"), ("score", "float8"), ("tokens", "bytea"), ("simhash", "bigint"),
    ("near_duplicate_of", "text"), ("etag", "text"), ("last_modified", "text"),
    ("body", "bytea"), ("headers", "text"), ("extract", "text"),
)  # fmt: skip
_RUN_PARAM = len(_PAGE_COLUMNS) + 1
UPSERT_PAGES = f"""
INSERT INTO pages ({", ".join(name for name, _ in _PAGE_COLUMNS)}, run_id, changed_at)
SELECT t.*, ${_RUN_PARAM}::bigint, t.fetched_at
FROM unnest({", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(_PAGE_COLUMNS, 1))})
     AS t({", ".join(name for name, _ in _PAGE_COLUMNS)})
ON CONFLICT (url) DO UPDATE SET""" + page_upsert_set(least="LEAST", differs="IS DISTINCT FROM")
TOUCH_PAGES = """
UPDATE pages AS p SET fetched_at = t.fetched_at, run_id = $6, attempts = t.attempts,
    etag = coalesce(t.etag, p.etag), last_modified = coalesce(t.last_modified, p.last_modified)
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[])
     AS t(url, fetched_at, attempts, etag, last_modified)
WHERE p.url = t.url
"""
# The hosts of URLs newly queued (a CTE ``fresh(origin)``): a parked host (released when it
# had no work: lease_until infinite) may be taken again; a new one is inserted. (Only when
# missing: an INSERT that conflicts with a row another transaction is updating waits for it,
# and holders renew their hosts' rows.)
_HOSTS_OF_FRESH = """, unparked AS (
    UPDATE hosts SET lease_until = hosts.released_at FROM fresh
    WHERE hosts.origin = fresh.origin AND hosts.lease_until = 'Infinity'
)
INSERT INTO hosts (origin)
SELECT f.origin FROM fresh AS f
WHERE NOT EXISTS (SELECT 1 FROM hosts AS h WHERE h.origin = f.origin)
ORDER BY f.origin
ON CONFLICT (origin) DO NOTHING
"""
URL_CHANGES = (
    """
WITH t AS (  -- ids in the order of discovery; rows written in URL order (a stable lock order)
    SELECT nextval('urls_id_seq') AS id, t.*
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::int[], $6::float8[],
                $7::int[], $8::float8[], $9::float8[], $10::text[], $11::text[])
         AS t(url, origin, state, lease, depth, priority, attempts, next_fetch_at, interval_s,
              reason, updated_at)
), written AS (
    INSERT INTO urls AS u (id, url, origin, state, lease, depth, priority, attempts,
                           next_fetch_at, interval_s, reason, updated_at, run_id)
    SELECT t.*, $12::bigint FROM t ORDER BY t.url
    ON CONFLICT (url) DO UPDATE SET
        state = excluded.state, lease = NULL, reason = excluded.reason,
        attempts = CASE WHEN excluded.state = 'skipped' THEN u.attempts
                        ELSE excluded.attempts END,
        next_fetch_at = CASE WHEN excluded.state = 'skipped' THEN u.next_fetch_at
                             ELSE excluded.next_fetch_at END,
        interval_s = CASE WHEN excluded.state = 'skipped' THEN u.interval_s
                          ELSE excluded.interval_s END,
        updated_at = excluded.updated_at, run_id = excluded.run_id
    -- a new URL known already: nothing; a skip: only over a queued URL; a fetch: always
    WHERE excluded.state <> 'queued' AND (excluded.state <> 'skipped' OR u.state = 'queued')
    RETURNING u.origin, u.state
), fresh AS (
    SELECT DISTINCT origin FROM written WHERE state = 'queued'
)"""
    + _HOSTS_OF_FRESH
)
SEED_URLS = (
    """
WITH seeded AS (
    INSERT INTO urls (url, origin, state, depth, updated_at, run_id)
    SELECT t.url, t.origin, 'queued', 0, $3, $4
    FROM unnest($1::text[], $2::text[]) AS t(url, origin)
    ON CONFLICT (url) DO UPDATE SET state = 'queued', depth = 0, reason = NULL,
        updated_at = excluded.updated_at, run_id = excluded.run_id
    WHERE urls.state = 'skipped'
    RETURNING origin
), fresh AS (
    SELECT DISTINCT origin FROM seeded
)"""
    + _HOSTS_OF_FRESH
)
REQUEUE_DUE = (
    """
WITH due AS (
    UPDATE urls SET state = 'queued', updated_at = $1, run_id = $2
    WHERE state IN ('done', 'failed')
      AND (next_fetch_at <= $3 OR next_fetch_at - interval_s + $4::float8 <= $3)
    RETURNING origin
), fresh AS (
    SELECT DISTINCT origin FROM due
)"""
    + _HOSTS_OF_FRESH
)
FREE_DEAD_LEASES = """
UPDATE urls SET lease = NULL
WHERE lease IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM runs AS r
    WHERE r.id = urls.lease AND r.status = 'running' AND r.heartbeat_at >= $1
)
"""
RENEW = """
WITH beat AS (UPDATE runs SET heartbeat_at = $2 WHERE id = $1)
UPDATE hosts SET lease_until = $2::float8 + $3::float8 WHERE owner = $1 RETURNING origin
"""
# Whether a host has work: one probe of the urls_queued_origin index per host (a LATERAL
# with LIMIT, which the planner cannot turn into a join over every queued URL).
_HAS_WORK = """CROSS JOIN LATERAL (
        SELECT 1 FROM urls AS u WHERE u.origin = h.origin AND u.state = 'queued' LIMIT 1
    ) AS work"""
RELEASE_DRAINED = """
UPDATE hosts SET owner = NULL, lease_until = 'Infinity', released_at = $2
FROM hosts AS h LEFT JOIN LATERAL (
    SELECT 1 AS one FROM urls AS u WHERE u.origin = h.origin AND u.state = 'queued' LIMIT 1
) AS work ON true
WHERE hosts.origin = h.origin AND h.owner = $1 AND hosts.owner = $1 AND work.one IS NULL
RETURNING hosts.origin
"""
UNPARK_STRANDED = f"""
UPDATE hosts SET lease_until = hosts.released_at
FROM hosts AS h {_HAS_WORK}
WHERE hosts.origin = h.origin AND h.lease_until = 'Infinity' AND hosts.lease_until = 'Infinity'
"""
CLAIM_RENEW = """
WITH beat AS (
    UPDATE runs SET heartbeat_at = $2 WHERE id = $1 AND heartbeat_at < $2::float8 - $3::float8 / 3
), renewed AS (
    UPDATE hosts SET lease_until = $2::float8 + $3::float8
    WHERE owner = $1 AND lease_until < $2::float8 + $3::float8 * 2 / 3
)
SELECT origin FROM hosts WHERE owner = $1
"""
CENSUS = f"""
SELECT
    (SELECT count(*) FROM runs
     WHERE status = 'running' AND heartbeat_at >= $1::float8 - $2::float8),
    (SELECT count(*) FROM hosts WHERE owner IS NOT NULL AND lease_until >= $1),
    (SELECT count(*) FROM (
        SELECT 1 FROM hosts AS h {_HAS_WORK}
        WHERE h.lease_until < $1
        LIMIT {_CENSUS_PROBE}) AS free)
"""
FREE = f"""
SELECT count(*) FROM (
    SELECT 1 FROM hosts AS h {_HAS_WORK} WHERE h.lease_until < $1 LIMIT {_CENSUS_PROBE}
) AS free
"""
TAKE_HOSTS = f"""
WITH candidate AS (
    SELECT h.origin, h.owner FROM hosts AS h {_HAS_WORK}
    WHERE h.lease_until < $2
    ORDER BY h.lease_until
    LIMIT $4
    FOR UPDATE OF h SKIP LOCKED
)
UPDATE hosts SET owner = $1, lease_until = $2::float8 + $3::float8, claimed_at = $2,
    takeovers = hosts.takeovers + (candidate.owner IS NOT NULL AND candidate.owner <> $1)::int
FROM candidate WHERE hosts.origin = candidate.origin
RETURNING hosts.origin, candidate.owner
"""
CLEAR_STALE = """
UPDATE urls SET lease = NULL WHERE lease = ANY($2::bigint[]) AND origin = ANY($1::text[])
"""
LEASED_BY_HOST = """
SELECT origin, count(*) FROM urls WHERE lease = $1 GROUP BY origin
"""
RELEASE = """
UPDATE hosts SET owner = NULL, lease_until = $3 WHERE owner = $1 AND origin = ANY($2::text[])
"""
LEASE_URLS = """
WITH pick AS (
    SELECT x.id FROM unnest($2::text[], $3::int[]) AS h(origin, room)
    CROSS JOIN LATERAL (
        SELECT u.id, u.priority FROM urls AS u
        WHERE u.origin = h.origin AND u.state = 'queued' AND u.lease IS NULL
        ORDER BY u.priority DESC, u.id
        LIMIT h.room
    ) AS x
    ORDER BY x.priority DESC, x.id
    LIMIT $4
), leased AS (
    -- rows by primary key (no state test here: with it the planner may prefer scanning the
    -- whole queue through its partial index); a row no longer queued is not returned
    UPDATE urls SET lease = $1 FROM pick WHERE urls.id = pick.id AND urls.lease IS NULL
    RETURNING urls.id, urls.url, urls.depth, urls.priority, urls.interval_s, urls.state
)
SELECT l.url, l.depth, l.priority, p.etag, p.last_modified, p.content_hash, l.interval_s
FROM leased AS l LEFT JOIN pages AS p ON p.url = l.url
WHERE l.state = 'queued'
ORDER BY l.priority DESC, l.id
"""


def url_changes(
    pages: list[PageRecord], urls: list[UrlRecord], skips: list[SkipRecord], run_id: int
) -> list[list[object]]:
    """The batch's urls rows as the arrays of ``URL_CHANGES``: one row per URL, with the
    effect the statements of the SQLite store have in sequence (new URLs, then fetches, then
    skips): a fetch wins over a skip, which wins over a new URL; ids in discovery order."""
    rows: dict[str, tuple[object, ...]] = {}
    kinds: dict[str, int] = {}

    def put(url: str, kind: int, row: tuple[object, ...]) -> None:
        current = kinds.get(url)
        if current is None or kind > current or (kind == current and kind > 0):
            rows[url] = row  # (a new URL found twice: the first)
            kinds[url] = kind

    for u in urls:
        put(u.url, 0, (u.url, url_origin(u.url), "queued", run_id if u.leased else None,
                       u.depth, u.priority, 0, None, None, None, u.found_at))  # fmt: skip
    for s in skips:
        put(s.url, 1, (s.url, url_origin(s.url), "skipped", None, s.depth or 0, 0.0, 0,
                       None, None, s.reason, s.decided_at))  # fmt: skip
    for r in pages:
        put(r.url, 2, (r.url, url_origin(r.url), r.state, None, r.depth, 0.0, r.attempts,
                       r.next_fetch_at, r.interval_s, None, r.fetched_at))  # fmt: skip
    return [list(column) for column in zip(*rows.values(), strict=True)] or [[]] * 11


def page_arrays(records: list[PageRecord]) -> list[list[object]]:
    """One array per column of ``_PAGE_COLUMNS``, in order."""
    return [
        [r.url for r in records],
        [r.final_url for r in records],
        [r.status for r in records],
        [r.error for r in records],
        [r.content_type for r in records],
        [r.title for r in records],
        [r.text for r in records],
        [r.lang for r in records],
        [r.canonical for r in records],
        [r.meta_robots for r in records],
        [r.depth for r in records],
        [r.body_bytes for r in records],
        [r.content_hash for r in records],
        [r.fetched_at for r in records],
        [r.links_json for r in records],
        [r.attempts for r in records],
        [r.duplicate_of for r in records],
        [r.score for r in records],
        [r.tokens for r in records],
        [signed64(r.simhash) for r in records],
        [r.near_duplicate_of for r in records],
        [r.etag for r in records],
        [r.last_modified for r in records],
        [r.body for r in records],
        [r.headers for r in records],
        [r.extract for r in records],
    ]


ADD_SAMPLE = (
    "INSERT INTO run_samples (run_id, at, elapsed_s, done, failed, queued, in_flight, bytes) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (run_id, elapsed_s) DO NOTHING"
)
"""A progress sample (``run_samples``)."""
