"""Streaming a turn with ``Runner.run_streamed`` to a callback or a channel."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, Runner
from agents.memory import Session

from core.extensions.contract import TurnContext

Callback = Callable[[str], Awaitable[None]]


async def stream_text(
    agent: Agent[Any],
    text: str,
    session: Session | None,
    turn: TurnContext,
    max_turns: int,
    on_chunk: Callback | None,
    on_tool_call: Callback | None,
) -> str:
    """Run streamed; feed text deltas and tool-call names to the callbacks.

    ``turn`` is the run context, so tools can see which channel and user
    they act for (``RunContextWrapper.context``)."""
    result = Runner.run_streamed(agent, text, session=session, max_turns=max_turns, context=turn)
    parts: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event":
            data = event.data
            if getattr(data, "type", "") == "response.output_text.delta":
                delta = str(getattr(data, "delta", ""))
                parts.append(delta)
                if on_chunk is not None and delta:
                    await on_chunk(delta)
        elif event.type == "run_item_stream_event" and event.name == "tool_called":
            if on_tool_call is not None:
                raw = getattr(event.item, "raw_item", None)
                await on_tool_call(str(getattr(raw, "name", None) or "tool"))
    final = result.final_output
    return str(final) if final is not None else "".join(parts)


async def run_streamed_turn(
    agent: Agent[Any], text: str, session: Session, channel: Any, turn: TurnContext, max_turns: int
) -> None:
    """Drive a started ``StreamingChannelProvider`` through chunks/status → end."""
    user_id = turn.user_id or ""

    async def chunk(delta: str) -> None:
        await channel.on_stream_chunk(user_id, delta)

    async def status(tool: str) -> None:
        await channel.on_stream_status(user_id, f"using {tool}…")

    full = await stream_text(agent, text, session, turn, max_turns, chunk, status)
    await channel.on_stream_end(user_id, full)
