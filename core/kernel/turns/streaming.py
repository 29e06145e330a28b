"""Streaming a run with ``Runner.run_streamed`` to callbacks (text deltas, tool names)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, Runner
from agents.items import TResponseInputItem
from agents.result import RunResultStreaming

from core.extensions.contract import TurnContext

Callback = Callable[[str], Awaitable[None]]


async def stream_run(
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    turn: TurnContext,
    max_turns: int,
    on_chunk: Callback | None,
    on_tool_call: Callback | None,
) -> RunResultStreaming:
    """Run streamed; feed text deltas and tool-call names to the callbacks.

    ``turn`` is the run context, so tools can see which channel and user
    they act for (``RunContextWrapper.context``). Cancelled (a deadline), the
    SDK's background run is cancelled too instead of running on unseen."""
    result = Runner.run_streamed(agent, input, max_turns=max_turns, context=turn)
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
                    await on_tool_call(str(getattr(raw, "name", None) or "tool"))
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

    result = await stream_run(agent, text, turn, max_turns, collect, on_tool_call)
    final = result.final_output
    return str(final) if final is not None else "".join(parts)


def channel_callbacks(channel: Any, user_id: str) -> tuple[Callback, Callback]:
    """Chunk and status callbacks that drive a ``StreamingChannelProvider``."""

    async def chunk(delta: str) -> None:
        await channel.on_stream_chunk(user_id, delta)

    async def status(tool: str) -> None:
        await channel.on_stream_status(user_id, f"using {tool}…")

    return chunk, status
