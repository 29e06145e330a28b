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
    from core.extensions.access.call_gate import CallGate as CallGate
    from core.extensions.access.grant_store import (
        BUNDLED_GRANTS_FILE as BUNDLED_GRANTS_FILE,
        GRANTS_FILE as GRANTS_FILE,
        GrantStore as GrantStore,
        GrantStoreError as GrantStoreError,
        bundled_grants as bundled_grants,
        load_bundled_grants as load_bundled_grants,
    )
    from core.extensions.access.grants import (
        CONVERSATIONS_WORDS as CONVERSATIONS_WORDS,
        GrantRequest as GrantRequest,
        not_granted_reason as not_granted_reason,
        replaces_words as replaces_words,
    )
    from core.extensions.access.rate_limit import RateLimit as RateLimit
    from core.extensions.access.served_calls import (
        served_token as served_token,
        served_turn as served_turn,
        serving_extension as serving_extension,
        turn_for_token as turn_for_token,
    )
    from core.extensions.access.state_scope import (
        PERSON_MARK as PERSON_MARK,
        check_key as check_key,
        current_turn as current_turn,
        encode_value as encode_value,
        person_session as person_session,
        serving as serving,
        state_session as state_session,
    )
    from core.extensions.access.topic_rules import (
        GUARDED_TOPICS as GUARDED_TOPICS,
        KERNEL_ONLY as KERNEL_ONLY,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
