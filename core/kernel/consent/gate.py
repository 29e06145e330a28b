"""The consent gate: the SDK's ``needs_approval`` for the orchestrator's tools,
and the check every intercepted tool call passes first (ADR 0021).

``guard(tool)`` gives a tool of the orchestrator a ``needs_approval`` callable.
The SDK awaits it on the model's raw arguments before anything runs; it
evaluates the policy for the tool and the turn's channel:

- ``allow``: no approval; the call goes through the hooks as usual;
- ``deny``: no approval; the call is remembered as denied and its invoker
  returns the denial, so the model reads why and the tool never runs;
- ``ask``: the ``before_tool_call`` chain runs now (``run_before``) and its
  outcome is remembered by (turn, tool, call id): a call a hook denies is
  never asked, and the user is asked about the final arguments. The SDK
  then interrupts the run; the turn pauses (``ApprovalFlow``).

``admit`` (the ``ToolInterceptor``'s ``admission``) runs first at invoke time, for every
agent's calls: a remembered decision is used as it is (an approved call runs
with its final arguments inside an *approval scope*); otherwise the policy is
evaluated again. A nested agent's run (an agent used as a tool) cannot pause,
so there an ``ask`` passes only inside the scope of a call the user approved
(``builder_agent`` approved once may write its files) and is denied
otherwise, with a reason the model can pass on. A run without a conversation
(a scheduled agent task, ``invoke_agent``) cannot ask either: ``ask`` is a
denial there.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Protocol

from agents import FunctionTool, RunContextWrapper, Tool
from agents.tool_context import ToolContext

from core.extensions.contract import ToolCall, TurnContext
from core.kernel.consent.catalog import ToolCatalog
from core.kernel.consent.policy import ConsentPolicy, ToolInfo, Verdict
from core.kernel.hooks import Admitted, FrameRecorder

__all__ = ["APPROVAL_FRAME", "AskedCall", "BeforeChain", "ConsentGate", "FullAutoGate"]

APPROVAL_FRAME = "approval"  # frames on hook.approval
_REMEMBERED = 1024
_approved_scope: ContextVar[bool] = ContextVar("hearth_approved_scope", default=False)

Key = tuple[str, str, str]  # (turn id, tool name, call id)


@dataclass(frozen=True, slots=True)
class AskedCall:
    """A call waiting for the user: final arguments, what it is, why it asks."""

    call: ToolCall
    info: ToolInfo
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class _Approved:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class _Refused:
    text: str


# ``needs_approval`` let the call through: its invoke-time check need not ask again
_ALLOWED: Final = object()


class BeforeChain(Protocol):
    """The ``before_tool_call`` chain on its own (``ToolInterceptor.run_before``)."""

    async def run_before(
        self, tool: FunctionTool, call: ToolCall, turn: TurnContext
    ) -> ToolCall | str: ...


class ConsentGate:
    """``needs_approval`` for the orchestrator's tools, ``admit`` for every call."""

    def __init__(
        self,
        policy: ConsentPolicy,
        catalog: ToolCatalog,
        frames: FrameRecorder,
    ) -> None:
        self.policy = policy
        self.catalog = catalog
        self._frames = frames
        self._decided: OrderedDict[Key, _Approved | _Refused | AskedCall | object] = OrderedDict()

    # ------------------------------------------------------------ the SDK's side

    def guard(self, tool: Tool, hooks: BeforeChain) -> Tool:
        """A copy of ``tool`` whose calls the SDK checks with the gate (others as they are);
        a call to ask about first runs ``hooks``' ``before_tool_call`` chain. What the
        catalog says of the tool is read here, once: the tools are guarded again when
        the wiring (and so the catalog) changes."""
        if not isinstance(tool, FunctionTool) or self.guards(tool):
            return tool
        guarded = copy.copy(tool)
        gate, info = self, self.catalog.info(tool)

        async def needs_approval(
            ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            return await gate._needs_approval(guarded, info, hooks, ctx, params, call_id)

        needs_approval.gate = self  # type: ignore[attr-defined]
        guarded.needs_approval = needs_approval
        return guarded

    def guards(self, tool: FunctionTool) -> bool:
        """Whether ``tool`` is already guarded by this gate (``guard`` returns it as it is)."""
        return getattr(tool.needs_approval, "gate", None) is self

    async def _needs_approval(
        self,
        tool: FunctionTool,
        info: ToolInfo,
        hooks: BeforeChain,
        ctx: RunContextWrapper[Any],
        params: dict[str, Any],
        call_id: str,
    ) -> bool:
        turn = _turn(ctx)
        verdict = self.policy.decide(info, turn.channel_id, turn.person_key)
        key = (turn.turn_id or "", tool.name, call_id)
        if verdict.action == "allow":
            self._remember(key, _ALLOWED)
            return False
        call = ToolCall(tool.name, dict(params), call_id)
        if verdict.action == "deny":
            self._remember(key, _Refused(await self._denied(call, turn, verdict)))
            return False
        if not askable(turn):
            self._remember(key, _Refused(await self._cannot_ask(call, turn, verdict)))
            return False
        decided = await hooks.run_before(tool, call, turn)
        if isinstance(decided, str):  # a hook denied it: nothing to ask
            self._remember(key, _Refused(decided))
            return False
        self._remember(key, AskedCall(decided, info, verdict))
        return True

    # ------------------------------------------------------------ invoke time

    async def admit(self, tool: FunctionTool, ctx: ToolContext[Any], raw: str) -> Admitted | None:
        turn = _turn(ctx)
        key = (turn.turn_id or "", tool.name, str(getattr(ctx, "tool_call_id", "")))
        remembered = self._decided.pop(key, None)
        if remembered is _ALLOWED:  # decided a moment ago, by ``needs_approval``
            return None
        if isinstance(remembered, _Refused):
            return Admitted(denial=remembered.text)
        if isinstance(remembered, _Approved):
            return Admitted(call=remembered.call, scope=_approval_scope)
        verdict = self.policy.decide(self.catalog.info(tool), turn.channel_id, turn.person_key)
        if verdict.action == "allow" or (verdict.action == "ask" and _approved_scope.get()):
            return None
        call = ToolCall(tool.name, _arguments(raw), key[2] or None)
        if verdict.action == "deny":
            return Admitted(denial=await self._denied(call, turn, verdict))
        return Admitted(denial=await self._cannot_ask(call, turn, verdict))

    # ------------------------------------------------------------ the flow's side

    def take_asked(self, turn_id: str) -> dict[str, AskedCall]:
        """The calls of ``turn_id`` waiting for the user, by call id (forgotten here)."""
        found: dict[str, AskedCall] = {}
        for key in [k for k in self._decided if k[0] == turn_id]:
            value = self._decided[key]
            if isinstance(value, AskedCall):
                found[key[2]] = self._decided.pop(key)  # type: ignore[assignment]
        return found

    def approved(self, turn_id: str, call: ToolCall) -> None:
        """The user approved ``call`` (final arguments): the resumed run uses them."""
        self._remember((turn_id, call.name, call.call_id or ""), _Approved(call))

    def forget(self, turn_id: str) -> None:
        """Drop whatever is left of ``turn_id`` (a run that ended or failed)."""
        for key in [k for k in self._decided if k[0] == turn_id]:
            del self._decided[key]

    # ------------------------------------------------------------ helpers

    def _remember(self, key: Key, value: _Approved | _Refused | AskedCall | object) -> None:
        self._decided[key] = value
        self._decided.move_to_end(key)
        while len(self._decided) > _REMEMBERED:
            self._decided.popitem(last=False)

    async def _denied(self, call: ToolCall, turn: TurnContext, verdict: Verdict) -> str:
        await self._frames.record(
            APPROVAL_FRAME,
            "policy",
            "consent",
            turn,
            before=call.arguments,
            tool=call.name,
            call_id=call.call_id,
            decision="denied",
            by="policy",
            reason=verdict.reason,
        )
        return f"denied by policy ({verdict.reason}): {call.name} was not run"

    async def _cannot_ask(self, call: ToolCall, turn: TurnContext, verdict: Verdict) -> str:
        reason = "no user to ask in this run"
        await self._frames.record(
            APPROVAL_FRAME,
            "policy",
            "consent",
            turn,
            before=call.arguments,
            tool=call.name,
            call_id=call.call_id,
            decision="denied",
            by="policy",
            reason=f"{verdict.reason}; {reason}",
        )
        return (
            f"denied: {call.name} needs the user's approval ({verdict.reason}), which cannot be "
            "asked here; tell the user to ask for it directly in the chat"
        )


class FullAutoGate:
    """The gate's null object, chosen at assembly under ``policy.profile: full_auto``
    with no rules (ADR 0079): nothing is asked and nothing denied, so the owner's calls
    run with no lookup; a member's turn still asks the gate (``OWNER_TOOLS`` run for
    the owner only)."""

    def __init__(self, gate: ConsentGate) -> None:
        self._gate = gate

    async def admit(self, tool: FunctionTool, ctx: ToolContext[Any], raw: str) -> Admitted | None:
        if getattr(ctx.context, "role", "owner") == "owner":  # person_key None: the owner
            return None
        return await self._gate.admit(tool, ctx, raw)


def askable(turn: TurnContext) -> bool:
    """Whether a run can pause to ask: it answers a user's message in a conversation."""
    return bool(turn.session_id and turn.channel_id and turn.user_id and turn.turn_id)


@contextlib.contextmanager
def _approval_scope() -> Iterator[None]:
    token = _approved_scope.set(True)
    try:
        yield
    finally:
        _approved_scope.reset(token)


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _turn(ctx: Any) -> TurnContext:
    context = getattr(ctx, "context", None)
    return context if isinstance(context, TurnContext) else TurnContext()
