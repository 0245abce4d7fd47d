"""What a ``--db`` value names, and how it may be shown.

Owns: telling a PostgreSQL DSN (``postgresql://`` or ``postgres://``) from a SQLite path,
and the forms of a DSN fit for messages and published files. Invariant: no form returned
here for display holds the password; a SQLite path is returned unchanged. Pure string work:
imports nothing of the project.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(db: str) -> bool:
    """Whether ``db`` names a PostgreSQL database (a ``postgresql://`` DSN)."""
    return db.startswith(_SCHEMES)


def redact_dsn(dsn: str) -> str:
    """The DSN without its password (in the authority or as a ``password=`` parameter);
    anything else (a SQLite path) unchanged."""
    if not is_postgres(dsn):
        return dsn
    try:
        parts = urlsplit(dsn)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}@{hostport}" if user else hostport
        query = parts.query
        if query:
            pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
                     if k.lower() != "password"]  # fmt: skip
            query = urlencode(pairs)
        return parts._replace(netloc=netloc, query=query).geturl()
    except ValueError:
        return dsn.split("@")[-1]


def mask_password(db: str) -> str:
    """``db`` with the password of its authority shown as ``***`` (``user:***@host``): says
    that one was given without giving it (the WARC ``warcinfo`` record). A SQLite path, or a
    DSN without a password there, unchanged."""
    if not is_postgres(db):
        return db
    parts = urlsplit(db)
    if parts.password is None:
        return db
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()
