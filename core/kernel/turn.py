"""One model turn under a deadline, without letting the SDK write the session.

``TurnRunner.run`` reads the history (at most ``turns.history_max_items``),
runs the orchestrator on history + the user's text with no ``session``, and
returns the reply with the turn's new history items
(the user's item and the run's ``new_items`` as input items). The caller
stores those items together with the ledger row in one transaction
(``LedgerSession.commit_turn``), so a crash can never leave half a turn or a
doubled one in the history.

Whatever happens the turn has an answer: the model's, a user-facing error
line, an apology naming the failure, or — after ``turns.timeout_s`` — a line
saying the turn took too long; a failed turn adds nothing to the history.
"""

from __future__ import annotations

import logging
from asyncio import timeout
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agents import Agent, Runner
from agents.items import TResponseInputItem
from agents.result import RunResultBase

from core.extensions.contract import TurnContext
from core.extensions.lifecycle import describe_exception
from core.kernel.commands import TOO_SLOW
from core.kernel.context_chain import ContextChain
from core.kernel.ledger import LedgerSession
from core.kernel.streaming import Callback, stream_run, stream_text

__all__ = ["APOLOGY", "TOO_SLOW", "OrchestratorLike", "TurnResult", "TurnRunner"]

log = logging.getLogger("core.kernel.turn")

T = TypeVar("T")

APOLOGY = "Sorry, I could not get an answer from the model this time ({reason}). Please try again."


class OrchestratorLike(Protocol):
    def agent(self, extra_instructions: str | None = None) -> Agent[Any]: ...


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The reply, and the items to append to the history (empty when the turn failed)."""

    reply: str
    items: list[TResponseInputItem] = field(default_factory=list)


class TurnRunner:
    """Runs turns and stateless agent calls, each cut off at ``timeout_s``."""

    def __init__(
        self,
        *,
        orchestrator: OrchestratorLike,
        context: ContextChain,
        max_turns: int,
        timeout_s: float,
        history_max_items: int | None,
        user_facing_errors: tuple[type[Exception], ...] = (),
    ) -> None:
        self.orchestrator = orchestrator
        self.context = context
        self.max_turns = max_turns
        self.timeout_s = timeout_s
        self.history_max_items = history_max_items
        self.user_facing_errors = user_facing_errors

    async def run(
        self,
        text: str,
        turn: TurnContext,
        session: LedgerSession,
        stream: tuple[Callback, Callback] | None = None,
    ) -> TurnResult:
        """One conversational turn; ``stream`` = (on_chunk, on_tool_call) for live output."""

        async def attempt() -> TurnResult:
            history = await session.history(self.history_max_items)
            agent = await self._agent(text, turn)
            given: list[TResponseInputItem] = [*history, {"role": "user", "content": text}]
            if stream is None:
                result: Any = await Runner.run(agent, given, max_turns=self.max_turns, context=turn)
            else:
                result = await stream_run(agent, given, turn, self.max_turns, *stream)
            return TurnResult(
                str(result.final_output or ""), [given[-1], *new_history_items(result)]
            )

        return await self._guarded(attempt, f"turn for {turn.session_id}", TurnResult)

    async def run_stateless(self, prompt: str, *, source: str) -> str:
        """One orchestrator run with no history (``system.agent.task``, ``invoke_agent``)."""
        turn = TurnContext(agent_id="orchestrator", channel_id=None, user_id=source)

        async def attempt() -> str:
            agent = await self._agent(prompt, turn)
            result = await Runner.run(agent, prompt, max_turns=self.max_turns, context=turn)
            return str(result.final_output or "")

        return await self._guarded(attempt, f"agent run for {source}", str)

    async def run_stateless_streamed(
        self, prompt: str, *, source: str, on_chunk: Callback | None, on_tool_call: Callback | None
    ) -> str:
        """Like ``run_stateless``, feeding text deltas and tool names to the callbacks."""
        turn = TurnContext(agent_id="orchestrator", channel_id=None, user_id=source)
        deadline = timeout(self.timeout_s)
        try:
            async with deadline:
                agent = await self._agent(prompt, turn)
                return await stream_text(
                    agent, prompt, turn, self.max_turns, on_chunk, on_tool_call
                )
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise TimeoutError(
                f"streamed agent run for {source} took longer than {self.timeout_s:g} s"
                " (turns.timeout_s)"
            ) from exc

    async def _agent(self, prompt: str, turn: TurnContext) -> Agent[Any]:
        return self.orchestrator.agent(await self.context.build(prompt, turn) or None)

    async def _guarded(
        self, attempt: Callable[[], Awaitable[T]], what: str, wrap: Callable[[str], T]
    ) -> T:
        deadline = timeout(self.timeout_s)
        try:
            async with deadline:
                return await attempt()
        except self.user_facing_errors as exc:
            return wrap(str(exc))
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                log.error("%s stopped after %s s (turns.timeout_s)", what, self.timeout_s)
                return wrap(TOO_SLOW.format(what="That", seconds=self.timeout_s))
            log.error("%s failed: %s", what, describe_exception(exc), exc_info=True)
            return wrap(APOLOGY.format(reason=_short_reason(exc)))


def new_history_items(result: RunResultBase) -> list[TResponseInputItem]:
    """The run's new items as history input, as an SDK session would store them
    (``save_result_to_session``): approvals skipped, a ``status: None`` dropped.

    ``result.to_input_list()`` gives the same items after the whole input, but
    re-converts the entire history on every turn; this converts only the new ones."""
    items: list[TResponseInputItem] = []
    for run_item in result.new_items:
        if run_item.type == "tool_approval_item":
            continue
        item: Any = run_item.to_input_item()
        if isinstance(item, dict) and "status" in item and item["status"] is None:
            item = {k: v for k, v in item.items() if k != "status"}
        items.append(item)
    return items


def _short_reason(exc: BaseException) -> str:
    text = describe_exception(exc)
    return text if len(text) <= 120 else text[:117] + "..."
