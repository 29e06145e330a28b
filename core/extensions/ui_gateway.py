"""``UiGateway``: what the context needs to put a question to the user.

The kernel implements it (``core.kernel.consent.ui.UiRequests``); this default
refuses every call until it does, so a context built before the kernel's
channels exist fails with a clear ``NotAvailableError``.
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
