"""A message's way through one turn: routing, the run under its deadline and its observers,
the consent stage, streaming, cancelling, and the reply's delivery.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.turns.cancelling import CANCELLED_REPLY, RunningTurns
    from core.kernel.turns.consent_stage import NO_CONSENT, ConsentStage
    from core.kernel.turns.notices import Notices
    from core.kernel.turns.observer import (
        NO_TURN_OBSERVER,
        ModelCall,
        QuietObserver,
        ToolCall,
        TurnObserver,
        TurnObservers,
    )
    from core.kernel.turns.outbox import (
        REPLY_SUBSCRIBER,
        OpenStream,
        ReplyOutbox,
        reply_key,
        reply_payload,
        usage_fields,
    )
    from core.kernel.turns.router import APOLOGY, MessageRouter, OrchestratorLike
    from core.kernel.turns.turn import TOO_SLOW, PausedRun, TurnResult, TurnRunner

__all__ = [
    "APOLOGY",
    "CANCELLED_REPLY",
    "NO_CONSENT",
    "NO_TURN_OBSERVER",
    "REPLY_SUBSCRIBER",
    "TOO_SLOW",
    "ConsentStage",
    "MessageRouter",
    "ModelCall",
    "Notices",
    "OpenStream",
    "OrchestratorLike",
    "PausedRun",
    "QuietObserver",
    "ReplyOutbox",
    "RunningTurns",
    "ToolCall",
    "TurnObserver",
    "TurnObservers",
    "TurnResult",
    "TurnRunner",
    "reply_key",
    "reply_payload",
    "usage_fields",
]

_HOMES = {
    "APOLOGY": "router",
    "CANCELLED_REPLY": "cancelling",
    "ConsentStage": "consent_stage",
    "MessageRouter": "router",
    "ModelCall": "observer",
    "NO_CONSENT": "consent_stage",
    "NO_TURN_OBSERVER": "observer",
    "Notices": "notices",
    "OpenStream": "outbox",
    "OrchestratorLike": "router",
    "PausedRun": "turn",
    "QuietObserver": "observer",
    "REPLY_SUBSCRIBER": "outbox",
    "ReplyOutbox": "outbox",
    "RunningTurns": "cancelling",
    "TOO_SLOW": "turn",
    "ToolCall": "observer",
    "TurnObserver": "observer",
    "TurnObservers": "observer",
    "TurnResult": "turn",
    "TurnRunner": "turn",
    "reply_key": "outbox",
    "reply_payload": "outbox",
    "usage_fields": "outbox",
}

__getattr__, __dir__ = lazy_door("core.kernel.turns", globals(), _HOMES, __all__)
