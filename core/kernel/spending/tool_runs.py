"""A tool that ran is not run again when its turn runs again (ADR 0061).

A turn is recorded only when it ends (``commit_turn``, ADR 0014): a kernel
killed in the middle — say while the fallback chain waits on its second
model — runs the turn again from the journal after the restart. The steps
before the kill had run their tools already. So each completed tool call of
a turn is written down at once (``hearth_tool_runs``, keyed by the turn and
the call: tool, arguments, and which such call of the turn it is), and the
rerun of that turn gets the recorded output for the same call instead of
running the tool. The rows go away in the transaction that commits the turn
(``UsageRecord``), or after two days.

This is the tap innermost around each tool's own invoker (``ToolTap``, the
``tool_runs`` layer of ``core/kernel/shaping/tool_pipeline.py``): the consent
gate and the tool hooks still see the call, the replay recorder too.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, OrderedDict
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from core.kernel.hooks import Invoker
from core.kernel.spending.store import UsageBook

__all__ = ["ToolRunJournal"]

log = logging.getLogger("core.kernel.tool_runs")

MAX_OPEN_TURNS = 4096


class ToolRunJournal:
    """Records each completed tool call of a turn; answers a rerun from the record."""

    def __init__(self, book: UsageBook) -> None:
        self.book = book
        self._seen: OrderedDict[str, Counter[str]] = OrderedDict()

    def forget(self, turn_id: str | None) -> None:
        """The turn is committed: its calls are no longer counted here."""
        if turn_id is not None:
            self._seen.pop(turn_id, None)

    def tap(self, tool: FunctionTool, invoke: Invoker) -> Invoker:
        async def journaled(ctx: ToolContext[Any], raw: str) -> Any:
            turn_id = getattr(ctx.context, "turn_id", None)
            if not isinstance(turn_id, str):
                return await invoke(ctx, raw)
            key = self._call_key(turn_id, tool.name, raw)
            recorded = await self.book.tool_output(turn_id, key)
            if recorded is not None:
                log.warning(
                    "turn %s: %s ran before a restart; its output is reused", turn_id, tool.name
                )
                return recorded
            result = await invoke(ctx, raw)
            await self.book.record_tool(turn_id, key, _as_text(result))
            return result

        return journaled

    def _call_key(self, turn_id: str, name: str, raw: str) -> str:
        try:
            arguments = json.dumps(json.loads(raw or "{}"), sort_keys=True)
        except json.JSONDecodeError:
            arguments = raw
        signature = f"{name}\n{arguments}"
        seen = self._seen.setdefault(turn_id, Counter())
        self._seen.move_to_end(turn_id)
        while len(self._seen) > MAX_OPEN_TURNS:
            self._seen.popitem(last=False)
        seen[signature] += 1
        return f"{signature}\n{seen[signature]}"


def _as_text(result: Any) -> str:
    return result if isinstance(result, str) else str(result)
