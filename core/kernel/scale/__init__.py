"""The Scale seam (a local null object by default) and what runs behind it when several
kernel processes share one PostgreSQL: placement, the cross-process turn lock, the
scale-out bundle.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.scale.placement import (
        ROUTER_SUBSCRIBER,
        Placement,
        apply_role,
        node_name,
        placement_of,
    )
    from core.kernel.scale.scale_out import ScaleOut
    from core.kernel.scale.seam import (
        RETRY_CONCURRENCY,
        LocalScale,
        ReplySubscription,
        Scale,
        TurnHandler,
        TurnLock,
        subscribe_all,
    )
    from core.kernel.scale.turn_lock import ORDER_WAIT_S, ConversationLocks, advisory_key

__all__ = [
    "ORDER_WAIT_S",
    "RETRY_CONCURRENCY",
    "ROUTER_SUBSCRIBER",
    "ConversationLocks",
    "LocalScale",
    "Placement",
    "ReplySubscription",
    "Scale",
    "ScaleOut",
    "TurnHandler",
    "TurnLock",
    "advisory_key",
    "apply_role",
    "node_name",
    "placement_of",
    "subscribe_all",
]

_HOMES = {
    "ConversationLocks": "turn_lock",
    "LocalScale": "seam",
    "ORDER_WAIT_S": "turn_lock",
    "Placement": "placement",
    "RETRY_CONCURRENCY": "seam",
    "ROUTER_SUBSCRIBER": "placement",
    "ReplySubscription": "seam",
    "Scale": "seam",
    "ScaleOut": "scale_out",
    "TurnHandler": "seam",
    "TurnLock": "seam",
    "advisory_key": "turn_lock",
    "apply_role": "placement",
    "node_name": "placement",
    "placement_of": "placement",
    "subscribe_all": "seam",
}

__getattr__, __dir__ = lazy_door("core.kernel.scale", globals(), _HOMES, __all__)
