"""What a turn asks is resolved when the wiring changes, not at every turn (issue 42,
ADR 0082): the context providers, the hooks. A provider or hook that comes with an
extension wired later still shapes the next turn."""

from __future__ import annotations

from typing import Any

import pytest

from core.extensions.contract import TurnContext
from core.extensions.loading.capabilities import Capability
from core.kernel.hooks import FrameRecorder, HookCaller, HookEntry, HookRegistry, TurnHooks
from core.kernel.shaping.context_chain import ContextChain

TURN = TurnContext(channel_id="cli", user_id="ana", session_id="s1", turn_id="t1")


class Weather:
    context_priority = 10

    async def get_context(self, prompt: str, turn: TurnContext) -> str:
        return "It rains in Lyon."


class Sink:
    async def publish(self, topic: str, source: str, payload: dict[str, Any], **_: Any) -> int:
        return 1


@pytest.mark.asyncio
async def test_with_no_provider_but_the_kernels_the_turn_gets_the_channel_line() -> None:
    chain = ContextChain(lambda: [])
    assert await chain.build("hi", TURN) == "Channel: cli; user: ana."
    assert await chain.build("hi", TurnContext()) == ""  # no channel: no line


@pytest.mark.asyncio
async def test_a_provider_wired_later_shapes_the_next_turn() -> None:
    wired: list[tuple[str, Any]] = []
    chain = ContextChain(lambda: list(wired))
    assert await chain.build("hi", TURN) == "Channel: cli; user: ana."
    wired.append(("weather", Weather()))
    chain.invalidate()  # what the kernel does when the wiring changes
    assert await chain.build("hi", TURN) == "Channel: cli; user: ana.\n---\nIt rains in Lyon."
    wired.clear()
    chain.invalidate()
    assert await chain.build("hi", TURN) == "Channel: cli; user: ana."


class Shout:
    async def on_llm_output(self, output: str, turn: TurnContext) -> str:
        return output.upper()


@pytest.mark.asyncio
async def test_a_turn_with_no_hook_asks_none_and_one_added_later_is_asked() -> None:
    extra: list[tuple[Capability, HookEntry]] = []
    registry = HookRegistry(lambda: [], extra=lambda: list(extra))
    hooks = TurnHooks(registry, HookCaller(1.0), FrameRecorder(Sink()))
    assert hooks.idle()
    extra.append((Capability.LLM_OUTPUT, HookEntry("shout", 50, 0, Shout())))
    registry.invalidate()  # the wiring changed
    assert not hooks.idle()
    assert (await hooks.render_output("hello", TURN)).text == "HELLO"
