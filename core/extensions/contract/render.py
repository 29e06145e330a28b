"""Tool renderers (seed 003 "tool renderers (call/result)", "render hints"; ADR 0096).

An extension that implements ``ToolRendererProvider`` is asked, while a turn
streams to a channel, how a tool's call (``phase`` ``call``, no result yet) and
its result (``result``) should look. It answers a ``RenderHint`` — plain text,
Markdown, a card with fields, or hidden — or ``None`` (the next renderer, then
the default line ``using TOOL…`` for a call and nothing for a result). A
renderer that raises or is slow is skipped with a warning: the default line
shows. Channels show a hint their way; the default is one line
(``hint_text``) through ``on_stream_status``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ["HintKind", "RenderHint", "ToolPhase", "ToolRendererProvider", "hint_text"]

HintKind = Literal["text", "markdown", "card", "hidden"]
ToolPhase = Literal["call", "result"]


@dataclass(frozen=True, slots=True)
class RenderHint:
    """How a tool's call or result is shown: ``text`` / ``markdown`` (its ``text``),
    ``card`` (``title`` and ``fields``, name and value), or ``hidden``."""

    kind: HintKind
    text: str = ""
    title: str = ""
    fields: tuple[tuple[str, str], ...] = ()


def hint_text(hint: RenderHint, *, markdown: bool = False) -> str:
    """The hint as one channel's text: a card's title and fields on lines (bold
    names in Markdown), text as it is; ``""`` for a hidden hint."""
    if hint.kind == "hidden":
        return ""
    if hint.kind != "card":
        return hint.text
    if markdown:
        rows = [f"**{hint.title}**"] if hint.title else []
        rows += [f"- **{name}**: {value}" for name, value in hint.fields]
        return "\n".join(rows)
    head = [hint.title] if hint.title else []
    return " · ".join([*head, *(f"{name}: {value}" for name, value in hint.fields)])


@runtime_checkable
class ToolRendererProvider(Protocol):
    """Renders tools' calls and results as hints (``None``: not this renderer's tool).
    ``arguments`` is the call's JSON text; ``result`` the tool's output (``None`` for
    the call)."""

    async def render_tool(
        self, tool: str, phase: ToolPhase, arguments: str, result: str | None
    ) -> RenderHint | None: ...
