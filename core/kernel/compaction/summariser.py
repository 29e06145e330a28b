"""The default summary: the session's model, asked to compress a transcript.

The old items go to the model as one plain-text transcript (a user message),
not as input items: tool calls in the input would need their tools declared,
and some providers refuse a history that mentions tools they were not given.
Long texts are clipped per item, so one large tool result cannot dominate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents import Agent, Runner

from core.agents.model_router import ModelRouter

__all__ = ["COMPACTION_INSTRUCTIONS", "ModelSummariser", "Summarise", "transcript"]

# (old items, instructions) -> the summary text; raises on failure
Summarise = Callable[[list[dict[str, Any]], str], Awaitable[str]]

COMPACTION_INSTRUCTIONS = (
    "You compress the earlier part of a conversation between a user and their assistant "
    "into a summary that the assistant will read instead of it. Keep what may matter later: "
    "the user's facts, preferences and goals, decisions taken, open questions and promises, "
    "and the results of tool calls worth remembering (names, numbers, dates, ids). Leave out "
    "small talk and whatever was superseded. Write plain text in the conversation's language, "
    "at most about 300 words. Reply with the summary only."
)
CLIP_CHARS = 2000


class ModelSummariser:
    """``Summarise`` with the model ``ModelRouter`` gives ``agent_id`` (one model call).

    Raises ``ModelNotConfiguredError`` when there is no model, as every
    ``get_model`` does; the caller bounds the call with its deadline.
    """

    def __init__(self, router: ModelRouter, agent_id: str = "orchestrator") -> None:
        self._router = router
        self._agent_id = agent_id

    async def __call__(self, items: list[dict[str, Any]], instructions: str) -> str:
        model = self._router.get_model(self._agent_id)
        agent: Agent[None] = Agent(name="compaction", instructions=instructions, model=model)
        result = await Runner.run(agent, transcript(items), max_turns=1)
        return str(result.final_output or "")


def transcript(items: Sequence[dict[str, Any]]) -> str:
    """The items as the text the summariser reads: one line per message or tool step."""
    lines = [line for item in items if (line := _line(item)) is not None]
    return "Summarise this conversation:\n\n" + "\n".join(lines)


def _line(item: dict[str, Any]) -> str | None:
    role, kind = item.get("role"), item.get("type")
    if isinstance(role, str):
        return f"{role.capitalize()}: {_clip(_text(item.get('content')))}"
    if not isinstance(kind, str):
        return None
    if kind.endswith("_call_output"):
        return f"Tool result: {_clip(_text(item.get('output')))}"
    if kind.endswith("_call"):
        name = item.get("name") or kind
        return f"Tool call: {name}({_clip(str(item.get('arguments') or ''))})"
    return None  # reasoning and other bookkeeping items say nothing a summary needs


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text") or part.get("refusal")
                parts.append(str(text) if text else f"[{part.get('type', 'part')}]")
        return " ".join(parts)
    return "" if content is None else str(content)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CLIP_CHARS else text[: CLIP_CHARS - 1] + "…"
