"""The hook contract (SPEC §9), the same tests in-process and isolated.

Small hook extensions are loaded by the real kernel and driven through
``kernel.hooks`` (``TurnHooks``) and ``kernel.hook_registry``, once with
``isolation: inprocess`` and once with ``isolation: process``: a plugin
author's hook must behave the same either way — order, chaining, tags,
frames, routing, lifecycle, containment. Isolated runs need bubblewrap.
"""

from __future__ import annotations

import json
import logging

import pytest

from conftest import ext_code
from core.extensions.contract import (
    Annotated,
    ShortCircuit,
    ToolCall,
    ToolDecision,
    TurnOutcome,
)
from core.extensions.errors import PermissionDeniedError
from core.extensions.isolation.kernel.mixins import proxy_class
from core.extensions.isolation.kernel.proxy import IsolatedExtension
from core.extensions.loading.capabilities import HOOKS, Capability, detect_capabilities
from support.hooks_kit import (
    HOOK_LOG,
    KernelFor,
    frames,
    hook_failures,
    isolation_mode,
    kernel_factory,
    turn,
)


@pytest.fixture(params=["inprocess", "process"])
def kernel_with(request: pytest.FixtureRequest, make_ext, settings_file) -> KernelFor:
    """Each test runs once with its extensions in-process, once isolated."""
    return kernel_factory(isolation_mode(request.param), make_ext, settings_file)


# --------------------------------------------------------------------- order and chaining

CHAIN = ext_code(
    body="""
    async def on_plain_text(self, text, direction, turn):
        return f"{text}>{self.ctx.extension_id}"

    async def on_llm_output(self, output, turn):
        return f"{output}>{self.ctx.extension_id}"

    async def on_input_messages(self, messages, turn):
        return [*messages, {"role": "user", "content": self.ctx.extension_id}]
    """
)
# directory order alpha, bravo, charlie, delta; priority order bravo, alpha, delta, charlie
PRIORITIES = {"alpha": 50, "bravo": 90, "charlie": 10, "delta": 50}
ORDER = ["bravo", "alpha", "delta", "charlie"]


async def test_hooks_run_by_priority_then_load_order_and_chain_their_outputs(kernel_with):
    extensions = {name: (CHAIN, {"priority": p}) for name, p in PRIORITIES.items()}
    chained = ">".join(["hi", *ORDER])
    for run in range(2):  # the same order in every run of the kernel, and every turn
        async with kernel_with(extensions) as kernel:
            for point in (Capability.PLAIN_TEXT, Capability.LLM_OUTPUT, Capability.INPUT_MESSAGES):
                entries = kernel.hook_registry.at(point)
                assert [(e.owner, e.priority) for e in entries] == [
                    ("bravo", 90),
                    ("alpha", 50),
                    ("delta", 50),
                    ("charlie", 10),
                ]
            for n in range(10 * run + 1, 10 * run + 4):
                kernel.hook_registry.invalidate()  # rebuilt: still the same order
                assert await kernel.hooks.plain_text("hi", "in", turn(n)) == chained
                rendered = await kernel.hooks.render_output("hi", turn(n))
                # on_llm_output chained, then plain text "out" chained
                assert rendered.text == ">".join([chained, *ORDER])
                first = [{"role": "user", "content": "x"}]
                messages = await kernel.hooks.input_messages(first, turn(n))
                assert [m["content"] for m in messages] == ["x", *ORDER]

    plain = await frames(kernel, "plain_text", turn(1))
    assert [(f["owner"], f["before"], f["after"]) for f in plain[:2]] == [
        ("bravo", "hi", "hi>bravo"),
        ("alpha", "hi>bravo", "hi>bravo>alpha"),
    ]
    assert plain[0]["hook"] == "on_plain_text" and plain[0]["direction"] == "in"
    assert all(f["turn_id"] == "t1" and f["session_id"] == "s1" for f in plain)
    (first_input, *_) = await frames(kernel, "input", turn(1))
    assert first_input["owner"] == "bravo" and first_input["hook"] == "on_input_messages"
    assert first_input["before"] == [{"role": "user", "content": "x"}]
    assert first_input["after"][-1] == {"role": "user", "content": "bravo"}
    outputs = await frames(kernel, "output", turn(1))
    assert [f["owner"] for f in outputs] == ORDER
    assert outputs[-1]["after"] == ">".join(["hi", *ORDER])


GATE = ext_code(
    header="from core.extensions.contract import ShortCircuit",
    body="""
    async def on_input_messages(self, messages, turn):
        if "ping" in messages[-1]["content"]:
            return ShortCircuit("pong")
        return None
    """,
)
LATER = ext_code(
    body="""
    async def on_input_messages(self, messages, turn):
        (self.ctx.data_dir / "called").write_text(turn.turn_id)
        return [{"role": "user", "content": messages[-1]["content"] + " (seen)"}]
    """
)


async def test_a_short_circuit_answers_and_stops_the_chain(kernel_with):
    extensions = {"gate": (GATE, {"priority": 90}), "later": (LATER, {"priority": 10})}
    async with kernel_with(extensions) as kernel:
        called = kernel.loader.records["later"].context.data_dir / "called"
        result = await kernel.hooks.input_messages([{"role": "user", "content": "ping"}], turn(1))
        assert result == ShortCircuit("pong")
        assert not called.exists(), "a hook after the short circuit was called"
        (frame,) = await frames(kernel, "short_circuit", turn(1))
        assert frame["owner"] == "gate" and frame["hook"] == "on_input_messages"
        assert frame["before"] == [{"role": "user", "content": "ping"}]
        assert frame["after"] == "pong" and frame["turn_id"] == "t1"
        assert await frames(kernel, "input", turn(1)) == []

        result = await kernel.hooks.input_messages([{"role": "user", "content": "hi"}], turn(2))
        assert result == [{"role": "user", "content": "hi (seen)"}]
        assert called.read_text() == "t2"


# --------------------------------------------------------------------- tags and output

UI = ext_code(
    body="""
    tag_patterns = ["ui:*", "weather"]

    async def on_tag(self, tag, attrs, inner, turn):
        if tag.startswith("ui:"):
            return f"({tag[3:]} {inner})"
        return inner.strip()
    """
)
WEATHER = ext_code(
    body="""
    tag_patterns = ["weather"]

    async def on_tag(self, tag, attrs, inner, turn):
        return f"[{attrs['city']}: {inner}]"
    """
)
NOTES = ext_code(
    header="from core.extensions.contract import Annotated",
    body="""
    async def on_llm_output(self, output, turn):
        return Annotated(output + " (checked)", {"words": len(output.split()), "ok": True})
    """,
)


async def test_tags_are_rendered_innermost_first_and_chained_by_priority(kernel_with):
    extensions = {
        "ui": (UI, {"priority": 90}),
        "weather": (WEATHER, {"priority": 50}),
        "notes": (NOTES, {}),
    }
    async with kernel_with(extensions) as kernel:
        (ui_entry, weather_entry) = kernel.hook_registry.at(Capability.TAG)
        assert ui_entry.owner == "ui" and ui_entry.tags.matches("ui:anything")
        assert weather_entry.tags.matches("weather") and not weather_entry.tags.matches("ui:x")
        answer = (
            'Now <weather city="Oslo"> <ui:bold>sunny</ui:bold> </weather>'
            " <b>kept</b> <ui:open>dangling"
        )
        rendered = await kernel.hooks.render_output(answer, turn(1))
        tags = "Now [Oslo: (bold sunny)] <b>kept</b> <ui:open>dangling"
        assert rendered.text == tags + " (checked)"
        assert rendered.annotations == {"notes": {"words": 6, "ok": True}}

        tag_frames = await frames(kernel, "tag", turn(1))
        assert [(f["owner"], f["tag"], f["before"], f["after"]) for f in tag_frames] == [
            ("ui", "ui:bold", "sunny", "(bold sunny)"),
            ("ui", "weather", " (bold sunny) ", "(bold sunny)"),
            ("weather", "weather", "(bold sunny)", "[Oslo: (bold sunny)]"),
        ]
        assert tag_frames[2]["attrs"] == {"city": "Oslo"} and tag_frames[2]["hook"] == "on_tag"
        (output,) = await frames(kernel, "output", turn(1))
        assert output["owner"] == "notes" and output["hook"] == "on_llm_output"
        assert (output["before"], output["after"]) == (tags, tags + " (checked)")
        assert output["annotations"] == {"words": 6, "ok": True}


# --------------------------------------------------------------------- routing and lifecycle

ROUTER = ext_code(
    header="from core.extensions.contract import ModelRoute",
    body="""
    async def route_model(self, messages, turn):
        model = self.ctx.get_config("model")
        return ModelRoute(model, f"{len(messages)} message(s)")
    """,
)


async def test_routing_proposals_are_advisory_unless_the_extension_decides(kernel_with, caplog):
    caplog.set_level(logging.INFO, logger=HOOK_LOG)
    extensions = {
        "scout": (ROUTER, {"priority": 90, "config": {"model": "cheap/mini"}}),
        "boss": (ROUTER, {"config": {"model": "big/model"}}),
    }
    async with kernel_with(extensions, hooks={"authoritative_routing": ["boss"]}) as kernel:
        messages = [{"role": "user", "content": "hello"}]
        assert await kernel.hooks.route(messages, turn(1)) == "big/model"
        routed = await frames(kernel, "routing", turn(1))
        assert [(f["owner"], f["after"], f["mode"]) for f in routed] == [
            ("scout", "cheap/mini", "advisory"),
            ("boss", "big/model", "authoritative"),
        ]
        assert routed[0]["reason"] == "1 message(s)" and routed[0]["hook"] == "route_model"
        assert "t1: scout proposes model cheap/mini (1 message(s)); advisory" in caplog.text
        assert "t1: boss proposes model big/model (1 message(s)); used" in caplog.text


WATCHER = ext_code(
    header="import json\nfrom dataclasses import asdict, is_dataclass",
    body="""
    def _note(self, hook, *values):
        line = [hook, *[(type(v).__name__, asdict(v) if is_dataclass(v) else v) for v in values]]
        with (self.ctx.data_dir / "seen.jsonl").open("a") as out:
            out.write(json.dumps(line) + "\\n")

    async def on_session_start(self, turn):
        self._note("on_session_start", turn)

    async def on_turn_start(self, turn):
        self._note("on_turn_start", turn)

    async def on_turn_end(self, turn, outcome):
        self._note("on_turn_end", turn, outcome)

    async def on_session_end(self, turn, reason):
        self._note("on_session_end", turn, reason)
    """,
)


async def test_lifecycle_hooks_receive_the_turn_and_its_outcome(kernel_with):
    async with kernel_with({"watcher": (WATCHER, {})}) as kernel:
        at = turn(1)
        await kernel.hooks.session_started(at)
        await kernel.hooks.turn_started(at)
        await kernel.hooks.turn_ended(at, TurnOutcome("answered", "Hello!", 12.5))
        await kernel.hooks.session_ended(at, "new")
        seen = kernel.loader.records["watcher"].context.data_dir / "seen.jsonl"
        lines = [json.loads(line) for line in seen.read_text().splitlines()]
    fields = {
        "agent_id": "orchestrator",
        "channel_id": "cli_channel",
        "user_id": "u1",
        "session_id": "s1",
        "turn_id": "t1",
        "sender_id": None,
        "person": None,
        "role": "owner",
    }
    outcome = {"status": "answered", "reply": "Hello!", "duration_ms": 12.5}
    assert lines == [
        ["on_session_start", ["TurnContext", fields]],
        ["on_turn_start", ["TurnContext", fields]],
        ["on_turn_end", ["TurnContext", fields], ["TurnOutcome", outcome]],
        ["on_session_end", ["TurnContext", fields], ["str", "new"]],
    ]


# --------------------------------------------------------------------- tool calls

GUARD = ext_code(
    header="from core.extensions.contract import Annotated, ToolDecision",
    body="""
    async def before_tool_call(self, call, turn):
        if call.name == "rm":
            return ToolDecision.deny(f"no rm of {call.arguments['path']} in {turn.turn_id}")
        if call.name == "search":
            return ToolDecision.modify({"limit": 5})
        return None

    async def after_tool_call(self, call, result, turn):
        if call.name == "search":
            return Annotated(result.upper(), {"call_id": call.call_id})
        return f"{call.name}: {result}"
    """,
)


async def test_tool_call_hooks_decide_and_rewrite_across_the_boundary(kernel_with):
    async with kernel_with({"guard": (GUARD, {})}) as kernel:
        guard = kernel.loader.records["guard"].instance
        assert [e.owner for e in kernel.hook_registry.at(Capability.BEFORE_TOOL_CALL)] == ["guard"]
        rm = ToolCall("rm", {"path": "/"}, "c1")
        assert await guard.before_tool_call(rm, turn(1)) == ToolDecision("deny", "no rm of / in t1")
        search = ToolCall("search", {"q": "tea", "limit": 50}, "c2")
        assert await guard.before_tool_call(search, turn(1)) == ToolDecision.modify({"limit": 5})
        assert await guard.before_tool_call(ToolCall("add", {}, "c3"), turn(1)) is None
        assert await guard.after_tool_call(search, "found", turn(1)) == Annotated(
            "FOUND", {"call_id": "c2"}
        )
        assert await guard.after_tool_call(rm, "gone", turn(1)) == "rm: gone"


# --------------------------------------------------------------------- containment

BAD = ext_code(
    header="import asyncio",
    body="""
    async def on_plain_text(self, text, direction, turn):
        how = self.ctx.get_config("how")
        if how == "raise":
            raise RuntimeError("boom")
        if how == "sleep" and turn.turn_id == "t1":
            await asyncio.sleep(30)
        if how == "lie":
            return 42
        return f"{text}+{self.ctx.extension_id}"
    """,
)


async def test_failing_late_and_lying_hooks_are_skipped_and_logged_once(kernel_with, caplog):
    extensions = {
        name: (BAD, {"priority": 90, "config": {"how": how}})
        for name, how in (("raiser", "raise"), ("sleeper", "sleep"), ("liar", "lie"))
    }
    extensions["good"] = (BAD, {"priority": 10, "config": {"how": "good"}})
    async with kernel_with(extensions, hooks={"timeout_s": 0.3}) as kernel:
        for _ in range(2):  # logged once per turn
            assert await kernel.hooks.plain_text("hi", "in", turn(1)) == "hi+good"
        # the sleeper (late on turn 1 only) answers the next call: its channel still works
        assert await kernel.hooks.plain_text("hi", "in", turn(2)) == "hi+sleeper+good"
        for owner, why in (("raiser", "boom"), ("sleeper", "0.3 s"), ("liar", "int")):
            (line, *more) = hook_failures(caplog, owner)
            assert "hook on_plain_text" in line and why in line and "turn t1" in line
            assert all("turn t2" in later for later in more) and len(more) <= 1, more
        assert len(hook_failures(caplog, "sleeper")) == 1
        for ext_id in extensions:
            assert kernel.loader.records[ext_id].status.value == "active"


PLAIN = ext_code(
    body="""
    context_priority = 50

    async def get_context(self, prompt, turn_context):
        return None
    """
)
STAMPER = ext_code(
    body="""
    async def on_plain_text(self, text, direction, turn):
        await self.ctx.emit("stamper.seen", {"text": text})  # permitted: emit ["*"]
        try:
            await self.ctx.emit("hook.output", {"owner": "kernel", "after": "forged"})
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "forged a frame"
    """
)


async def test_an_extension_without_hooks_is_at_no_hook_point(kernel_with):
    async with kernel_with({"plain": (PLAIN, {})}) as kernel:
        assert kernel.loader.records["plain"].capabilities == [Capability.CONTEXT]
        assert {point: kernel.hook_registry.at(point) for point in HOOKS} == {
            point: () for point in HOOKS
        }
        assert kernel.hook_registry.owners() == [] and not kernel.hooks.shapes_output()
        assert await kernel.hooks.plain_text("hi", "in", turn(1)) == "hi"


async def test_an_extension_cannot_publish_a_hook_frame(kernel_with):
    async with kernel_with({"stamper": (STAMPER, {"permissions": {"emit": ["*"]}})}) as kernel:
        reply = await kernel.hooks.plain_text("hi", "in", turn(1))
        assert reply.startswith(PermissionDeniedError.__name__), reply
        assert "hook.* frames are the kernel's own" in reply
        assert await kernel.bus.journal.recent_events(10, topic="hook.output") == []
        assert len(await kernel.bus.journal.recent_events(10, topic="stamper.seen")) == 1


def test_an_isolated_proxy_has_exactly_the_hook_protocols_its_host_reported():
    for point in sorted(HOOKS):
        proxy = object.__new__(proxy_class(IsolatedExtension, (str(point),)))
        proxy.described = {"tag_patterns": ["ui:*"]}
        assert detect_capabilities(proxy) == [point]  # and its signatures match the contract
        if point is Capability.TAG:
            assert proxy.tag_patterns == ("ui:*",)
