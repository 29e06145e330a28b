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
        ConversationSession as ConversationSession,
        LedgerSession as LedgerSession,
        LedgerWrite as LedgerWrite,
        StoredItem as StoredItem,
        StoredReply as StoredReply,
        StoredSize as StoredSize,
        trim_to_user_turn as trim_to_user_turn,
    )
    from core.kernel.conversations.people import (
        CHANNEL_PREFIXES as CHANNEL_PREFIXES,
        Household as Household,
        Person as Person,
        identity_of as identity_of,
        telegram_ids as telegram_ids,
    )
    from core.kernel.conversations.session_ids import (
        conversation_of as conversation_of,
        session_id_of as session_id_of,
        upgrade_sqlite_session_ids as upgrade_sqlite_session_ids,
        upgraded_session_id as upgraded_session_id,
    )
    from core.kernel.conversations.session_schema import (
        SESSION_MIGRATIONS as SESSION_MIGRATIONS,
        SESSIONS_COMPONENT as SESSIONS_COMPONENT,
        SQLITE_SESSION_MIGRATIONS as SQLITE_SESSION_MIGRATIONS,
        sessions_database as sessions_database,
    )
    from core.kernel.conversations.session_storage import (
        LEDGER_RETENTION_S as LEDGER_RETENTION_S,
        SessionStorage as SessionStorage,
        session_storage_for as session_storage_for,
    )
    from core.kernel.conversations.sessions import Conversations as Conversations

__getattr__, __dir__ = lazy_door(__name__, globals())
