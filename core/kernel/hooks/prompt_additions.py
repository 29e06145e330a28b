"""Manifest ``prompt_additions`` and ``tool_config``: text the extensions add to prompts.

Additions (seed 001 "Prompt Wiring") sit at four positions — before and
after the system instructions, before and after the user's message for this
turn — in a deterministic order: by extension id, then as listed in the
manifest. The system positions without a ``condition`` are part of the stable
prefix (the same bytes every turn, ADR 0054); a system addition with a
``condition`` may differ from turn to turn, so it goes into the turn's note
after the history (``AppliedAdditions.turn_note``) instead, and the user
positions wrap the newest message. A ``condition`` is evaluated per turn against the turn's input:
``tag_present`` (``<NAME>`` or ``<NAME …>`` in it), ``context_match`` (a
regular expression found in it) or ``state_value`` (the extension's state
for the session equals the value; read through ``StateReader``). User-side
additions shape only what the model reads this turn: the stored history
keeps the message without them, so they never pile up.

``tool_config`` (seed 001 "Tool Sequencing") becomes a guidance paragraph in
the instructions; names no tool has are reported once, never enforced.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.extensions.contract import TurnContext
from core.extensions.loading.manifest import Condition, PromptAddition, ToolConfig
from core.extensions.loading.records import ExtensionRecord

__all__ = ["AppliedAdditions", "PromptAdditions", "StateReader", "tool_guidance"]

log = logging.getLogger("core.kernel.hooks")

_MISSING = object()


class StateReader(Protocol):
    """Reads an extension's session state (for ``state_value`` conditions)."""

    async def read(self, ext_id: str, session_id: str, key: str, default: Any = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class AppliedAdditions:
    """The additions that apply to one turn, joined per position: the system ones
    without a condition (stable), the conditional system ones (``turn_note``, in
    the turn's note after the history) and the user ones (this turn's message)."""

    system_prefix: str = ""
    system_suffix: str = ""
    user_prefix: str = ""
    user_suffix: str = ""
    turn_note: str = ""

    def wrap_user(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with the last user message's text between prefix and suffix."""
        if not (self.user_prefix or self.user_suffix):
            return messages
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                parts = [self.user_prefix, message["content"], self.user_suffix]
                wrapped = {**message, "content": "\n\n".join(p for p in parts if p)}
                return [*messages[:index], wrapped, *messages[index + 1 :]]
        return messages


class PromptAdditions:
    """The wired extensions' additions, ordered once per wiring change."""

    def __init__(
        self,
        records: Callable[[], Sequence[ExtensionRecord]],
        state: StateReader | None = None,
    ) -> None:
        self._records = records
        self.state = state
        self._ordered: list[tuple[str, PromptAddition]] | None = None

    def invalidate(self) -> None:
        self._ordered = None

    def ordered(self) -> list[tuple[str, PromptAddition]]:
        if self._ordered is None:
            found = [
                (record.ext_id, addition)
                for record in self._records()
                if record.manifest is not None
                for addition in record.manifest.prompt_additions
            ]
            self._ordered = sorted(found, key=lambda item: item[0])  # stable: manifest order kept
        return self._ordered

    async def for_turn(self, turn: TurnContext, input_text: str) -> AppliedAdditions:
        ordered = self.ordered()
        if not ordered:
            return AppliedAdditions()
        chosen: dict[str, list[str]] = {}
        for ext_id, addition in ordered:
            if addition.condition is None or await self._holds(
                ext_id, addition.condition, turn, input_text
            ):
                place: str = addition.position
                if addition.condition is not None and place.startswith("system_"):
                    place = "turn_note"  # may change from turn to turn: not in the prefix
                chosen.setdefault(place, []).append(addition.content.strip())
        return AppliedAdditions(**{pos: "\n\n".join(texts) for pos, texts in chosen.items()})

    async def _holds(self, ext_id: str, condition: Condition, turn: TurnContext, text: str) -> bool:
        if condition.tag_present is not None:
            name = re.escape(condition.tag_present)
            return re.search(rf"<{name}(?=[\s/>])", text) is not None
        if condition.context_match is not None:
            return re.search(condition.context_match, text) is not None
        wanted = condition.state_value
        if wanted is None or self.state is None or turn.session_id is None:
            return False
        try:
            value = await self.state.read(ext_id, turn.session_id, wanted.key, _MISSING)
        except Exception as exc:
            log.error("prompt addition of %s: state %r unreadable: %s", ext_id, wanted.key, exc)
            return False
        return value is not _MISSING and bool(value == wanted.equals)


def tool_guidance(
    configs: Iterable[tuple[str, ToolConfig]], known_tools: Iterable[str]
) -> tuple[str, list[str]]:
    """The guidance paragraph for the instructions, and a warning per unknown name.

    Guidance only: the model reads it; nothing stops it calling an avoided tool.
    """
    known = set(known_tools)
    lines: list[str] = []
    warnings: list[str] = []
    for ext_id, config in configs:
        for name in config.names:
            if name not in known:
                warnings.append(f"extension {ext_id}: tool_config names unknown tool {name!r}")
        parts = []
        if config.preferred_tools:
            parts.append("prefer " + ", ".join(config.preferred_tools))
        if config.avoided_tools:
            parts.append("avoid " + ", ".join(config.avoided_tools) + " unless nothing else fits")
        if config.tool_order:
            parts.append(
                "when several apply, use them in this order: " + " → ".join(config.tool_order)
            )
        if parts:
            lines.append(f"- ({ext_id}) " + "; ".join(parts) + ".")
    if not lines:
        return "", warnings
    return "Tool guidance (advice, not rules):\n" + "\n".join(lines), warnings
