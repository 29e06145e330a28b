"""``HistoryCompactor``: keeps a conversation's stored history within its budget.

Called by the turn runner, under the conversation's lock, right before the
history is read. When the stored history exceeds ``turns.history_max_items``
or ``turns.history_max_tokens``, the oldest whole turns (``choose_cut``) are
replaced by one summary item in one transaction (``replace_oldest``).

Who writes the summary: every ``on_compaction`` hook is called in registry
order (priority, then load order) with the items about to be summarised. The
first hook returning a ``CompactionPlan`` with a ``summary`` decides — its
text is the summary (an empty one drops the items with no summary), later
hooks are not called and the model is not asked. Otherwise the
``instructions`` of every hook are appended to the default prompt and the
session's model writes the summary, within ``turns.compaction_timeout_s``.
Without a model, or when the model fails or is late, the old items are
dropped (one log line). Each compaction is journaled as a ``hook.compaction``
frame once it is stored.
"""

from __future__ import annotations

import copy
import logging
from asyncio import timeout
from dataclasses import dataclass
from typing import Any

from core.agents.errors import ModelNotConfiguredError
from core.agents.model_router import ModelRouter
from core.config import TurnsSettings
from core.extensions.contract import CompactionHook, CompactionPlan, TurnContext
from core.extensions.loading.capabilities import hook_capability
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.compaction.budget import HistoryBudget, choose_cut, summary_item
from core.kernel.compaction.summariser import COMPACTION_INSTRUCTIONS, ModelSummariser, Summarise
from core.kernel.conversations.ledger import ConversationSession
from core.kernel.hooks import SKIPPED, FrameRecorder, HookCaller, HookRegistry

__all__ = ["HistoryCompactor"]

log = logging.getLogger("core.kernel.compaction")

KERNEL = "kernel"
HOOK = "on_compaction"

# the hook points called here
_COMPACTION = hook_capability(CompactionHook)


@dataclass(frozen=True, slots=True)
class _Summary:
    text: str | None  # None: the old items are dropped with no summary item
    by: str  # "model", the extension that wrote it, or "dropped"
    owner: str  # the extension(s) involved, or "kernel"


class HistoryCompactor:
    """Summarises the oldest part of a session's history when it is over budget."""

    def __init__(
        self,
        turns: TurnsSettings,
        summarise: Summarise | ModelRouter,
        registry: HookRegistry,
        caller: HookCaller,
        frames: FrameRecorder,
    ) -> None:
        self.budget = HistoryBudget.from_settings(turns)
        self.timeout_s = turns.compaction_timeout_s
        self._summarise: Summarise = (
            ModelSummariser(summarise) if isinstance(summarise, ModelRouter) else summarise
        )
        self._registry = registry
        self._caller = caller
        self._frames = frames

    async def compact_if_needed(self, session: ConversationSession, turn: TurnContext) -> bool:
        """Compact ``session`` if it is over budget; ``True`` when its history changed."""
        if not self.budget.limited:
            return False
        size = await session.stored_size()
        if not self.budget.exceeded(size.items, size.chars):
            return False
        stored = await session.stored_items()
        cut = choose_cut(stored, self.budget)
        if cut == 0:
            return False
        old = [entry.item for entry in stored[:cut]]
        summary = await self._summary(old, session.session_id, turn)
        item = summary_item(summary.text) if summary.text else None
        if not await session.replace_oldest(stored[cut - 1].row_id, stored[-1].row_id, item):
            log.warning("session %s changed while it was compacted; left as is", session.session_id)
            return False
        kept = len(stored) - cut
        log.info(
            "session %s compacted: %d old items %s (%s), %d newest kept",
            session.session_id,
            cut,
            "summarised" if item else "dropped",
            summary.by,
            kept,
        )
        await self._frames.record(
            "compaction",
            summary.owner,
            HOOK,
            turn,
            before=old,
            after=summary.text,
            dropped=cut,
            kept=kept,
            by=summary.by,
        )
        return True

    async def _summary(
        self, old: list[dict[str, Any]], session_id: str, turn: TurnContext
    ) -> _Summary:
        instructions: list[str] = []
        owners: list[str] = []
        for entry in self._registry.at(_COMPACTION):
            pending = entry.target.on_compaction(copy.deepcopy(old), turn)
            plan = await self._caller.call(entry, HOOK, turn, pending)
            if plan is SKIPPED or plan is None:
                continue
            if not _well_formed(plan):
                self._caller.refuse(entry, HOOK, turn, f"a {type(plan).__name__}, not a plan")
                continue
            if plan.summary is not None:
                return _Summary(plan.summary.strip() or None, entry.owner, entry.owner)
            if plan.instructions and plan.instructions.strip():
                instructions.append(plan.instructions.strip())
                owners.append(entry.owner)
        owner = ",".join(owners) or KERNEL
        prompt = "\n\n".join([COMPACTION_INSTRUCTIONS, *instructions])
        text = await self._model_summary(old, prompt, session_id)
        return _Summary(text, "model", owner) if text else _Summary(None, "dropped", owner)

    async def _model_summary(
        self, old: list[dict[str, Any]], prompt: str, session_id: str
    ) -> str | None:
        why: str
        deadline = timeout(self.timeout_s)
        try:
            async with deadline:
                text = (await self._summarise(old, prompt)).strip()
            if text:
                return text
            why = "the model's summary was empty"
        except ModelNotConfiguredError as exc:
            why = f"no model: {exc.reason}"
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                why = f"the summary took over {self.timeout_s:g} s (turns.compaction_timeout_s)"
            else:
                why = f"the summary failed: {describe_exception(exc)}"
        log.warning(
            "session %s: %s; its %d oldest history items are dropped unsummarised",
            session_id,
            why,
            len(old),
        )
        return None


def _well_formed(plan: object) -> bool:
    return (
        isinstance(plan, CompactionPlan)
        and (plan.summary is None or isinstance(plan.summary, str))
        and (plan.instructions is None or isinstance(plan.instructions, str))
    )
