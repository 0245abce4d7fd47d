"""The parse pool: HTML parsed in worker processes forked from a fork server."""
