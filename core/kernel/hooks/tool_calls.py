"""Every tool call the model makes, through ``before_tool_call`` and ``after_tool_call``.

``ToolInterceptor.wrap`` returns a copy of a ``FunctionTool`` whose invoker
runs the hooks around the tool's own invoker (the one the SDK bound to the
copy, so the tool's failure formatter still turns an exception into the
short ``error: tool … failed: …`` result). Agents that hand tools to a model
are ``HookedAgent``s (``core/agents/hooked.py``): their ``get_all_tools``
wraps whatever the SDK is about to offer — core, extension and isolated
extensions' proxied tools, agents as tools, and MCP tools, which the SDK
converts only at run time. A wrapped tool is marked, and wrapping it again
returns it as it is: tools wrapped once where they are built and again in
``get_all_tools`` still run the hooks exactly once per call. An agent tool
is one call (the agent's name); the tools that agent's own model then calls
are intercepted by its own ``HookedAgent``, once each.

Per call, when no extension implements either point, the cost is two
registry lookups (the registry can change between turns, so it is read at
call time). Otherwise: ``before_tool_call`` in registry order — ``allow``/
``None`` goes on; ``deny(reason)`` ends the chain and the model reads
``denied by <extension>: <reason>`` as the result, the tool not run;
``modify(arguments)`` is merged over the current arguments key by key and
the next hook sees the merge; modified arguments are checked against the
tool's JSON schema once the chain is done (a mismatch is a denial naming
the extensions, the tool and the schema error). Arguments the model sent
that are not a JSON object reach the tool untouched, with no hook: the tool
reports its own error. ``after_tool_call`` then gets the result as text and
may replace it (``str``) or annotate it (``Annotated``), chained. Deny,
modify and changed or annotated results are journaled as ``hook.tool_call``
/ ``hook.tool_result`` frames; allow and no-ops are not.

Ordering with consent (``needs_approval``, ADR 0021): the SDK evaluates
``needs_approval`` — and pauses the run for an approval — on the model's raw
arguments, before ``on_invoke_tool``. So for a call that must be asked, the
consent gate runs the ``before_tool_call`` chain itself, inside its
``needs_approval`` (``run_before``), and keeps the outcome by call id: a call
a hook denies is never asked, and the user approves the final arguments.
At invoke time the wrapped invoker first asks the gate (``admission``): a
call it already decided runs with those arguments and only the
``after_tool_call`` hooks, or returns its denial; anything else goes through
the hooks as below. The SDK only pre-parses arguments for approval with its
own invoker type, which the wrapped invoker is not, so a modified argument
string never clashes with a prepared one.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Final, Protocol

from agents import FunctionTool, Tool
from agents.tool_context import ToolContext
from jsonschema import validators
from jsonschema.exceptions import best_match

from core.extensions.contract import (
    AfterToolCallHook,
    BeforeToolCallHook,
    ToolCall,
    ToolDecision,
    TurnContext,
)
from core.extensions.loading.capabilities import hook_capability
from core.kernel.hooks.calls import SKIPPED, HookCaller, kind_of
from core.kernel.hooks.frames import FrameRecorder
from core.kernel.hooks.observer import ToolOutcome
from core.kernel.hooks.registry import HookEntry, HookRegistry

__all__ = [
    "Admission",
    "Admitted",
    "ToolInterceptor",
    "ToolTap",
    "is_intercepted",
    "result_text",
]

log = logging.getLogger("core.kernel.hooks")

BEFORE: Final = hook_capability(BeforeToolCallHook)
AFTER: Final = hook_capability(AfterToolCallHook)
_MARK: Final = "__hearth_tool_hooks__"  # set on the invoker of a wrapped tool

Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Admitted:
    """What a gate decided before the hooks could: ``denial`` (the model reads it,
    the tool does not run) or ``call`` (the ``before_tool_call`` chain already ran:
    the tool runs with these arguments, inside ``scope``)."""

    denial: str | None = None
    call: ToolCall | None = None
    scope: Callable[[], AbstractContextManager[Any]] = field(default=contextlib.nullcontext)


class ToolTap(Protocol):
    """Wraps a tool's own invoker (inside the hooks: it sees the arguments the
    ``before_tool_call`` hooks left and the result before ``after_tool_call``)."""

    def tap(self, tool: FunctionTool, invoke: Invoker) -> Invoker: ...


class Admission(Protocol):
    """Asked first on every intercepted call (the consent gate, ADR 0021):
    ``None`` lets the call go through the hooks as usual."""

    async def admit(
        self, tool: FunctionTool, ctx: ToolContext[Any], raw: str
    ) -> Admitted | None: ...


@dataclass(frozen=True, slots=True)
class _Denied:
    """The end of a ``before_tool_call`` chain that stops the call: what the model reads."""

    text: str


def is_intercepted(tool: Tool) -> bool:
    """Whether ``tool`` already runs the tool hooks (``wrap`` returns it as it is)."""
    return isinstance(tool, FunctionTool) and bool(getattr(tool.on_invoke_tool, _MARK, False))


def result_text(result: Any) -> str:
    """A tool's result as the text an ``after_tool_call`` hook reads.

    Text output items (``{"type": "text", "text": …}``, as MCP tools return)
    give their text; anything else its ``str``.
    """
    if isinstance(result, str):
        return result
    text = _text_item(result)
    if text is not None:
        return text
    if isinstance(result, list) and result:
        parts = [_text_item(item) for item in result]
        if all(part is not None for part in parts):
            return "\n".join(part for part in parts if part is not None)
    return str(result)


def _text_item(item: Any) -> str | None:
    if isinstance(item, Mapping):
        kind, text = item.get("type"), item.get("text")
    else:
        kind, text = getattr(item, "type", None), getattr(item, "text", None)
    return text if kind == "text" and isinstance(text, str) else None


class ToolInterceptor:
    """Wraps function tools so each call runs the tool hooks, contained and journaled."""

    def __init__(
        self,
        registry: HookRegistry,
        caller: HookCaller,
        frames: FrameRecorder,
        *,
        admission: Admission | None = None,
    ) -> None:
        self._registry = registry
        self._caller = caller
        self._frames = frames
        self._admission = admission  # the consent gate (ADR 0021); None: none asked

    def wrap(self, tool: Tool) -> Tool:
        """A copy of ``tool`` whose calls run the hooks; other and wrapped tools as they are."""
        if not isinstance(tool, FunctionTool) or is_intercepted(tool):
            return tool
        hooked = copy.copy(tool)  # the SDK binds the copy's invoker and failure formatter to it
        invoke: Invoker = hooked.on_invoke_tool  # the layers inside (tool_pipeline.py)
        at = self._registry.at
        intercept = self._intercept

        observer = self._caller.observer

        async def on_invoke(ctx: ToolContext[Any], raw: str) -> Any:
            started = perf_counter()
            outcome: ToolOutcome = "failed"
            try:
                gate = self._admission
                admitted = None if gate is None else await gate.admit(tool, ctx, raw)
                if admitted is not None and admitted.denial is not None:
                    outcome = "denied"
                    return admitted.denial
                before, after = at(BEFORE), at(AFTER)
                if admitted is not None and admitted.call is not None:
                    with admitted.scope():
                        result = await self._decided(invoke, ctx, raw, admitted.call)
                elif not before and not after:
                    result = await invoke(ctx, raw)
                else:
                    result = await intercept(tool, invoke, ctx, raw, before, after)
                if isinstance(result, _Denied):
                    outcome = "denied"
                    return result.text
                outcome = "failed" if _failed(result) else "completed"
                return result
            finally:
                observer.tool_call(tool.name, (perf_counter() - started) * 1000, outcome)

        setattr(on_invoke, _MARK, True)
        hooked.on_invoke_tool = on_invoke
        return hooked

    async def _intercept(
        self,
        tool: FunctionTool,
        invoke: Invoker,
        ctx: ToolContext[Any],
        raw: str,
        before: tuple[HookEntry, ...],
        after: tuple[HookEntry, ...],
    ) -> Any:
        arguments = _parsed(raw)
        if arguments is None:  # not a JSON object: the tool reports it, as without hooks
            return await invoke(ctx, raw)
        turn = _turn_of(ctx)
        call = ToolCall(tool.name, arguments, getattr(ctx, "tool_call_id", None))
        if before:
            decided = await self._before(tool, call, turn, before)
            if isinstance(decided, _Denied):
                return decided
            if decided is not call:
                call, raw = decided, json.dumps(decided.arguments)
        result = await invoke(ctx, raw)
        if after:
            result = await self._after(call, result, turn, after)
        return result

    async def _decided(
        self, invoke: Invoker, ctx: ToolContext[Any], raw: str, call: ToolCall
    ) -> Any:
        """A call whose ``before_tool_call`` chain already ran (``run_before``): the
        tool with those arguments, then the ``after_tool_call`` hooks."""
        if _parsed(raw) != call.arguments:
            raw = json.dumps(call.arguments)
        result = await invoke(ctx, raw)
        after = self._registry.at(AFTER)
        if after:
            result = await self._after(call, result, _turn_of(ctx), after)
        return result

    # ------------------------------------------------------------ before

    async def run_before(
        self, tool: FunctionTool, call: ToolCall, turn: TurnContext
    ) -> ToolCall | str:
        """The ``before_tool_call`` chain alone: the call as the hooks left it, or the
        text the model reads when one denied it (journaled as usual)."""
        before = self._registry.at(BEFORE)
        if not before:
            return call
        decided = await self._before(tool, call, turn, before)
        return decided.text if isinstance(decided, _Denied) else decided

    async def _before(
        self,
        tool: FunctionTool,
        call: ToolCall,
        turn: TurnContext,
        entries: tuple[HookEntry, ...],
    ) -> ToolCall | _Denied:
        original = call
        modified_by: list[str] = []
        for entry in entries:
            if not entry.applies_to_tool(call.name):
                continue
            given = ToolCall(call.name, dict(call.arguments), call.call_id)
            pending = entry.target.before_tool_call(given, turn)
            decision = self._decision(
                entry, turn, await self._caller.call(entry, "before_tool_call", turn, pending)
            )
            if decision is None:
                continue
            if decision.action == "deny":
                reason = decision.reason.strip() or "no reason given"
                await self._record_call(entry.owner, turn, call, None, "deny", reason)
                log.info("tool %s denied by %s: %s", call.name, entry.owner, reason)
                return _Denied(f"denied by {entry.owner}: {reason}")
            merged = {**call.arguments, **(decision.arguments or {})}
            if merged == call.arguments:
                continue
            await self._record_call(entry.owner, turn, call, merged, "modify", decision.reason)
            call = ToolCall(call.name, merged, call.call_id)
            modified_by.append(entry.owner)
        if not modified_by:
            return original
        problem = _schema_problem(tool.params_json_schema, call.arguments)
        if problem is None:
            return call
        owners = ", ".join(modified_by)
        reason = f"modified arguments for {call.name} do not match its schema: {problem}"
        await self._record_call(modified_by[-1], turn, original, None, "deny", reason)
        log.warning("tool %s denied: %s (modified by %s)", call.name, reason, owners)
        return _Denied(f"denied by {owners}: {reason}")

    def _decision(self, entry: HookEntry, turn: TurnContext, result: Any) -> ToolDecision | None:
        """The deny or modify decision to act on; ``None`` for allow, nothing or a refusal."""
        if result is SKIPPED or result is None:
            return None
        if not isinstance(result, ToolDecision):
            self._caller.refuse(entry, "before_tool_call", turn, kind_of(result))
            return None
        if result.action == "allow":
            return None
        if result.action == "deny" or (
            result.action == "modify" and isinstance(result.arguments, dict)
        ):
            return result
        self._caller.refuse(
            entry,
            "before_tool_call",
            turn,
            f"a ToolDecision {result.action!r} without an arguments dict",
        )
        return None

    async def _record_call(
        self,
        owner: str,
        turn: TurnContext,
        call: ToolCall,
        after: dict[str, Any] | None,
        decision: str,
        reason: str,
    ) -> None:
        await self._frames.record(
            "tool_call",
            owner,
            "before_tool_call",
            turn,
            before=call.arguments,
            after=after,
            tool=call.name,
            decision=decision,
            reason=reason,
            call_id=call.call_id,
        )

    # ------------------------------------------------------------ after

    async def _after(
        self, call: ToolCall, result: Any, turn: TurnContext, entries: tuple[HookEntry, ...]
    ) -> Any:
        """The result the model reads: the tool's own unless a hook replaced its text."""
        text = result_text(result)
        replaced = False
        for entry in entries:
            if not entry.applies_to_tool(call.name):
                continue
            pending = entry.target.after_tool_call(call, text, turn)
            answer = await self._caller.call(entry, "after_tool_call", turn, pending)
            new, notes = self._caller.text_and_notes(entry, "after_tool_call", turn, answer)
            changed = new is not None and new != text
            if changed or notes:
                await self._frames.record(
                    "tool_result",
                    entry.owner,
                    "after_tool_call",
                    turn,
                    before=text,
                    after=new if changed else text,
                    annotations=notes,
                    tool=call.name,
                    call_id=call.call_id,
                )
            if changed and new is not None:
                text, replaced = new, True
        return text if replaced else result


def _failed(result: Any) -> bool:
    """A tool's failure as the kernel reports it to the model (``error: …``, ADR 0016)."""
    return isinstance(result, str) and result.startswith("error:")


def _parsed(raw: str) -> dict[str, Any] | None:
    """The model's arguments as the SDK reads them (empty = ``{}``), or ``None``."""
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _turn_of(ctx: ToolContext[Any]) -> TurnContext:
    """The run's ``TurnContext`` (``Runner.run(context=turn)``), or one naming the agent."""
    context = getattr(ctx, "context", None)
    if isinstance(context, TurnContext):
        return context
    agent = getattr(ctx, "agent", None)
    name = getattr(agent, "name", None)
    return TurnContext(agent_id=name) if isinstance(name, str) else TurnContext()


def _schema_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not match ``schema`` (the most relevant error), or ``None``."""
    try:
        validator = validators.validator_for(schema)(schema)
        error = best_match(validator.iter_errors(arguments))
    except Exception as exc:  # a schema jsonschema cannot use: the change cannot be trusted
        return f"the schema cannot be used ({type(exc).__name__}: {exc})"
    return None if error is None else error.message
