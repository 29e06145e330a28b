"""What a workflow step may use of the kernel, bound to the running kernel (ADR 0091).

A tool step calls the orchestrator's own tool — through the tool hooks, the
tool-run journal and the consent gate, as the model's call would — for the
run's person. Consent is the policy's: ``deny`` fails the step, ``ask`` asks
the person (the run waits for the answer) and a "yes" approves that one call;
a run with nowhere to ask fails the step with the reason. An agent step is one
stateless orchestrator run for the person; a notify step is a proactive message
to where the run speaks (the owner's default channel when nowhere).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from core.extensions.contract import ToolCall, TurnContext
from core.kernel.consent.gate import ConsentGate
from core.kernel.consent.ui import UiRequests
from core.kernel.workflows.executor import StepFailedError

__all__ = ["KernelPowers"]

log = logging.getLogger("core.kernel.workflows")

WORKFLOW_SOURCE = "workflows"
_FAILED = ("error: tool ", "denied")


class KernelPowers:
    """The real ``Powers``: tools, consent, agent runs, questions, notices, leadership."""

    def __init__(
        self,
        *,
        tools: Callable[[], Sequence[Any]],
        gate: ConsentGate,
        ui: UiRequests,
        run_agent: Callable[[str, TurnContext], Awaitable[str]],
        notify: Callable[[str, str | None, str | None, str], Awaitable[None]],
        leading: Callable[[], bool],
        observe: Callable[[str, str, float | None], None],
    ) -> None:
        self._tools = tools
        self._gate = gate
        self._ui = ui
        self._run_agent = run_agent
        self._notify = notify
        self._leading = leading
        self._observe = observe

    async def call_tool(self, turn: TurnContext, name: str, args: dict[str, Any]) -> str:
        tool = next(
            (t for t in self._tools() if isinstance(t, FunctionTool) and t.name == name), None
        )
        if tool is None:
            raise StepFailedError(f"no tool {name!r} (is its extension active?)")
        assert turn.turn_id is not None
        call_id = turn.turn_id.rsplit(":", 1)[-1]
        verdict = self._gate.policy.decide(
            self._gate.catalog.info(tool), turn.channel_id, turn.person_key
        )
        if verdict.action == "deny":
            raise StepFailedError(f"{name} is denied by policy ({verdict.reason})")
        if verdict.action == "ask":
            await self._approval(turn, name, args, call_id, verdict.reason)
        raw = json.dumps(args)
        context = ToolContext(
            context=turn, tool_name=name, tool_call_id=call_id, tool_arguments=raw
        )
        result = str(await tool.on_invoke_tool(context, raw))
        if result.startswith(_FAILED):
            raise StepFailedError(result)
        return result

    async def _approval(
        self, turn: TurnContext, name: str, args: dict[str, Any], call_id: str, reason: str
    ) -> None:
        if not (turn.channel_id and turn.user_id):
            raise StepFailedError(
                f"{name} needs the person's approval ({reason}) and this run has no channel "
                "to ask on; start it with /run from a chat, or allow the tool in policy.rules"
            )
        shown = json.dumps(args, ensure_ascii=False)
        answer = await self.ask(turn, f"Run {name} {shown}?", "confirm", [], None)
        if answer != "yes":
            raise StepFailedError(f"{name} was not approved")
        assert turn.turn_id is not None
        self._gate.approved(turn.turn_id, ToolCall(name, args, call_id))

    async def run_agent(self, turn: TurnContext, prompt: str) -> str:
        return await self._run_agent(prompt, turn)

    async def ask(
        self,
        turn: TurnContext,
        prompt: str,
        kind: str,
        options: list[str],
        timeout_s: float | None,
    ) -> str | None:
        if not (turn.channel_id and turn.user_id):
            raise StepFailedError("this run has no channel to ask on; start it with /run")
        return await self._ui.ask(WORKFLOW_SOURCE, turn, kind, prompt, options, timeout_s)

    async def notify(self, turn: TurnContext, text: str, key: str) -> None:
        await self._notify(text, turn.channel_id, turn.user_id, key)

    def leading(self) -> bool:
        return self._leading()

    def observe(self, event: str, workflow: str, seconds: float | None = None) -> None:
        self._observe(event, workflow, seconds)
