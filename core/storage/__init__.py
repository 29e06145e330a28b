"""Durable storage shared by the kernel's stores (ADR 0034).

SQLite files under the data directory stay the embedded default; with
``storage.backend: postgres`` the journal, sessions, state and schedules live
in one PostgreSQL database that several kernel processes share. This package
is what they have in common: a pool per process (``pool_for``), and versioned
migrations per component applied at start under an advisory lock
(``register_migrations``, ``apply_migrations``), so processes starting at
once never race on the schema.
"""

from core.storage.component_pool import ComponentPool
from core.storage.dsn import dsn_passwords, hide_dsn_secrets, redact_dsn
from core.storage.migrations import (
    SCHEMA_TABLE,
    SchemaStatus,
    apply_migrations,
    known_components,
    migrated_pool,
    register_migrations,
    schema_status,
)
from core.storage.postgres import (
    StorageError,
    connect,
    open_pool,
    pool_for,
    release_pool,
)

__all__ = [
    "SCHEMA_TABLE",
    "ComponentPool",
    "SchemaStatus",
    "StorageError",
    "apply_migrations",
    "connect",
    "dsn_passwords",
    "hide_dsn_secrets",
    "known_components",
    "migrated_pool",
    "open_pool",
    "pool_for",
    "redact_dsn",
    "register_migrations",
    "release_pool",
    "schema_status",
]
