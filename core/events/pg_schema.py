"""The PostgreSQL journal's schema: the SQLite tables, prefixed, plus process liveness.

Registered as the storage component ``journal`` (ADR 0034): version N is the
N-th entry of ``JOURNAL_MIGRATIONS`` and is never edited once released.
Times are Unix seconds (``double precision``) as in the SQLite journal, so
both backends hand the bus the same values; payloads stay the exact JSON text
the bus encoded.

What differs from SQLite: ``deliveries.owner`` names the process holding an
in-flight delivery, and ``journal_processes`` keeps one heartbeat row per
live process, so crash recovery takes back only what a dead process held;
subscribers have no cursor, since publishers create the deliveries of every
known subscriber (``pg_batch``).
"""

from __future__ import annotations

import zlib

from core.storage import register_migrations

__all__ = [
    "COMPONENT",
    "EVENTS_LOCK",
    "JOURNAL_MIGRATIONS",
    "NOTIFY_CHANNEL",
    "REAP_LOCK",
]

COMPONENT = "journal"
NOTIFY_CHANNEL = "hearth_journal"
# pg_advisory_xact_lock keys. EVENTS_LOCK: batches that insert events or register
# subscribers hold it to commit, so ids are committed in id order and every
# publish sees exactly the subscribers registered before it. REAP_LOCK: one
# process at a time declares others dead and takes their deliveries back.
EVENTS_LOCK = zlib.crc32(b"hearth journal events")
REAP_LOCK = zlib.crc32(b"hearth journal reap")

JOURNAL_MIGRATIONS = (
    """
    CREATE SEQUENCE journal_event_ids;
    CREATE TABLE journal_events (
        id bigint PRIMARY KEY DEFAULT nextval('journal_event_ids'),
        topic text NOT NULL,
        source text NOT NULL,
        payload text NOT NULL,
        correlation_id text,
        idempotency_key text,
        created_at double precision NOT NULL
    );
    ALTER SEQUENCE journal_event_ids OWNED BY journal_events.id;
    CREATE UNIQUE INDEX journal_events_idempotency
        ON journal_events (idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE TABLE journal_deliveries (
        event_id bigint NOT NULL,
        subscriber_id text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'inflight', 'done', 'dead')),
        attempt integer NOT NULL DEFAULT 0,
        next_at double precision NOT NULL DEFAULT 0,
        recovered boolean NOT NULL DEFAULT false,
        error text,
        owner text,
        updated_at double precision NOT NULL,
        PRIMARY KEY (event_id, subscriber_id)
    );
    CREATE INDEX journal_deliveries_pending
        ON journal_deliveries (subscriber_id, event_id) WHERE status = 'pending';
    CREATE INDEX journal_deliveries_inflight
        ON journal_deliveries (owner) WHERE status = 'inflight';
    CREATE INDEX journal_deliveries_dead
        ON journal_deliveries (updated_at) WHERE status = 'dead';
    CREATE TABLE journal_subscribers (
        id text PRIMARY KEY,
        pattern text NOT NULL,
        max_attempts integer NOT NULL DEFAULT 5,
        last_seen double precision NOT NULL
    );
    CREATE TABLE journal_processes (
        id text PRIMARY KEY,
        host text NOT NULL,
        pid integer NOT NULL,
        started_at double precision NOT NULL,
        heartbeat_at double precision NOT NULL
    );
    """,
)

register_migrations(COMPONENT, JOURNAL_MIGRATIONS)
