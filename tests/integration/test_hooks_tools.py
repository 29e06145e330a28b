"""The tool hooks (SPEC §9 ``before_tool_call`` / ``after_tool_call``): every tool call
the model makes — core, extension (in-process and isolated), agent, a declarative
agent's own tools, MCP — goes through them exactly once. A hook denies (the model
reads why, the tool never runs), rewrites arguments (merged in priority order and
checked against the tool's schema) or rewrites and annotates results (journaled as
frames); a hook that fails or is late changes nothing. Driven by ScriptedModel
through a real kernel."""

from __future__ import annotations

import json
import logging
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import FunctionTool, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from core.agents import HookedAgent, ModelRouter, Orchestrator
from core.config import ModelsSettings
from core.extensions.contract import ToolDecision
from core.extensions.isolation.kernel.proxy import IsolatedExtension
from core.extensions.loading.capabilities import Capability
from core.extensions.tool_failures import reporting_failures_all
from core.kernel.hooks import (
    FrameRecorder,
    HookCaller,
    HookEntry,
    HookRegistry,
    ToolInterceptor,
    is_intercepted,
)
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    CONVERSING,
    conversing,
    running_kernel,
    wait_for,
)

DEMO_SERVER = Path(__file__).parents[1] / "fixtures" / "mcp_demo_server.py"

# A tool provider whose `switch` leaves a trace on disk (works isolated too).
GADGETS = ext_code(
    header="""
    from agents import function_tool
    """,
    body="""
    def get_tools(self):
        @function_tool
        def switch(device: str, state: str) -> str:
            "Switch a device to a state."
            with (self.ctx.data_dir / "switched.log").open("a") as log:
                log.write(f"{device}={state}\\n")
            return f"{device} is {state}"

        @function_tool
        def status() -> str:
            "Say how the house is."
            return "all quiet"

        return [switch, status]
    """,
)


def hook_ext(body: str) -> str:
    """An extension with the given hook methods, and ``seen()``: a list it may record in."""
    seen = """
    def seen(self):
        return self.__dict__.setdefault("_seen", [])
    """
    return ext_code(
        header="from core.extensions.contract import Annotated, ToolDecision",
        body=textwrap.dedent(seen) + textwrap.dedent(body),
    )


GUARD = hook_ext(
    """
    async def before_tool_call(self, call, turn):
        if call.name == "switch":
            return ToolDecision.deny("the heater stays off tonight")
        return None
    """
)


def modifier(arguments: dict[str, Any]) -> str:
    return hook_ext(
        f"""
        async def before_tool_call(self, call, turn):
            self.seen().append(dict(call.arguments))
            return ToolDecision.modify({arguments!r})
        """
    )


COUNTER = hook_ext(
    """
    async def before_tool_call(self, call, turn):
        self.seen().append(("before", call.name, call.call_id))

    async def after_tool_call(self, call, result, turn):
        self.seen().append(("after", call.name, call.call_id))
        self.__dict__.setdefault("results", {})[call.call_id] = result
    """
)


def replies(kernel) -> list[str]:
    return [entry[2] for entry in kernel.loader.instance("capture")._log()]


def tool_outputs(model: ScriptedModel, *, at: int | None = None) -> dict[str, str]:
    """``call_id -> output`` of the tool results the model was shown (in call ``at``, or any)."""
    calls = model.calls if at is None else [model.calls[at]]
    return {
        item["call_id"]: str(item["output"])
        for call in calls
        for item in (call.input if isinstance(call.input, list) else [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def switched(data_dir: Path) -> list[str]:
    log = data_dir / "extensions" / "gadgets" / "switched.log"
    return log.read_text().splitlines() if log.exists() else []


async def frames(kernel, kind: str) -> list[dict[str, Any]]:
    """The payloads of ``hook.<kind>`` frames, oldest first."""
    records = await kernel.bus.journal.recent_events(limit=100, topic=f"hook.{kind}")
    return [dict(r.payload) for r in reversed(records)]


async def converse(kernel, text: str = "please") -> None:
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: replies(kernel), timeout=30)


@pytest.fixture
def house(make_ext):
    """The capture channel and the gadgets tool provider (in-process)."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("gadgets", GADGETS)


# ------------------------------------------------------------ before_tool_call


async def test_a_denied_call_never_runs_and_the_model_reads_why(house, make_ext, settings_file):
    make_ext("guard", GUARD, CONVERSING)
    model = ScriptedModel(
        [
            [function_call("switch", {"device": "heater", "state": "on"}, call_id="c1")],
            [function_call("status", {}, call_id="c2")],
            [function_call("switch", "{not json", call_id="c3")],
            [assistant_message("The heater stays off.")],
        ]
    )
    path = settings_file()
    async with running_kernel(path, model=model) as kernel:
        await converse(kernel, "turn the heater on")
        (frame,) = await frames(kernel, "tool_call")
    assert replies(kernel) == ["The heater stays off."]
    outputs = tool_outputs(model)
    assert outputs["c1"] == "denied by guard: the heater stays off tonight"
    assert outputs["c2"] == "all quiet"  # other tools are not affected
    # arguments that are not JSON reach no hook: the tool reports them, as without hooks
    assert outputs["c3"].startswith("error: tool switch failed: ModelBehaviorError: Invalid JSON")
    assert switched(kernel.data_dir) == []  # the tool never ran
    assert frame["owner"] == "guard" and frame["hook"] == "before_tool_call"
    assert (frame["tool"], frame["decision"], frame["call_id"]) == ("switch", "deny", "c1")
    assert frame["before"] == {"device": "heater", "state": "on"} and frame["after"] is None
    assert frame["reason"] == "the heater stays off tonight"
    model.assert_complete()


async def test_modified_arguments_are_merged_in_priority_order_and_reach_the_tool(
    house, make_ext, settings_file
):
    make_ext("a_low", modifier({"device": "heater-2"}), conversing({"priority": 20}))
    make_ext("z_high", modifier({"state": "eco"}), conversing({"priority": 80}))
    model = ScriptedModel(
        [
            [function_call("switch", {"device": "heater", "state": "on"}, call_id="c1")],
            [assistant_message("Done.")],
        ]
    )
    async with running_kernel(settings_file(), model=model) as kernel:
        assert kernel.loader.order.index("a_low") < kernel.loader.order.index("z_high")
        await converse(kernel)
        modify_frames = await frames(kernel, "tool_call")
        low, high = kernel.loader.instance("a_low"), kernel.loader.instance("z_high")
    # the higher priority runs first; the lower one sees its change
    assert high.seen() == [{"device": "heater", "state": "on"}]
    assert low.seen() == [{"device": "heater", "state": "eco"}]
    assert switched(kernel.data_dir) == ["heater-2=eco"]
    assert tool_outputs(model)["c1"] == "heater-2 is eco"
    assert [(f["owner"], f["decision"], f["before"], f["after"]) for f in modify_frames] == [
        (
            "z_high",
            "modify",
            {"device": "heater", "state": "on"},
            {"device": "heater", "state": "eco"},
        ),
        (
            "a_low",
            "modify",
            {"device": "heater", "state": "eco"},
            {"device": "heater-2", "state": "eco"},
        ),
    ]
    model.assert_complete()


async def test_modified_arguments_that_break_the_schema_are_denied(house, make_ext, settings_file):
    make_ext("sloppy", modifier({"state": 5}), CONVERSING)
    model = ScriptedModel(
        [
            [function_call("switch", {"device": "heater", "state": "on"}, call_id="c1")],
            [assistant_message("It did not work.")],
        ]
    )
    async with running_kernel(settings_file(), model=model) as kernel:
        await converse(kernel)
        *_, denial = await frames(kernel, "tool_call")
    assert tool_outputs(model)["c1"] == (
        "denied by sloppy: modified arguments for switch do not match its schema: "
        "5 is not of type 'string'"
    )
    assert switched(kernel.data_dir) == []
    assert (denial["owner"], denial["decision"], denial["after"]) == ("sloppy", "deny", None)
    assert replies(kernel) == ["It did not work."]
    model.assert_complete()


async def test_an_isolated_extensions_tool_is_denied_like_any_other(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("gadgets", GADGETS, {"isolation": "process"})
    make_ext("guard", GUARD, CONVERSING)
    model = ScriptedModel(
        [
            [
                function_call("switch", {"device": "heater", "state": "on"}, call_id="c1"),
                function_call("status", {}, call_id="c2"),
            ],
            [assistant_message("The heater stays off.")],
        ]
    )
    path = settings_file(isolation={"call_timeout_s": 20})
    async with running_kernel(path, model=model) as kernel:
        assert isinstance(kernel.loader.instance("gadgets"), IsolatedExtension)
        await converse(kernel)
    outputs = tool_outputs(model)
    assert outputs["c1"] == "denied by guard: the heater stays off tonight"
    assert outputs["c2"] == "all quiet"  # the isolated tool itself still answers
    assert switched(kernel.data_dir) == []
    model.assert_complete()


# ------------------------------------------------------------ after_tool_call


async def test_after_tool_call_rewrites_the_result_and_journals_annotations(
    house, make_ext, settings_file
):
    redactor = hook_ext(
        """
        async def after_tool_call(self, call, result, turn):
            return Annotated(result.replace("heater", "[device]"), {"redacted": 1})
        """
    )
    measurer = hook_ext(
        """
        async def after_tool_call(self, call, result, turn):
            self.seen().append(result)
            return Annotated(None, {"chars": len(result)})
        """
    )
    make_ext("redactor", redactor, conversing({"priority": 80}))
    make_ext("measurer", measurer, conversing({"priority": 20}))
    model = ScriptedModel(
        [
            [function_call("switch", {"device": "heater", "state": "on"}, call_id="c1")],
            [assistant_message("Done.")],
        ]
    )
    async with running_kernel(settings_file(), model=model) as kernel:
        await converse(kernel)
        result_frames = await frames(kernel, "tool_result")
        measured = kernel.loader.instance("measurer").seen()
    assert tool_outputs(model)["c1"] == "[device] is on"
    assert switched(kernel.data_dir) == ["heater=on"]  # the tool ran as asked
    assert measured == ["[device] is on"]  # chained: the next hook sees the new text
    assert [
        (f["owner"], f["before"], f["after"], f["annotations"], f["tool"], f["call_id"])
        for f in result_frames
    ] == [
        ("redactor", "heater is on", "[device] is on", {"redacted": 1}, "switch", "c1"),
        ("measurer", "[device] is on", "[device] is on", {"chars": 14}, "switch", "c1"),
    ]
    model.assert_complete()


# ------------------------------------------------------------ every dispatch site


async def test_every_kind_of_tool_runs_the_hooks_exactly_once_per_call(
    house, make_ext, settings_file
):
    make_ext("counter", COUNTER, CONVERSING)
    make_ext(
        "helper",
        manifest={
            "description": "Switches devices for the user.",
            "depends_on": ["gadgets"],
            "agent": {"uses_tools": ["gadgets"], "limits": {"max_turns": 3}},
        },
    )
    model = ScriptedModel(
        [
            [function_call("current_time", {}, call_id="c1")],  # core tool
            [function_call("switch", {"device": "lamp", "state": "on"}, call_id="c2")],
            [function_call("shout", {"text": "tea is ready"}, call_id="c3")],  # MCP tool
            [function_call("helper", {"task": "turn the fan on"}, call_id="c4")],  # agent
            [function_call("switch", {"device": "fan", "state": "on"}, call_id="c5")],  # inner
            [assistant_message("The fan is on.")],  # the helper's answer
            [assistant_message("All done.")],
        ]
    )
    servers = {"demo": {"command": sys.executable, "args": [str(DEMO_SERVER)]}}
    async with running_kernel(settings_file(mcp={"servers": servers}), model=model) as kernel:
        await converse(kernel)
        counter = kernel.loader.instance("counter")
        seen, results = counter.seen(), counter.results
    assert replies(kernel) == ["All done."]
    calls = [("current_time", "c1"), ("switch", "c2"), ("shout", "c3"), ("helper", "c4")]
    assert [s[1:] for s in seen if s[0] == "before"] == [*calls, ("switch", "c5")]
    # the helper's own call ends before the helper does
    assert [s[1:] for s in seen if s[0] == "after"] == [*calls[:3], ("switch", "c5"), calls[3]]
    assert switched(kernel.data_dir) == ["lamp=on", "fan=on"]
    assert results["c3"] == "TEA IS READY!"  # an MCP result's text, not its repr
    assert results["c4"] == "The fan is on."
    model.assert_complete()


# ------------------------------------------------------------ containment


async def test_a_failing_late_or_odd_hook_changes_nothing_and_is_logged_once(
    house, make_ext, settings_file, caplog
):
    broken = hook_ext(
        """
        async def before_tool_call(self, call, turn):
            raise RuntimeError("policy file missing")
        """
    )
    slow = hook_ext(
        """
        async def after_tool_call(self, call, result, turn):
            import asyncio
            await asyncio.sleep(30)
            return "too late"
        """
    )
    odd = hook_ext(
        """
        async def before_tool_call(self, call, turn):
            return {"allow": True}
        """
    )
    make_ext("broken", broken, CONVERSING)
    make_ext("slow", slow, CONVERSING)
    make_ext("odd", odd, CONVERSING)
    model = ScriptedModel(
        [
            [
                function_call("switch", {"device": "lamp", "state": "on"}, call_id="c1"),
                function_call("switch", {"device": "fan", "state": "on"}, call_id="c2"),
            ],
            [assistant_message("Both are on.")],
        ]
    )
    with caplog.at_level(logging.ERROR, logger="core.kernel.hooks"):
        async with running_kernel(settings_file(hooks={"timeout_s": 0.2}), model=model) as kernel:
            await converse(kernel)
    assert replies(kernel) == ["Both are on."]
    assert sorted(switched(kernel.data_dir)) == ["fan=on", "lamp=on"]
    assert tool_outputs(model) == {"c1": "lamp is on", "c2": "fan is on"}
    lines = [r.getMessage() for r in caplog.records if r.name == "core.kernel.hooks"]
    broken_lines = [line for line in lines if "before_tool_call of broken" in line]
    slow_lines = [line for line in lines if "after_tool_call of slow" in line]
    assert len(broken_lines) == 1 and "RuntimeError: policy file missing" in broken_lines[0]
    assert len(slow_lines) == 1 and "took longer than 0.2 s" in slow_lines[0]
    odd_lines = [line for line in lines if "before_tool_call of odd" in line]
    assert len(odd_lines) == 1 and "returned a dict; ignored" in odd_lines[0]
    model.assert_complete()


# ------------------------------------------------------------ without a kernel


class Sink:
    """Where frames go without a bus: kept for the test to read."""

    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, topic: str, source: str, payload: dict[str, Any], **_: Any) -> int:
        self.published.append((topic, payload))
        return len(self.published)


def interceptor_for(registry: HookRegistry, sink: Sink) -> ToolInterceptor:
    return ToolInterceptor(registry, HookCaller(1.0), FrameRecorder(sink))


def sample_tools() -> list[FunctionTool]:
    def lucky() -> int:
        """The lucky number."""
        return 42

    def broken(city: str) -> str:
        """Always fails."""
        raise LookupError(f"no such city: {city}")

    async def raw(ctx: Any, args: str) -> str:
        return f"raw got {args}"

    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    return [
        function_tool(lucky),
        function_tool(broken),
        FunctionTool(name="raw", description="Raw.", params_json_schema=schema, on_invoke_tool=raw),
    ]


def script(runs: int = 1) -> ScriptedModel:
    """Each run: the three sample tools called at once, then an answer."""
    calls = [
        function_call("lucky", {}, call_id="c1"),
        function_call("broken", {"city": "Atlantis"}, call_id="c2"),
        function_call("raw", {}, call_id="c3"),
    ]
    return ScriptedModel([calls, [assistant_message("ok")]] * runs)


def orchestrator_with(model: ScriptedModel, interceptor: ToolInterceptor | None) -> Orchestrator:
    router = ModelRouter(ModelsSettings(), env={}, overrides={"orchestrator": model})
    return Orchestrator(
        model_router=router,
        timezone="UTC",
        tools=reporting_failures_all(sample_tools()),  # as the kernel's toolset does
        interceptor=interceptor,
    )


async def test_with_no_tool_hooks_the_model_reads_exactly_what_it_read_before():
    plain, hooked, sink = script(), script(), Sink()
    interceptor = interceptor_for(HookRegistry(lambda: []), sink)
    await Runner.run(orchestrator_with(plain, None).agent(), "go")
    await Runner.run(orchestrator_with(hooked, interceptor).agent(), "go")
    assert tool_outputs(hooked) == tool_outputs(plain)
    assert tool_outputs(hooked)["c1"] == "42"
    assert tool_outputs(hooked)["c2"] == (
        "error: tool broken failed: LookupError: no such city: Atlantis"
    )
    assert sink.published == []
    plain.assert_complete()
    hooked.assert_complete()


async def test_a_hook_added_later_applies_to_tools_wrapped_before_where_it_matches():
    class Block:
        async def before_tool_call(self, call, turn):
            return ToolDecision.deny(f"{call.name} is blocked")

    extra: list[tuple[Capability, HookEntry]] = []
    registry, sink, model = HookRegistry(lambda: [], extra=lambda: extra), Sink(), script(runs=2)
    orchestrator = orchestrator_with(model, interceptor_for(registry, sink))
    await Runner.run(orchestrator.agent(), "go")
    block = HookEntry("command:block", 50, 0, Block(), matcher=re.compile("^lucky$"))
    extra.append((Capability.BEFORE_TOOL_CALL, block))
    registry.invalidate()
    await Runner.run(orchestrator.agent(), "go")  # the same tools, wrapped before the hook came
    assert tool_outputs(model, at=1)["c1"] == "42"
    assert tool_outputs(model, at=3)["c1"] == "denied by command:block: lucky is blocked"
    assert tool_outputs(model, at=3)["c3"] == "raw got {}"  # the matcher spares other tools
    assert [topic for topic, _ in sink.published] == ["hook.tool_call"]
    model.assert_complete()


def test_wrapping_is_idempotent_and_leaves_other_tools_alone():
    interceptor = interceptor_for(HookRegistry(lambda: []), Sink())
    tool = sample_tools()[0]
    wrapped = interceptor.wrap(tool)
    assert wrapped is not tool and wrapped.name == tool.name
    assert interceptor.wrap(wrapped) is wrapped
    assert tool.on_invoke_tool is not wrapped.on_invoke_tool  # the original is untouched
    not_a_function_tool: Any = object()
    assert interceptor.wrap(not_a_function_tool) is not_a_function_tool
    assert json.dumps(wrapped.params_json_schema) == json.dumps(tool.params_json_schema)


def test_a_cloned_agent_keeps_its_tool_hooks():
    """Routing may ``clone`` the turn's agent with another model: its tools stay hooked."""
    interceptor = interceptor_for(HookRegistry(lambda: []), Sink())
    agent = orchestrator_with(script(), interceptor).agent()
    clone = agent.clone(model=script())
    assert isinstance(clone, HookedAgent) and clone.tool_wrapper is interceptor
    assert all(is_intercepted(tool) for tool in clone.tools)
