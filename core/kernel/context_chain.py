"""The ContextProvider chain: extra system instructions for each turn.

Providers run in ``context_priority`` order (lower first); their non-empty
results are joined with ``\\n---\\n``. The user's text is never rewritten.
A provider that fails or is slow is skipped with a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from core.extensions.contract import TurnContext

log = logging.getLogger("core.context")

SEPARATOR = "\n---\n"
PROVIDER_TIMEOUT_S = 5.0


class ActiveChannelContext:
    """Built-in provider (priority 0): tells the agent where the user is."""

    context_priority = 0

    async def get_context(self, prompt: str, turn_context: TurnContext) -> str | None:
        if turn_context.channel_id is None:
            return None
        return (
            "[Current Session Context]\n"
            f"Channel: {turn_context.channel_id}; user: {turn_context.user_id}. "
            "Replies are delivered on this channel."
        )


class ContextChain:
    """Collects context from every active provider for one turn."""

    def __init__(self, providers: Callable[[], Sequence[tuple[str, Any]]]) -> None:
        self._providers = providers
        self._builtin = ActiveChannelContext()

    def ordered(self) -> list[tuple[str, Any]]:
        found: list[tuple[str, Any]] = [("kernel", self._builtin), *self._providers()]
        return sorted(found, key=lambda item: _priority(item[1]))

    async def build(self, prompt: str, turn: TurnContext) -> str:
        parts: list[str] = []
        for name, provider in self.ordered():
            try:
                async with asyncio.timeout(PROVIDER_TIMEOUT_S):
                    text = await provider.get_context(prompt, turn)
            except Exception as exc:
                log.error("context provider %s failed: %s", name, exc)
                continue
            if text and text.strip():
                parts.append(text.strip())
        return SEPARATOR.join(parts)

    async def enrich(self, prompt: str, turn: TurnContext) -> str:
        """Context, separator, prompt — for agents that take one combined prompt."""
        context = await self.build(prompt, turn)
        return f"{context}{SEPARATOR}{prompt}" if context else prompt


def _priority(provider: Any) -> int:
    try:
        return int(provider.context_priority)
    except Exception:
        return 100
