"""The ``sessions`` component's schema, in ``sessions.db`` (SQLite) and in PostgreSQL.

Histories (the SDK ``Session`` items: ``agent_messages`` in ``sessions.db``,
``hearth_session_items`` in PostgreSQL), the ledger, conversations' session
generations, post-processing records and activations, paused turns with
their approvals and the "always allow" grants (ADR 0035). Registered with
the storage foundation's migrations runner at import, for both databases
(ADR 0051); version N is the N-th entry and is never edited once released
(a change is a new entry). The SQLite list starts with the tables exactly as
the code before the runner created them, ``IF NOT EXISTS``, so a
``sessions.db`` written by that code is taken over as it is, then upgraded.
Timestamps stay epoch seconds (``double precision``) as in SQLite, so the
code that reads them is the same for both backends.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.kernel.conversations.session_ids import upgrade_sqlite_session_ids
from core.storage import (
    Database,
    Executor,
    PostgresDatabase,
    SQLiteDatabase,
    register_migrations,
)

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = [
    "SESSIONS_COMPONENT",
    "SESSION_MIGRATIONS",
    "SQLITE_SESSION_MIGRATIONS",
    "sessions_database",
]

SESSIONS_COMPONENT = "sessions"

_V1 = """
CREATE TABLE hearth_session_items (
    id           bigserial PRIMARY KEY,
    session_id   text NOT NULL,
    message_data text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hearth_session_items_by_session ON hearth_session_items (session_id, id);

CREATE TABLE hearth_turns (
    message_key text PRIMARY KEY,
    session_id  text NOT NULL,
    channel_id  text NOT NULL,
    user_id     text NOT NULL,
    reply       text NOT NULL,
    created_at  double precision NOT NULL,
    followup    text
);
CREATE INDEX hearth_turns_by_session ON hearth_turns (session_id, created_at);
CREATE INDEX hearth_turns_by_age ON hearth_turns (created_at);

CREATE TABLE hearth_conversations (
    key        text PRIMARY KEY,
    generation integer NOT NULL,
    updated_at double precision NOT NULL
);

CREATE TABLE hearth_post_turns (
    message_key  text PRIMARY KEY,
    conversation text NOT NULL,
    session_id   text,
    original     text NOT NULL,
    clean        text NOT NULL,
    specs        text NOT NULL,
    events       text NOT NULL,
    usage        text NOT NULL,
    created_at   double precision NOT NULL
);
CREATE TABLE hearth_post_results (
    id           bigserial UNIQUE,
    message_key  text NOT NULL,
    seq          integer NOT NULL,
    conversation text NOT NULL,
    name         text NOT NULL,
    result       text NOT NULL,
    created_at   double precision NOT NULL,
    PRIMARY KEY (message_key, seq)
);
CREATE INDEX hearth_post_results_by_name ON hearth_post_results (conversation, name, created_at);

CREATE TABLE hearth_post_activations (
    id            bigserial PRIMARY KEY,
    conversation  text NOT NULL,
    name          text NOT NULL,
    processor     text NOT NULL,
    default_param text,
    created_at    double precision NOT NULL,
    updated_at    double precision NOT NULL,
    UNIQUE (conversation, name)
);
CREATE TABLE hearth_post_defaults (
    conversation text NOT NULL,
    processor    text NOT NULL,
    PRIMARY KEY (conversation, processor)
);

CREATE TABLE hearth_paused_turns (
    seq          bigserial UNIQUE,
    message_key  text PRIMARY KEY,
    message_id   bigint NOT NULL,
    conversation text NOT NULL,
    session_id   text NOT NULL,
    channel_id   text NOT NULL,
    user_id      text NOT NULL,
    owner_id     text NOT NULL,
    input_items  text NOT NULL,
    query        text NOT NULL,
    state        text NOT NULL,
    round        integer NOT NULL,
    status       text NOT NULL,
    updated_at   double precision NOT NULL
);
CREATE TABLE hearth_approvals (
    id          text PRIMARY KEY,
    message_key text NOT NULL,
    round       integer NOT NULL,
    call_id     text NOT NULL,
    tool        text NOT NULL,
    arguments   text NOT NULL,
    status      text NOT NULL,
    always      boolean NOT NULL,
    decided_by  text,
    created_at  double precision NOT NULL,
    expires_at  double precision NOT NULL,
    decided_at  double precision
);
CREATE INDEX hearth_approvals_by_turn ON hearth_approvals (message_key, round);
CREATE TABLE hearth_policy_grants (
    tool       text PRIMARY KEY,
    granted_by text NOT NULL,
    channel_id text NOT NULL,
    created_at double precision NOT NULL
);
"""

# session ids escape their conversation key (ADR 0048; core/kernel/conversations/session_ids.py):
# the same rewrite as ``upgraded_session_id``, in SQL; the key before the last "#"
# is looked up by the primary key
_V2 = """
CREATE FUNCTION pg_temp.hearth_session_id(old text) RETURNS text LANGUAGE sql AS $$
SELECT COALESCE(
    (SELECT replace(replace(c.key, '%', '%25'), '#', '%23')
            || '#' || right(old, strpos(reverse(old), '#') - 1)
       FROM hearth_conversations c
      WHERE strpos(old, '#') > 0
        AND c.key = left(old, length(old) - strpos(reverse(old), '#'))
        AND CASE WHEN right(old, strpos(reverse(old), '#') - 1) ~ '^[1-9][0-9]{0,8}$'
                 THEN right(old, strpos(reverse(old), '#') - 1)::integer <= c.generation
                 ELSE false END),
    replace(replace(old, '%', '%25'), '#', '%23'))
$$;
UPDATE hearth_session_items SET session_id = pg_temp.hearth_session_id(session_id)
 WHERE session_id ~ '[#%]';
UPDATE hearth_turns SET session_id = pg_temp.hearth_session_id(session_id)
 WHERE session_id ~ '[#%]';
UPDATE hearth_post_turns SET session_id = pg_temp.hearth_session_id(session_id)
 WHERE session_id ~ '[#%]';
UPDATE hearth_paused_turns SET session_id = pg_temp.hearth_session_id(session_id)
 WHERE session_id ~ '[#%]';
DROP FUNCTION pg_temp.hearth_session_id(text);
"""

# when a recorded reply was handed to its channel (issue 41): a message delivered again
# after a crash is not answered twice
_V3 = "ALTER TABLE hearth_turns ADD COLUMN IF NOT EXISTS sent_at double precision;"

# the open paused turns of a conversation, read at each message by every process
# sharing the database (ADR 0102)
_V4 = """
CREATE INDEX IF NOT EXISTS hearth_paused_turns_open ON hearth_paused_turns (conversation)
 WHERE status != 'done';
"""

SESSION_MIGRATIONS = (_V1, _V2, _V3, _V4)

_SQLITE_V1 = """
CREATE TABLE IF NOT EXISTS hearth_turns (
    message_key TEXT PRIMARY KEY, session_id TEXT NOT NULL, channel_id TEXT NOT NULL,
    user_id TEXT NOT NULL, reply TEXT NOT NULL, created_at REAL NOT NULL, followup TEXT);
CREATE TABLE IF NOT EXISTS hearth_conversations (
    key TEXT PRIMARY KEY, generation INTEGER NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS hearth_post_turns (
    message_key TEXT PRIMARY KEY, conversation TEXT NOT NULL, session_id TEXT,
    original TEXT NOT NULL, clean TEXT NOT NULL, specs TEXT NOT NULL, events TEXT NOT NULL,
    usage TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS hearth_post_results (
    message_key TEXT NOT NULL, seq INTEGER NOT NULL, conversation TEXT NOT NULL,
    name TEXT NOT NULL, result TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (message_key, seq));
CREATE INDEX IF NOT EXISTS hearth_post_results_by_name
    ON hearth_post_results(conversation, name, created_at);
CREATE TABLE IF NOT EXISTS hearth_post_activations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL, name TEXT NOT NULL,
    processor TEXT NOT NULL, default_param TEXT, created_at REAL NOT NULL,
    updated_at REAL NOT NULL, UNIQUE(conversation, name));
CREATE TABLE IF NOT EXISTS hearth_post_defaults (
    conversation TEXT NOT NULL, processor TEXT NOT NULL, PRIMARY KEY (conversation, processor));
CREATE TABLE IF NOT EXISTS hearth_paused_turns (
    message_key TEXT PRIMARY KEY, message_id INTEGER NOT NULL, conversation TEXT NOT NULL,
    session_id TEXT NOT NULL, channel_id TEXT NOT NULL, user_id TEXT NOT NULL,
    owner_id TEXT NOT NULL, input_items TEXT NOT NULL, query TEXT NOT NULL,
    state TEXT NOT NULL, round INTEGER NOT NULL, status TEXT NOT NULL,
    updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS hearth_approvals (
    id TEXT PRIMARY KEY, message_key TEXT NOT NULL, round INTEGER NOT NULL,
    call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL, status TEXT NOT NULL,
    always INTEGER NOT NULL, decided_by TEXT, created_at REAL NOT NULL,
    expires_at REAL NOT NULL, decided_at REAL);
CREATE TABLE IF NOT EXISTS hearth_policy_grants (
    tool TEXT PRIMARY KEY, granted_by TEXT NOT NULL, channel_id TEXT NOT NULL,
    created_at REAL NOT NULL);
"""


async def _sqlite_followup(tx: Executor) -> None:
    """The ledger's ``followup`` column (ADR 0023), where a ``sessions.db`` older than
    it lacks it."""
    columns = {row[1] for row in await tx.fetch_all("PRAGMA table_info(hearth_turns)")}
    if "followup" not in columns:
        await tx.execute("ALTER TABLE hearth_turns ADD COLUMN followup TEXT")


async def _sqlite_session_ids(tx: Executor) -> None:
    """Session ids with their key escaped (ADR 0048), as PostgreSQL's migration 2."""
    await upgrade_sqlite_session_ids(tx)


# the SDK's history tables exactly as its ``SQLiteSession`` created them (where the
# ledger keeps a session's items on SQLite: ADR 0062), for a file that has none yet
_SQLITE_V4 = """
CREATE TABLE IF NOT EXISTS agent_sessions (
    session_id TEXT PRIMARY KEY,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS agent_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    message_data TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_agent_messages_session_id ON agent_messages (session_id, id);
"""


async def _sqlite_sent_at(tx: Executor) -> None:
    """The ledger's ``sent_at`` column, as PostgreSQL's migration 3."""
    columns = {row[1] for row in await tx.fetch_all("PRAGMA table_info(hearth_turns)")}
    if "sent_at" not in columns:
        await tx.execute("ALTER TABLE hearth_turns ADD COLUMN sent_at REAL")


SQLITE_SESSION_MIGRATIONS = (
    _SQLITE_V1,
    _sqlite_followup,
    _sqlite_session_ids,
    _SQLITE_V4,
    _sqlite_sent_at,
)
register_migrations(SESSIONS_COMPONENT, SESSION_MIGRATIONS, sqlite=SQLITE_SESSION_MIGRATIONS)


def sessions_database(
    db_path: Path,
    storage: StorageSettings | None = None,
    *,
    synchronous: str = "normal",
    what: str = "the sessions store is",
) -> Database:
    """The ``sessions`` component's database for one store: PostgreSQL with
    ``storage.backend: postgres`` (``what`` names the store in its errors), else
    ``db_path`` (``sessions.db``) written with ``synchronous``."""
    if storage is not None and storage.backend == "postgres":
        return PostgresDatabase(storage, [SESSIONS_COMPONENT], what)
    return SQLiteDatabase(db_path, [SESSIONS_COMPONENT], synchronous=synchronous)
