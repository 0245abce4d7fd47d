"""Persistence: the ``Store`` protocol, its SQLite implementation, migrations and exports.

Imports only ``parsers.page`` from the rest of the project; never the engine.
"""
