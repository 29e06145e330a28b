"""The orchestrator (SPEC §4): instructions, core tools, extension tools and agents as tools.

Driven by ScriptedModel through the real Runner; assertions read what the
model was sent (`model.calls`) and what the user gets back.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from agents import Runner, Tool, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from core.agents import (
    ModelNotConfiguredError,
    ModelRouter,
    Orchestrator,
    build_toolset,
    configure_tracing,
)
from core.config import ModelsSettings
from core.extensions.contract import (
    AgentDescriptor,
    AgentInvocationContext,
    AgentResponse,
    TurnContext,
)
from core.tools import build_core_tools

configure_tracing(False)


class EchoAgent:
    """A programmatic AgentProvider (the contract, as an extension would write it)."""

    def __init__(self, name: str, status: str = "success") -> None:
        self.name = name
        self.status = status
        self.seen: list[tuple[str, AgentInvocationContext | None]] = []

    def get_agent_descriptor(self) -> AgentDescriptor:
        return AgentDescriptor(name=self.name, description=f"The {self.name} specialist.")

    async def invoke(
        self, task: str, context: AgentInvocationContext | None = None
    ) -> AgentResponse:
        self.seen.append((task, context))
        if self.status == "success":
            return AgentResponse(status="success", content=f"done: {task}")
        return AgentResponse(status="error", content="sorry", error="time_budget_ms=5 exceeded")


class Kernel:
    """What the core tools are bound to: extension records and restart requests."""

    def __init__(self) -> None:
        self.restarts: list[str] = []

    def list_extensions(self) -> list[dict[str, Any]]:
        return [
            {"id": "notes", "status": "active", "error": None, "tools": ["x"]},
            {"id": "telegram_channel", "status": "error", "error": "TELEGRAM_BOT_TOKEN missing"},
        ]

    def request_restart(self, reason: str) -> None:
        self.restarts.append(reason)


def core_tools(kernel: Kernel, timezone: str = "Europe/Berlin") -> list[Tool]:
    return list(
        build_core_tools(
            timezone=timezone,
            list_extensions=kernel.list_extensions,
            request_restart=kernel.request_restart,
        )
    )


def orchestrator(
    model: ScriptedModel | None,
    tool_sources: list[tuple[str, list[Tool]]],
    agents: list[tuple[str, Any]] | None = None,
    *,
    timezone: str = "Europe/Berlin",
) -> Orchestrator:
    toolset = build_toolset(tool_sources, agents or [])
    router = ModelRouter(
        ModelsSettings(), env={}, overrides={"orchestrator": model} if model else None
    )
    return Orchestrator(
        model_router=router,
        timezone=timezone,
        tools=toolset.tools,
        agent_tools=toolset.agent_tools,
        capabilities=toolset.capabilities,
    )


def tool_outputs(model: ScriptedModel, call_index: int) -> list[str]:
    items = model.calls[call_index].input
    return [str(i["output"]) for i in items if i.get("type") == "function_call_output"]


async def test_orchestrator_calls_a_tool_and_uses_its_result() -> None:
    kernel = Kernel()
    model = ScriptedModel(
        [
            [function_call("current_time", {}, call_id="c1")],
            [assistant_message("It is a fine day.")],
        ]
    )
    orch = orchestrator(model, [("core", core_tools(kernel))])

    result = await Runner.run(orch.agent(), "what day is it?")

    assert result.final_output == "It is a fine day."
    (output,) = tool_outputs(model, 1)
    payload = json.loads(output)
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0[12]:00$", payload["now"])
    assert payload["weekday"] in {
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    }
    assert payload["timezone"].startswith("Europe/Berlin (CE")
    model.assert_complete()


async def test_instructions_hold_timezone_capabilities_and_context_but_no_clock() -> None:
    def search_notes(query: str) -> str:
        """Search the user's notes."""
        return ""

    model = ScriptedModel([[assistant_message("hi")]])
    orch = orchestrator(
        model,
        [("core", core_tools(Kernel())), ("notes", [function_tool(search_notes)])],
        [("researcher", EchoAgent("researcher"))],
        timezone="Asia/Tokyo",
    )

    await Runner.run(orch.agent("The user's name is Ada."), "hello")

    assert model.first_call is not None
    text = model.first_call.system_instructions or ""
    assert text.startswith("You are Hearth")
    assert "timezone is Asia/Tokyo" in text
    assert "Now:" not in text  # the clock is the turn note's: the prompt stays the same bytes
    assert text == orch.instructions("The user's name is Ada.")
    assert re.fullmatch(
        r"Now: \d{4}-\d\d-\d\d \d\d:\d\d \(\w+day, JST, UTC\+09:00\)\.",
        orch.clock(),
    )
    for line in (  # names only: each description is in its tool's schema (ADR 0097)
        "- core: current_time, list_extensions, request_restart",
        "- notes: search_notes",
        "- researcher: researcher (agent)",
    ):
        assert line in text
    assert "Search the user's notes." not in text
    assert text.endswith("\n\nThe user's name is Ada.")
    names = [t.name for t in model.first_call.tools]
    assert names == [
        "current_time",
        "list_extensions",
        "request_restart",
        "search_notes",
        "researcher",
    ]


async def test_a_tool_that_raises_is_reported_to_the_model_and_the_run_continues() -> None:
    def fetch_weather(city: str) -> str:
        """Weather for a city."""
        raise ConnectionError("weather service down")

    model = ScriptedModel(
        [
            [function_call("fetch_weather", {"city": "Oslo"}, call_id="c1")],
            [assistant_message("The weather service is unavailable right now.")],
        ]
    )
    orch = orchestrator(model, [("weather", [function_tool(fetch_weather)])])

    result = await Runner.run(orch.agent(), "weather in Oslo?")

    assert result.final_output == "The weather service is unavailable right now."
    (output,) = tool_outputs(model, 1)
    assert "error" in output.lower()
    model.assert_complete()


async def test_duplicate_tool_names_first_wins_with_a_warning() -> None:
    def lookup_a(key: str) -> str:
        """Lookup from A."""
        return "from A"

    def lookup_b(key: str) -> str:
        """Lookup from B."""
        return "from B"

    sources: list[tuple[str, list[Tool]]] = [
        ("ext_a", [function_tool(lookup_a, name_override="lookup")]),
        ("ext_b", [function_tool(lookup_b, name_override="lookup")]),
    ]
    toolset = build_toolset(sources, [("ext_c", EchoAgent("lookup"))])
    assert toolset.warnings == [
        "duplicate tool 'lookup' from ext_b ignored; ext_a provides it",
        "duplicate tool 'lookup' from ext_c ignored; ext_a provides it",
    ]
    assert [(c.name, c.extension_id) for c in toolset.capabilities] == [("lookup", "ext_a")]
    assert toolset.agent_tools == []

    model = ScriptedModel(
        [[function_call("lookup", {"key": "k"}, call_id="c1")], [assistant_message("ok")]]
    )
    orch = orchestrator(model, sources, [("ext_c", EchoAgent("lookup"))])
    await Runner.run(orch.agent(), "look it up")
    assert tool_outputs(model, 1) == ["from A"]


async def test_agents_in_tool_mode_are_called_with_the_task_and_turn() -> None:
    helper, failing = EchoAgent("Trip Planner"), EchoAgent("mailer", status="error")
    model = ScriptedModel(
        [
            [
                function_call("Trip_Planner", {"task": "plan Rome"}, call_id="c1"),
                function_call("mailer", {"task": "send it"}, call_id="c2"),
            ],
            [assistant_message("Planned; mail failed.")],
        ]
    )
    orch = orchestrator(model, [], [("trips", helper), ("mail", failing)])
    turn = TurnContext(channel_id="cli_channel", user_id="u1", session_id="s1")

    result = await Runner.run(orch.agent(), "plan and mail", context=turn)

    assert result.final_output == "Planned; mail failed."
    assert tool_outputs(model, 1) == ["done: plan Rome", "error: time_budget_ms=5 exceeded"]
    ((task, ctx),) = helper.seen
    assert task == "plan Rome"
    assert ctx is not None and ctx.turn == turn


async def test_core_tools_list_extensions_and_request_restart() -> None:
    kernel = Kernel()
    model = ScriptedModel(
        [
            [
                function_call("list_extensions", {}, call_id="c1"),
                function_call("request_restart", {"reason": "new settings"}, call_id="c2"),
            ],
            [assistant_message("Restarting.")],
        ]
    )
    orch = orchestrator(model, [("core", core_tools(kernel))])

    await Runner.run(orch.agent(), "restart please")

    listing, restart = tool_outputs(model, 1)
    assert json.loads(listing) == [
        {"id": "notes", "status": "active", "error": None},
        {"id": "telegram_channel", "status": "error", "error": "TELEGRAM_BOT_TOKEN missing"},
    ]
    assert "restart requested" in restart
    assert kernel.restarts == ["new settings"]


def test_no_model_configured_fails_the_turn_not_the_construction() -> None:
    orch = orchestrator(None, [("core", core_tools(Kernel()))])  # no OPENAI_API_KEY in env={}
    assert "You are Hearth" in orch.instructions()
    with pytest.raises(ModelNotConfiguredError) as info:
        orch.agent()
    assert str(info.value).startswith("No model configured: set OPENAI_API_KEY")
