"""Optional channel protocols beyond seed 002's (re-exported by ``contract``).

``InteractiveChannel`` (ADR 0021): the channel renders questions itself —
approvals, and extensions' ``confirm`` / ``select`` / ``input`` requests.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from core.extensions.contract_data import UserRequest

__all__ = ["InteractiveChannel"]


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
