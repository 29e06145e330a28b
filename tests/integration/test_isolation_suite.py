"""One ordinary extension, the same tests, in-process and isolated (SPEC §6).

Tools, a context provider, a scheduled task, an event subscription, a
command, config, declared secrets and a refused emit must behave identically whether the
extension runs in the kernel or in a plugin host — the loader, router and
orchestrator cannot tell the difference.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agents.tool_context import ToolContext

from conftest import ext_code
from core.events.models import Event
from core.extensions.contract import TurnContext
from core.kernel.commands.table import parse_command
from support.harness import running_kernel, wait_for

ORDINARY = ext_code(
    header="""
    from agents import function_tool
    """,
    body="""
    context_priority = 50

    async def initialize(self, context):
        self.ctx = context
        context.subscribe_event("demo.ping", self.on_ping)

    async def on_ping(self, event):
        (self.ctx.data_dir / "pings.txt").open("a").write(event.payload["n"] + "\\n")
        await self.ctx.emit("demo.pong", {"n": event.payload["n"]}, event.correlation_id)

    def get_tools(self):
        ctx = self.ctx

        @function_tool
        def add(a: int, b: int) -> str:
            "Add two integers."
            return str(a + b)

        @function_tool
        async def announce(text: str) -> str:
            "Publish an announcement event."
            event_id = await ctx.emit("demo.announced", {"text": text})
            return f"announced as event {event_id}"

        return [add, announce]

    async def get_context(self, prompt, turn_context):
        return f"user {turn_context.user_id} on {turn_context.channel_id} asked: {prompt}"

    async def execute_task(self, task_name):
        (self.ctx.data_dir / "ticks.txt").open("a").write(task_name + "\\n")
        return {"text": f"task {task_name} ran, greeting={self.ctx.get_config('greeting')}"}

    def get_commands(self):
        from core.extensions.contract import Command

        async def hello(args, turn):
            token = self.ctx.get_secret("ORDINARY_TOKEN")
            return f"hello {args} from {turn.user_id} (token {token})"

        async def leak(args, turn):
            try:
                await self.ctx.emit("elsewhere.topic", {})
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
            return "leaked"

        return [Command("hello", "Say hello.", hello), Command("leak", "Emit off-limits.", leak)]
    """,
)

MANIFEST = {
    "secrets": ["ORDINARY_TOKEN"],
    "config": {"greeting": "hi"},
    "schedules": [{"name": "tick", "cron": "0 3 * * *"}],
    # its context provider sees each turn's prompt
    "permissions": {"emit": ["demo.*"], "subscribe": ["demo.*"], "conversations": True},
}
TURN = TurnContext(channel_id="cli_channel", user_id="u7")


@pytest.fixture(params=["inprocess", "process"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def call_tool(kernel, ext_id: str, name: str, args: dict) -> str:
    tool = next(t for t in kernel.loader.records[ext_id].tools if t.name == name)
    raw = json.dumps(args)
    ctx = ToolContext(context=TURN, tool_name=name, tool_call_id="c1", tool_arguments=raw)
    return str(await tool.on_invoke_tool(ctx, raw))


async def test_ordinary_extension_behaves_the_same(
    mode, make_ext, settings_file, monkeypatch, tmp_path: Path
):
    monkeypatch.setenv("ORDINARY_TOKEN", "tok-123")
    make_ext("ordinary", ORDINARY, {**MANIFEST, "isolation": mode})
    path = settings_file(isolation={"call_timeout_s": 10})
    async with running_kernel(path) as kernel:
        record = kernel.loader.records["ordinary"]
        assert record.report() == {
            "id": "ordinary",
            "status": "active",
            "capabilities": [
                "ToolProvider",
                "SchedulerProvider",
                "ContextProvider",
                "CommandProvider",
            ],
            "tools": ["add", "announce"],
            "error": None,
        }
        assert (type(record.instance).__name__ != "Ext") == (mode == "process")

        # tools: a plain one, and one that emits through the context
        assert await call_tool(kernel, "ordinary", "add", {"a": 2, "b": 40}) == "42"
        seen: list[Event] = []

        async def collect(event: Event) -> None:
            seen.append(event)

        kernel.bus.subscribe("demo.*", collect, "test/collect")
        reply = await call_tool(kernel, "ordinary", "announce", {"text": "hey"})
        assert reply.startswith("announced as event ")

        # context provider, in priority order after the kernel's own
        context = await kernel.context.build("what time is it?", TURN)
        assert "user u7 on cli_channel asked: what time is it?" in context
        assert context.index("Channel: cli_channel") < context.index("user u7")

        # scheduled task: runs, reads config, writes to its data dir
        instance = kernel.loader.instance("ordinary")
        assert await instance.execute_task("tick") == {"text": "task tick ran, greeting=hi"}
        data_dir = tmp_path / "data" / "extensions" / "ordinary"
        assert (data_dir / "ticks.txt").read_text() == "tick\n"

        # command with a declared secret
        answer = await kernel.commands.run(parse_command("/hello there"), TURN)
        assert answer == "hello there from u7 (token tok-123)"

        # a topic outside `permissions.emit` is refused with the kernel's message
        assert await kernel.commands.run(parse_command("/leak"), TURN) == (
            "PermissionDeniedError: extension 'ordinary' is not permitted to emit topic "
            "'elsewhere.topic'"
        )

        # event subscription: the handler runs and its emit reaches the bus
        await kernel.bus.publish("demo.ping", "test", {"n": "1"}, correlation_id="c-1")
        pong = await wait_for(lambda: [e for e in seen if e.topic == "demo.pong"], 10)
        assert pong[0].payload == {"n": "1"} and pong[0].correlation_id == "c-1"
        assert pong[0].source == "ordinary"
        assert [e.payload for e in seen if e.topic == "demo.announced"] == [{"text": "hey"}]
        assert (data_dir / "pings.txt").read_text() == "1\n"
