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
        ROUTER_SUBSCRIBER as ROUTER_SUBSCRIBER,
        Placement as Placement,
        apply_role as apply_role,
        node_name as node_name,
        placement_of as placement_of,
    )
    from core.kernel.scale.scale_out import ScaleOut as ScaleOut
    from core.kernel.scale.seam import (
        RETRY_CONCURRENCY as RETRY_CONCURRENCY,
        LocalScale as LocalScale,
        ReplySubscription as ReplySubscription,
        Scale as Scale,
        TurnHandler as TurnHandler,
        TurnLock as TurnLock,
        subscribe_all as subscribe_all,
    )
    from core.kernel.scale.turn_lock import (
        ORDER_WAIT_S as ORDER_WAIT_S,
        ConversationLocks as ConversationLocks,
        advisory_key as advisory_key,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
