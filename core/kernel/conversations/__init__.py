"""Conversations and their history: which session each uses, the ledger that stores turns,
and whom a turn is for.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.conversations.ledger import (
        ConversationSession,
        LedgerSession,
        LedgerWrite,
        StoredItem,
        StoredReply,
        StoredSize,
        trim_to_user_turn,
    )
    from core.kernel.conversations.people import (
        CHANNEL_PREFIXES,
        Household,
        Person,
        identity_of,
        telegram_ids,
    )
    from core.kernel.conversations.session_ids import (
        conversation_of,
        session_id_of,
        upgrade_sqlite_session_ids,
        upgraded_session_id,
    )
    from core.kernel.conversations.session_schema import (
        SESSION_MIGRATIONS,
        SESSIONS_COMPONENT,
        SQLITE_SESSION_MIGRATIONS,
        sessions_database,
    )
    from core.kernel.conversations.session_storage import (
        LEDGER_RETENTION_S,
        SessionStorage,
        session_storage_for,
    )
    from core.kernel.conversations.sessions import Conversations

__all__ = [
    "CHANNEL_PREFIXES",
    "LEDGER_RETENTION_S",
    "SESSIONS_COMPONENT",
    "SESSION_MIGRATIONS",
    "SQLITE_SESSION_MIGRATIONS",
    "ConversationSession",
    "Conversations",
    "Household",
    "LedgerSession",
    "LedgerWrite",
    "Person",
    "SessionStorage",
    "StoredItem",
    "StoredReply",
    "StoredSize",
    "conversation_of",
    "identity_of",
    "session_id_of",
    "session_storage_for",
    "sessions_database",
    "telegram_ids",
    "trim_to_user_turn",
    "upgrade_sqlite_session_ids",
    "upgraded_session_id",
]

_HOMES = {
    "CHANNEL_PREFIXES": "people",
    "ConversationSession": "ledger",
    "Conversations": "sessions",
    "Household": "people",
    "LEDGER_RETENTION_S": "session_storage",
    "LedgerSession": "ledger",
    "LedgerWrite": "ledger",
    "Person": "people",
    "SESSIONS_COMPONENT": "session_schema",
    "SESSION_MIGRATIONS": "session_schema",
    "SQLITE_SESSION_MIGRATIONS": "session_schema",
    "SessionStorage": "session_storage",
    "StoredItem": "ledger",
    "StoredReply": "ledger",
    "StoredSize": "ledger",
    "conversation_of": "session_ids",
    "identity_of": "people",
    "session_id_of": "session_ids",
    "session_storage_for": "session_storage",
    "sessions_database": "session_schema",
    "telegram_ids": "people",
    "trim_to_user_turn": "ledger",
    "upgrade_sqlite_session_ids": "session_ids",
    "upgraded_session_id": "session_ids",
}

__getattr__, __dir__ = lazy_door("core.kernel.conversations", globals(), _HOMES, __all__)
