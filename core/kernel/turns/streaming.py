"""Streaming a run with ``Runner.run_streamed`` to callbacks (text deltas, tool calls).

The tool callback hears each call (``name, arguments``) and each result
(``name, arguments, output``). A streaming channel shows them as the
extensions' tool renderers say (``ToolHints``, ADR 0096), else as the line
``using TOOL…`` for a call and nothing for a result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, RunConfig, Runner
from agents.items import TResponseInputItem
from agents.result import RunResultStreaming

from core.extensions.contract import TurnContext, hint_text
from core.kernel.turns.tool_hints import ToolHints

Callback = Callable[[str], Awaitable[None]]
# (tool, arguments) for a call, (tool, arguments, output) for its result
ToolCallback = Callable[..., Awaitable[None]]


async def stream_run(
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    turn: TurnContext,
    max_turns: int,
    on_chunk: Callback | None,
    on_tool_call: ToolCallback | None,
    run_config: RunConfig | None = None,
) -> RunResultStreaming:
    """Run streamed; feed text deltas and tool-call names to the callbacks.

    ``turn`` is the run context, so tools can see which channel and user
    they act for (``RunContextWrapper.context``); ``run_config`` puts the history
    before each request (ADR 0101). Cancelled (a deadline), the SDK's background
    run is cancelled too instead of running on unseen."""
    result = Runner.run_streamed(
        agent, input, max_turns=max_turns, context=turn, run_config=run_config
    )
    calls: dict[str, tuple[str, str]] = {}  # call id -> (tool, arguments), for its result
    try:
        async for event in result.stream_events():
            if event.type == "raw_response_event":
                data = event.data
                if getattr(data, "type", "") == "response.output_text.delta":
                    delta = str(getattr(data, "delta", ""))
                    if on_chunk is not None and delta:
                        await on_chunk(delta)
            elif event.type == "run_item_stream_event" and event.name == "tool_called":
                if on_tool_call is not None:
                    raw = getattr(event.item, "raw_item", None)
                    name = str(getattr(raw, "name", None) or "tool")
                    arguments = str(getattr(raw, "arguments", None) or "")
                    calls[str(getattr(raw, "call_id", None))] = (name, arguments)
                    await on_tool_call(name, arguments)
            elif event.type == "run_item_stream_event" and event.name == "tool_output":
                raw = getattr(event.item, "raw_item", None)
                call_id = raw.get("call_id") if isinstance(raw, dict) else None
                called = calls.pop(str(call_id), None)
                if on_tool_call is not None and called is not None:
                    await on_tool_call(*called, str(getattr(event.item, "output", "")))
    except BaseException:
        result.cancel()
        raise
    return result


async def stream_text(
    agent: Agent[Any],
    text: str | list[TResponseInputItem],
    turn: TurnContext,
    max_turns: int,
    on_chunk: Callback | None,
    on_tool_call: Callback | None,
) -> str:
    """A stateless streamed run's final text (``invoke_agent_streamed``)."""
    parts: list[str] = []

    async def collect(delta: str) -> None:
        parts.append(delta)
        if on_chunk is not None:
            await on_chunk(delta)

    async def told(name: str, arguments: str = "", output: str | None = None) -> None:
        if on_tool_call is not None and output is None:  # an agent's caller hears calls
            await on_tool_call(name)

    result = await stream_run(agent, text, turn, max_turns, collect, told)
    final = result.final_output
    return str(final) if final is not None else "".join(parts)


def channel_callbacks(
    channel: Any, user_id: str, hints: ToolHints | None = None, turn: TurnContext | None = None
) -> tuple[Callback, ToolCallback]:
    """Chunk and tool callbacks that drive a ``StreamingChannelProvider``; tools'
    calls and results as the renderers render them (``hints``; ``None``: no renderer
    is loaded, a call is ``using TOOL…``)."""

    async def chunk(delta: str) -> None:
        await channel.on_stream_chunk(user_id, delta)

    async def status(tool: str, arguments: str = "", output: str | None = None) -> None:
        if hints is None:
            if output is None:
                await channel.on_stream_status(user_id, f"using {tool}…")
            return
        hint = await hints.hint(tool, arguments, output, turn)
        if hint.kind == "hidden":
            return
        show = getattr(channel, "show_hint", None)  # a channel that draws hints itself
        if show is not None:
            await show(user_id, hint)
        else:
            await channel.on_stream_status(user_id, hint_text(hint))

    return chunk, status
