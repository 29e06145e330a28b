"""What an extension may do: the user's grants (asked in plain words, bound to
the code), the call gate, rate limits, topic rules, the calls the kernel is
serving and the state scope a call addresses.

The door is lazy (``lazy_door``): a submodule is imported when one of its
names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.access.call_gate import CallGate
    from core.extensions.access.grant_store import (
        BUNDLED_GRANTS_FILE,
        GRANTS_FILE,
        GrantStore,
        GrantStoreError,
        bundled_grants,
        load_bundled_grants,
    )
    from core.extensions.access.grants import (
        CONVERSATIONS_WORDS,
        GrantRequest,
        not_granted_reason,
        replaces_words,
    )
    from core.extensions.access.rate_limit import RateLimit
    from core.extensions.access.served_calls import (
        served_token,
        served_turn,
        serving_extension,
        turn_for_token,
    )
    from core.extensions.access.state_scope import (
        PERSON_MARK,
        check_key,
        current_turn,
        encode_value,
        person_session,
        serving,
        state_session,
    )
    from core.extensions.access.topic_rules import GUARDED_TOPICS, KERNEL_ONLY

__all__ = [
    "BUNDLED_GRANTS_FILE",
    "CONVERSATIONS_WORDS",
    "GRANTS_FILE",
    "GUARDED_TOPICS",
    "KERNEL_ONLY",
    "PERSON_MARK",
    "CallGate",
    "GrantRequest",
    "GrantStore",
    "GrantStoreError",
    "RateLimit",
    "bundled_grants",
    "check_key",
    "current_turn",
    "encode_value",
    "load_bundled_grants",
    "not_granted_reason",
    "person_session",
    "replaces_words",
    "served_token",
    "served_turn",
    "serving",
    "serving_extension",
    "state_session",
    "turn_for_token",
]

_HOMES = {
    "BUNDLED_GRANTS_FILE": "grant_store",
    "CONVERSATIONS_WORDS": "grants",
    "CallGate": "call_gate",
    "GRANTS_FILE": "grant_store",
    "GUARDED_TOPICS": "topic_rules",
    "GrantRequest": "grants",
    "GrantStore": "grant_store",
    "GrantStoreError": "grant_store",
    "KERNEL_ONLY": "topic_rules",
    "PERSON_MARK": "state_scope",
    "RateLimit": "rate_limit",
    "bundled_grants": "grant_store",
    "check_key": "state_scope",
    "current_turn": "state_scope",
    "encode_value": "state_scope",
    "load_bundled_grants": "grant_store",
    "not_granted_reason": "grants",
    "person_session": "state_scope",
    "replaces_words": "grants",
    "served_token": "served_calls",
    "served_turn": "served_calls",
    "serving": "state_scope",
    "serving_extension": "served_calls",
    "state_session": "state_scope",
    "turn_for_token": "served_calls",
}

__getattr__, __dir__ = lazy_door("core.extensions.access", globals(), _HOMES, __all__)
