"""The ContextProvider chain: extra system instructions for each turn.

Providers run concurrently, each under its own deadline
(``turns.context_timeout_s``), so the slowest one bounds the wait instead of
the sum of all; their non-empty results are joined in ``context_priority``
order (lower first) with ``\\n---\\n``. The user's text is never rewritten.
A provider that fails or is late is skipped with a log line.

The providers are read once per change of the wiring (``invalidate``, the
signal that rebuilds the orchestrator), not at every turn; with no provider but
the kernel's own, a turn asks it directly: it neither waits nor fails, so it
needs no deadline and serves no extension.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from core.extensions.access.served_calls import serving_extension
from core.extensions.contract import TurnContext, split_reply_address

log = logging.getLogger("core.context")

SEPARATOR = "\n---\n"
PROVIDER_TIMEOUT_S = 5.0  # default of ``turns.context_timeout_s``


class ActiveChannelContext:
    """Built-in provider (priority 0): tells the agent where the user is, in as few
    words as say it (``Channel: telegram; user: 42.``): the note is read anew every
    turn by a model server reusing the prompt (ADR 0054), and the system prompt
    says what the note is. The address goes without its reply tag: the tag is the
    channel's per-request bookkeeping (ADR 0024), new random text every turn that
    the model has no use for."""

    context_priority = 0

    async def get_context(self, prompt: str, turn_context: TurnContext) -> str | None:
        return self.note(turn_context) or None

    def note(self, turn_context: TurnContext) -> str:
        """The line itself (empty with no channel): the chain's answer when no
        extension provides context."""
        if turn_context.channel_id is None:
            return ""
        user = split_reply_address(turn_context.user_id or "")[0]
        return f"Channel: {turn_context.channel_id}; user: {user}."


class ContextChain:
    """Collects context from every active provider for one turn."""

    def __init__(
        self,
        providers: Callable[[], Sequence[tuple[str, Any]]],
        *,
        provider_timeout_s: float = PROVIDER_TIMEOUT_S,
    ) -> None:
        self._providers = providers
        self._builtin = ActiveChannelContext()
        self.provider_timeout_s = provider_timeout_s
        self._ordered: list[tuple[str, Any]] | None = None

    def invalidate(self) -> None:
        """The wiring changed: read the providers again on the next turn."""
        self._ordered = None

    def ordered(self) -> list[tuple[str, Any]]:
        """The kernel's provider and the wired extensions', in ``context_priority`` order."""
        if self._ordered is None:
            found: list[tuple[str, Any]] = [("kernel", self._builtin), *self._providers()]
            self._ordered = sorted(found, key=lambda item: _priority(item[1]))
        return self._ordered

    async def build(self, prompt: str, turn: TurnContext) -> str:
        """Every provider at once; results in priority order, whatever order they finish in."""
        ordered = self.ordered()
        if len(ordered) == 1:  # only the built-in: no tasks to spawn, no extension served
            return self._builtin.note(turn)
        texts = await asyncio.gather(
            *(self._one(name, provider, prompt, turn) for name, provider in ordered)
        )
        return SEPARATOR.join(text for text in texts if text)

    async def _one(self, name: str, provider: Any, prompt: str, turn: TurnContext) -> str:
        try:
            async with asyncio.timeout(self.provider_timeout_s):
                with serving_extension(name, turn):  # its questions belong to this turn
                    text = await provider.get_context(prompt, turn)
        except TimeoutError:
            log.error(
                "context provider %s took longer than %s s; skipped for this turn",
                name,
                self.provider_timeout_s,
            )
            return ""
        except Exception as exc:
            log.error("context provider %s failed: %s", name, exc)
            return ""
        return text.strip() if isinstance(text, str) else ""

    def without_channel(self, context: str, turn: TurnContext) -> str:
        """``context`` without the built-in channel line: a conversation whose notes are
        kept has it in its history already (ADR 0097), and it never changes there."""
        line = self._builtin.note(turn)
        if not line or not context.startswith(line):
            return context
        return context[len(line) :].removeprefix(SEPARATOR)

    async def enrich(self, prompt: str, turn: TurnContext) -> str:
        """Context, separator, prompt — for agents that take one combined prompt."""
        context = await self.build(prompt, turn)
        return f"{context}{SEPARATOR}{prompt}" if context else prompt


def _priority(provider: Any) -> int:
    try:
        return int(provider.context_priority)
    except Exception:
        return 100
