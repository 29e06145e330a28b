"""The consent stage of the turn pipeline: the one door the router has to approvals.

A tool call that needs the user's approval pauses its turn (ADR 0021). What
the router does about it is four questions to one ``ConsentStage`` (ADR
0052): is this message the answer to an open question (``answered``), is a
message delivered again still held by its open questions (``holds``), take a
paused turn (``pause``), and which system-topic handlers the stage runs
(``handlers``: resuming answered turns, answers from buttons). The kernel's
stage is ``ApprovalFlow`` (``core/kernel/consent/flow.py``); ``NO_CONSENT``,
the null object, is for a router built without one: nothing is ever asked.
"""

from __future__ import annotations

import logging
from typing import Protocol

from core.extensions.contract import TurnContext
from core.kernel.scale.seam import TurnHandler
from core.kernel.turns.turn import TurnResult

__all__ = ["NO_CONSENT", "ConsentStage"]

log = logging.getLogger("core.kernel.consent")


class ConsentStage(Protocol):
    """What the turn pipeline asks of the approval flow."""

    def handlers(self) -> list[TurnHandler]:
        """The stage's own turn-side handlers (subscribed with the router's)."""
        ...

    async def answered(self, message_key: str, text: str, turn: TurnContext) -> bool:
        """Whether the message ``message_key`` answered an open question of its
        conversation (it gets no reply of its own); anything else denies them, and
        their turns finish before it is answered. The caller holds the turn lock."""
        ...

    async def holds(self, message_key: str) -> bool:
        """Whether the message's turn is paused on open questions (a delivery again
        must leave them standing; another process may have paused it)."""
        ...

    def waiting(self) -> bool:
        """Whether any turn is paused on open questions; ``False``: ``answered`` and
        ``holds`` are ``False`` for every message, and the router asks neither."""
        ...

    async def pause(self, message_id: int, turn: TurnContext, result: TurnResult) -> bool:
        """Take a turn paused for approvals (``result.paused``): stored and asked;
        ``False``: not taken (no stage), the turn is recorded as it is."""
        ...


class _NoConsent:
    def handlers(self) -> list[TurnHandler]:
        return []

    async def answered(self, message_key: str, text: str, turn: TurnContext) -> bool:
        return False

    async def holds(self, message_key: str) -> bool:
        return False

    def waiting(self) -> bool:
        return False

    async def pause(self, message_id: int, turn: TurnContext, result: TurnResult) -> bool:
        log.error("turn %s paused for an approval, but no one can be asked", turn.turn_id)
        return False


NO_CONSENT: ConsentStage = _NoConsent()
