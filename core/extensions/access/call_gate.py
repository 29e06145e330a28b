"""Calls into one loaded instance of an extension, counted, and closable.

Every tool and command the kernel takes from an extension instance goes
through that instance's ``CallGate``. A reload (ADR 0032) closes the gate —
new calls are refused with a message saying why, so the model or the user can
try again a moment later on the new instance — and waits for the calls in
flight to finish before the old instance is stopped and destroyed. A gate is
never opened again: the new instance gets a new one, so a turn still holding
the old tools cannot reach the destroyed instance.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from core.extensions.access.served_calls import serving_extension
from core.extensions.contract import Command, TurnContext

__all__ = ["CallGate", "GatedInvoker"]

# how the SDK re-binds its invokers to a copied tool (see ``core/extensions/tool_failures.py``)
SDK_BIND = "__agents_bind_function_tool__"


class CallGate:
    """In-flight calls of one extension instance; closed for good by a reload."""

    def __init__(self, ext_id: str) -> None:
        self.ext_id = ext_id
        self.in_flight = 0
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def refusal(self) -> str:
        """What a call arriving after the gate closed gets instead of an answer."""
        return (
            f"error: extension {self.ext_id} is being reloaded; "
            "this call was not run. Try it again in a moment."
        )

    def close(self) -> None:
        """Take no new calls (the calls in flight go on)."""
        self._closed = True

    async def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the calls in flight; returns how many still run."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            pass
        return self.in_flight

    async def run(self, call: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run ``call(*args)`` counted as in flight; the refusal text once the gate is
        closed (the arguments passed along: no closure made per tool call)."""
        if self._closed:
            return self.refusal()
        self.in_flight += 1
        self._idle.clear()
        try:
            return await call(*args)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()

    # ------------------------------------------------------------ wrapping

    def tools(self, tools: Iterable[Any]) -> list[Any]:
        """Copies of ``tools`` whose calls pass this gate (non-function tools as they are)."""
        return [self._tool(tool) for tool in tools]

    def _tool(self, tool: Any) -> Any:
        if not isinstance(tool, FunctionTool):
            return tool
        gated = copy.copy(tool)  # keeps the name, schema and failure formatter
        gated.on_invoke_tool = GatedInvoker(self, gated.on_invoke_tool)
        return gated

    def command(self, command: Command) -> Command:
        """A copy of ``command`` whose handler passes this gate."""
        handler = command.handler

        async def gated(args: str, turn: TurnContext) -> str | None:
            with serving_extension(self.ext_id, turn):  # its questions belong to this turn
                result: str | None = await self.run(lambda: handler(args, turn))
            return result

        return Command(command.name, command.description, gated)


class GatedInvoker:
    """A tool invoker that passes its gate first.

    The SDK's own invokers are re-bound to every copy of their tool (so the
    copy's failure formatter is used); this wrapper forwards that re-binding,
    and offers it only when the invoker it wraps does, so the kernel's
    ``reporting_failures`` still tells the two kinds apart.
    """

    def __init__(self, gate: CallGate, invoke: Any) -> None:
        self._gate = gate
        self._invoke = invoke
        bind = getattr(invoke, SDK_BIND, None)
        if callable(bind):
            setattr(self, SDK_BIND, lambda tool: GatedInvoker(gate, bind(tool)))

    async def __call__(self, ctx: ToolContext[Any], args: str) -> Any:
        turn = ctx.context if isinstance(ctx.context, TurnContext) else None
        with serving_extension(self._gate.ext_id, turn):  # its questions belong to this turn
            return await self._gate.run(self._invoke, ctx, args)
