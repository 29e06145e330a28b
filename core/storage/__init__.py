"""Durable storage shared by the kernel's stores (ADR 0034).

SQLite files under the data directory stay the embedded default; with
``storage.backend: postgres`` the journal, sessions, state, usage and schedules
live in one PostgreSQL database that several kernel processes share. This
package is what they have in common, and the one way the kernel and its
extensions reach a database (ADR 0080; the journals keep drivers of their
own): one interface to either database
(``Database``: ``SQLiteDatabase``, ``PostgresDatabase``, with the SQL helpers
of ``sql``), a pool per process (``pool_for``), and one migration runner —
versioned migrations per component and database, applied at open under a
lock (``register_migrations``, ``apply_migrations``), so processes starting
at once never race on the schema (ADR 0034, 0051).
"""

from core.storage.database import (
    Database,
    DatabaseClosedError,
    Dialect,
    DuplicateKeyError,
    Executor,
    PostgresDatabase,
    PostgresExecutor,
    lock_named,
)
from core.storage.dsn import dsn_passwords, hide_dsn_secrets, redact_dsn
from core.storage.migrations import (
    SCHEMA_TABLE,
    Migration,
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
from core.storage.sql import (
    byte_order,
    for_update,
    insertion_order,
    numbered,
    statements,
    upsert,
)
from core.storage.sqlite import SQLiteDatabase, sqlite_read_only

__all__ = [
    "SCHEMA_TABLE",
    "Database",
    "DatabaseClosedError",
    "Dialect",
    "DuplicateKeyError",
    "Executor",
    "Migration",
    "PostgresDatabase",
    "PostgresExecutor",
    "SQLiteDatabase",
    "SchemaStatus",
    "StorageError",
    "apply_migrations",
    "byte_order",
    "connect",
    "dsn_passwords",
    "for_update",
    "hide_dsn_secrets",
    "insertion_order",
    "known_components",
    "lock_named",
    "migrated_pool",
    "numbered",
    "open_pool",
    "pool_for",
    "redact_dsn",
    "register_migrations",
    "release_pool",
    "schema_status",
    "sqlite_read_only",
    "statements",
    "upsert",
]
