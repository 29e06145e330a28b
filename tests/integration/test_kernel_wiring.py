"""Status-aware wiring (issue 12, items 1 and 2): an extension that is not
active gets no traffic — channel, commands, tools, context, events — and gets
it back when it is restarted; its background service runs only while it is
active; synchronous extension code cannot freeze the kernel."""

from __future__ import annotations

from agents.testing import ModelStep, ScriptedModel, assistant_message

from conftest import ext_code
from core.events.topics import SystemTopics
from core.extensions.contract import TurnContext
from core.kernel.commands.table import parse_command
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    CONVERSING,
    model_read,
    running_kernel,
    wait_for,
)

TURN = TurnContext(channel_id="capture", user_id="u1")

# A probe with every kind of traffic: channel, command, tool, context, service.
PROBE = ext_code(
    header="""
    import asyncio
    import threading
    from agents import function_tool
    from core.extensions.contract import Command
    """,
    body="""
    fail_start = False
    healthy = True
    service_runs = 0
    service_live = False
    gate = None
    sent = None
    ticks = None

    async def initialize(self, context):
        self.ctx = context
        self.ticks = []

        async def on_tick(event):
            self.ticks.append(event.payload["n"])

        context.subscribe_event("probe.tick", on_tick)

    async def start(self):
        if self.fail_start:
            raise RuntimeError("probe refuses to start")

    def health_check(self):
        if self.gate is not None:
            self.gate.wait(20)  # sync code that blocks the calling thread
        return self.healthy

    def _log(self):
        if self.sent is None:
            self.sent = []
        return self.sent

    async def send_to_user(self, user_id, message):
        self._log().append(("reply", user_id, message))

    async def send_message(self, message):
        self._log().append(("notify", None, message))

    def get_tools(self):
        @function_tool
        def probe_tool() -> str:
            "Answer from the probe."
            return "probe"

        return [probe_tool]

    def get_commands(self):
        async def ping(args, turn):
            return "pong"

        return [Command("probe_ping", "answer pong", ping)]

    context_priority = 50

    async def get_context(self, prompt, turn_context):
        return "PROBE CONTEXT"

    async def run_background(self):
        self.service_runs += 1
        self.service_live = True
        try:
            await asyncio.Event().wait()
        finally:
            self.service_live = False
    """,
)

FAILING_PROBE = PROBE.replace("fail_start = False", "fail_start = True")
PROBE_MANIFEST = {
    "events": {"subscribes": [{"topic": "probe.alert", "handler": "notify_user"}]},
    **CONVERSING,  # its context provider sees turns
}


def kernel_settings(settings_file, **loader):
    return settings_file(
        channels={"default": "capture"},
        loader={"health_check_interval_s": 0.05, "lifecycle_timeout_s": 2, **loader},
    )


def tool_names(call) -> set[str]:
    return {str(getattr(t, "name", t)) for t in call.tools}


async def command(kernel, text: str) -> str:
    return await kernel.commands.run(parse_command(text), TURN)


async def ask(kernel, model, text: str):
    """One turn through the capture channel; the model call it made."""
    before = len(model.calls)
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: len(model.calls) > before)
    return model.calls[-1]


def script(n: int) -> ScriptedModel:
    return ScriptedModel([ModelStep(output=[assistant_message("ok")]) for _ in range(n)])


async def test_extension_whose_start_raises_gets_no_traffic(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("probe", FAILING_PROBE, PROBE_MANIFEST)
    model = script(3)
    async with running_kernel(kernel_settings(settings_file), model=model) as k:
        record = k.loader.records["probe"]
        probe = record.instance
        assert record.status.value == "error" and "probe refuses to start" in record.error
        # commands: unknown, and not in /help
        assert (await command(k, "/probe_ping")).startswith("Unknown command /probe_ping")
        assert "probe_ping" not in await command(k, "/help")
        # tools and context: absent from the orchestrator's model call
        call = await ask(k, model, "hello")
        assert "probe_tool" not in tool_names(call)
        assert "PROBE CONTEXT" not in model_read(call)
        # channel: proactive messages addressed to it go elsewhere; manifest events dropped
        await k.bus.publish(SystemTopics.USER_NOTIFY, "test", {"text": "hi", "channel_id": "probe"})
        await k.bus.publish("probe.alert", "test", {"text": "alert"})
        await k.bus.publish("probe.tick", "test", {"n": 1})
        capture = k.loader.instance("capture")
        await wait_for(lambda: ("notify", None, "hi") in capture._log())
        # the service never ran
        assert probe.service_runs == 0 and probe.sent is None
        # /status and extensions --json agree with the wiring
        status = await command(k, "/status")
        assert "Extensions active (1): capture" in status
        assert "probe: error — start failed: RuntimeError: probe refuses to start" in status
        report = {r["id"]: r["status"] for r in k.loader.report()}
        assert report == {"capture": "active", "probe": "error"}
        assert not k.wiring.is_wired("probe")
    assert probe.sent is None and probe.ticks == []
    assert ("notify", None, "alert") not in capture._log()


async def test_unhealthy_extension_is_unwired_then_rewired(make_ext, settings_file, caplog):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("probe", PROBE, PROBE_MANIFEST)
    model = script(4)
    async with running_kernel(kernel_settings(settings_file), model=model) as k:
        k.supervision.backoff_initial_s = 0.05
        record = k.loader.records["probe"]
        probe = record.instance
        assert await command(k, "/probe_ping") == "pong"
        assert "probe_tool" in tool_names(await ask(k, model, "one"))

        probe.healthy = False
        await wait_for(lambda: record.status.value == "error")
        assert (await command(k, "/probe_ping")).startswith("Unknown command")
        call = await ask(k, model, "two")
        assert "probe_tool" not in tool_names(call)
        assert "PROBE CONTEXT" not in model_read(call)
        await k.bus.publish(SystemTopics.USER_NOTIFY, "test", {"text": "x", "channel_id": "probe"})
        await wait_for(lambda: ("notify", None, "x") in k.loader.instance("capture")._log())
        await k.bus.publish("probe.tick", "test", {"n": 1})
        await wait_for(lambda: "(probe.tick) not delivered" in caplog.text)
        assert probe.sent is None
        assert "Extensions active (1): capture" in await command(k, "/status")

        probe.healthy = True
        await wait_for(lambda: record.status.value == "active", timeout=10)
        assert await command(k, "/probe_ping") == "pong"
        call = await ask(k, model, "three")
        assert "probe_tool" in tool_names(call)
        assert "PROBE CONTEXT" in model_read(call)
        await k.bus.publish(SystemTopics.USER_NOTIFY, "test", {"text": "y", "channel_id": "probe"})
        await wait_for(lambda: probe.sent == [("notify", None, "y")])
        await k.bus.publish("probe.tick", "test", {"n": 2})
        await wait_for(lambda: probe.ticks == [2])
        assert "Extensions active (2): capture, probe" in await command(k, "/status")


async def test_service_is_cancelled_when_unhealthy_and_on_stop(make_ext, settings_file):
    make_ext("probe", PROBE, CONVERSING)
    async with running_kernel(kernel_settings(settings_file)) as k:
        k.supervision.backoff_initial_s = 0.05
        record = k.loader.records["probe"]
        probe = record.instance
        await wait_for(lambda: probe.service_live)
        probe.healthy = False
        await wait_for(lambda: record.status.value == "error")
        await wait_for(lambda: not probe.service_live)
        assert not k.supervision.service_running("probe")
        probe.healthy = True
        await wait_for(lambda: record.status.value == "active", timeout=10)
        await wait_for(lambda: probe.service_live)
        assert probe.service_runs == 2
    assert not probe.service_live  # cancelled when the kernel stopped


async def test_blocking_sync_health_check_is_cut_off(make_ext, settings_file):
    make_ext("probe", PROBE, CONVERSING)
    async with running_kernel(kernel_settings(settings_file, lifecycle_timeout_s=0.5)) as k:
        import threading

        record = k.loader.records["probe"]
        gate = threading.Event()
        record.instance.gate = gate
        try:
            await wait_for(lambda: record.status.value == "error", timeout=5)
            assert record.error == "health check failed: health_check() timed out after 0.5 s"
            assert (await command(k, "/help")).startswith("Commands:")  # the loop is free
        finally:
            gate.set()
