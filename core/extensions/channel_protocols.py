"""Optional channel protocols beyond seed 002's (re-exported by ``contract``).

``InteractiveChannel`` (ADR 0021): the channel renders questions itself —
approvals, and extensions' ``confirm`` / ``select`` / ``input`` requests.

``TURN_CANCEL_TOPIC``: a channel whose user stops the turn being answered
(Ctrl-C in the terminal) emits ``{"channel_id": <its id>, "user_id": ...}``
there (needs ``user_messages``); the turn ends with the reply ``(cancelled)``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from core.events.topics import SystemTopics
from core.extensions.contract_data import UserRequest

__all__ = ["TURN_CANCEL_TOPIC", "InteractiveChannel"]

TURN_CANCEL_TOPIC = SystemTopics.TURN_CANCEL


@runtime_checkable
class InteractiveChannel(Protocol):
    """A channel that can put a question to the user (an approval, a confirm, a
    choice, a line of text) and show how it ended (ADR 0021).

    ``ask_user`` renders ``request`` to ``user_id`` (buttons, an inline prompt);
    the user's answer goes back through ``ExtensionContext.answer_request``.
    ``close_request`` says the question is over — answered, timed out or
    dropped — with ``outcome`` in plain words (edit the message, print a line).
    """

    async def ask_user(self, user_id: str, request: UserRequest) -> None: ...
    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None: ...
