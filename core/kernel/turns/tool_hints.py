"""Tool renderers asked how a streamed turn's tool calls and results look (ADR 0096).

``ToolHints.hint`` asks the loaded ``ToolRendererProvider``s in load order; the
first hint wins. A renderer that raises or takes longer than ``timeout_s`` is
skipped with a warning, so the default shows: ``using TOOL…`` for a call and
a hidden result. While a renderer is loaded, each hint is journaled as a
``hook.tool_render`` frame of the turn (tool, phase, the renderer or
``default``, the hint) so a replay can show the turn as it was; with none,
nothing is journaled (the turn is as before). The latest are kept in ``shown``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from core.extensions.contract import RenderHint, TurnContext
from core.kernel.hooks import FrameRecorder

__all__ = ["HIDDEN", "ToolHints", "default_hint"]

log = logging.getLogger("core.kernel.turns.tool_hints")

HIDDEN = RenderHint("hidden")
RENDER_TIMEOUT_S = 1.0


def default_hint(tool: str, output: str | None) -> RenderHint:
    """What shows without a renderer: the call as one line, the result not at all."""
    return RenderHint("text", f"using {tool}…") if output is None else HIDDEN


class ToolHints:
    """The renderers of the extensions loaded now (``renderers``: read per hint)."""

    def __init__(
        self,
        renderers: Callable[[], Sequence[tuple[str, Any]]],
        *,
        frames: FrameRecorder | None = None,
        timeout_s: float = RENDER_TIMEOUT_S,
    ) -> None:
        self._renderers = renderers
        self._frames = frames
        self.timeout_s = timeout_s
        self.shown: list[dict[str, Any]] = []  # the hints shown, newest last (for replay)

    async def hint(
        self, tool: str, arguments: str, output: str | None, turn: TurnContext | None = None
    ) -> RenderHint:
        """The first renderer's hint for this call (``output`` ``None``) or result."""
        phase = "call" if output is None else "result"
        chosen, by = default_hint(tool, output), "default"
        renderers = self._renderers()
        for ext_id, renderer in renderers:
            try:
                async with asyncio.timeout(self.timeout_s):
                    hint = await renderer.render_tool(tool, phase, arguments, output)
            except Exception as exc:
                log.warning("renderer %s failed on %s (%s): the default shows", ext_id, tool, exc)
                continue
            if isinstance(hint, RenderHint):
                chosen, by = hint, ext_id
                break
        entry = self._record(tool, phase, chosen, by)
        if self._frames is not None and turn is not None and renderers:
            await self._frames.record("tool_render", by, tool, turn, after=entry)
        return chosen

    def _record(self, tool: str, phase: str, hint: RenderHint, by: str) -> dict[str, Any]:
        entry = {
            "tool": tool,
            "phase": phase,
            "by": by,
            "kind": hint.kind,
            "text": hint.text,
            "title": hint.title,
            "fields": [list(pair) for pair in hint.fields],
        }
        if len(self.shown) >= 256:
            del self.shown[:128]
        self.shown.append(entry)
        return entry
