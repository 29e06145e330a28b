"""Tool hooks benchmark: what ``ToolInterceptor`` adds to one tool call. Prints one JSON object.

An async ``function_tool`` (pydantic-parsed arguments, the kernel's failure
formatter) is invoked in-process through its ``on_invoke_tool``, as the SDK
does: bare, wrapped with no hook registered, wrapped with one no-op
``before_tool_call``, and with a no-op ``before_tool_call`` and
``after_tool_call``. ``added_*_us`` is the p50 of each minus the bare p50
(interleaved rounds, so drift hits every variant alike).
Target: < 50 µs p50 added with one no-op hook.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import FunctionTool, function_tool
from agents.tool_context import ToolContext

from core.extensions.capabilities import Capability
from core.extensions.contract import ToolCall, TurnContext
from core.kernel.hooks import FrameRecorder, HookCaller, HookEntry, HookRegistry, ToolInterceptor
from core.tools.failures import reporting_failures

CALLS = 2000
ROUNDS = 5
ARGS = json.dumps({"device": "heater", "state": "on", "minutes": 30})


class NoOp:
    async def before_tool_call(self, call: ToolCall, turn: TurnContext) -> None:
        return None

    async def after_tool_call(self, call: ToolCall, result: str, turn: TurnContext) -> None:
        return None


class Sink:
    async def publish(self, *args: Any, **kwargs: Any) -> int:
        return 0


async def switch(device: str, state: str, minutes: int = 0) -> str:
    """Switch a device."""
    return f"{device} is {state}"


def wrapped(points: tuple[Capability, ...]) -> FunctionTool:
    extra = [(point, HookEntry("noop", 50, 0, NoOp())) for point in points]
    registry = HookRegistry(lambda: [], extra=lambda: extra)
    interceptor = ToolInterceptor(registry, HookCaller(2.0), FrameRecorder(Sink()))
    tool = interceptor.wrap(reporting_failures(function_tool(switch)))
    assert isinstance(tool, FunctionTool)
    return tool


async def timings(tool: FunctionTool, ctx: ToolContext[Any]) -> list[float]:
    invoke = tool.on_invoke_tool
    out: list[float] = []
    for _ in range(CALLS):
        start = time.perf_counter()
        await invoke(ctx, ARGS)
        out.append(time.perf_counter() - start)
    return out


async def main() -> None:
    bare = reporting_failures(function_tool(switch))
    assert isinstance(bare, FunctionTool)
    variants = {
        "bare": bare,
        "no_hooks": wrapped(()),
        "one_before": wrapped((Capability.BEFORE_TOOL_CALL,)),
        "before_and_after": wrapped((Capability.BEFORE_TOOL_CALL, Capability.AFTER_TOOL_CALL)),
    }
    ctx: ToolContext[Any] = ToolContext(
        context=TurnContext(turn_id="bench"),
        tool_name="switch",
        tool_call_id="c1",
        tool_arguments=ARGS,
    )
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, tool in variants.items():
            samples[name].extend(await timings(tool, ctx))
    p50 = {name: statistics.median(s) * 1e6 for name, s in samples.items()}
    result = {
        "calls": CALLS * ROUNDS,
        "bare_p50_us": round(p50["bare"], 2),
        **{
            f"added_{name}_p50_us": round(p50[name] - p50["bare"], 2)
            for name in variants
            if name != "bare"
        },
        "target_added_one_hook_us": 50,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
