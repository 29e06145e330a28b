"""``UiGateway``: what the context needs to put a question to the user.

The kernel implements it (``core.kernel.consent.ui.UiRequests``); this default
refuses every call until it does, so a context built before the kernel's
channels exist fails with a clear ``NotAvailableError``. The answer to a
``secret`` question never goes through the journal: the context hands it to
``answer_off_record`` (or ``typed_secret``, for ``/answer ID …`` typed as a
message) before it would publish anything (ADR 0048).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.extensions.contract import TurnContext
from core.extensions.errors import NotAvailableError

__all__ = ["UI_KINDS", "UiGateway"]

UI_KINDS = ("confirm", "select", "input", "secret")


class UiGateway:
    """Asks the user of ``turn``'s conversation; the answer, or ``None`` when none came."""

    async def ask(
        self,
        ext_id: str,
        turn: TurnContext | None,
        kind: str,
        prompt: str,
        options: Sequence[str],
        timeout_s: float | None,
    ) -> str | None:
        raise NotAvailableError("questions to the user are not available yet")

    async def answer_off_record(
        self, request_id: str, answer: str, channel_id: str, user_id: str, sender_id: str | None
    ) -> bool:
        """Whether ``request_id`` is an open ``secret`` question, now answered in memory
        (``False``: anything else, journaled as usual)."""
        return False

    async def typed_secret(
        self, text: str, channel_id: str, user_id: str, sender_id: str | None
    ) -> bool:
        """Whether the message ``text`` is ``/answer ID …`` for an open ``secret``
        question, now answered in memory and never journaled as a message."""
        return False
