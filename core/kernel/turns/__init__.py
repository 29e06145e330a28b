"""A message's way through one turn: routing, the run under its deadline and its observers,
the consent stage, streaming, cancelling, and the reply's delivery.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.agents.observer import (
        NO_TURN_OBSERVER as NO_TURN_OBSERVER,
        ModelCall as ModelCall,
        QuietObserver as QuietObserver,
        ToolCall as ToolCall,
        TurnObserver as TurnObserver,
        TurnObservers as TurnObservers,
    )
    from core.kernel.turns.cancelling import (
        CANCELLED_REPLY as CANCELLED_REPLY,
        RunningTurns as RunningTurns,
    )
    from core.kernel.turns.consent_stage import (
        NO_CONSENT as NO_CONSENT,
        ConsentStage as ConsentStage,
    )
    from core.kernel.turns.history_splice import PausedRun as PausedRun
    from core.kernel.turns.notices import Notices as Notices
    from core.kernel.turns.outbox import (
        REPLY_SUBSCRIBER as REPLY_SUBSCRIBER,
        OpenStream as OpenStream,
        ReplyOutbox as ReplyOutbox,
        reply_key as reply_key,
        reply_payload as reply_payload,
        usage_fields as usage_fields,
    )
    from core.kernel.turns.router import (
        APOLOGY as APOLOGY,
        MessageRouter as MessageRouter,
        OrchestratorLike as OrchestratorLike,
    )
    from core.kernel.turns.turn import (
        TOO_SLOW as TOO_SLOW,
        TurnResult as TurnResult,
        TurnRunner as TurnRunner,
    )
    from core.kernel.turns.warm import (
        WARM_HEADER as WARM_HEADER,
        PrefixWarmer as PrefixWarmer,
        Warmed as Warmed,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
