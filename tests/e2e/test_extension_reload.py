"""Hot reload of one extension (issue 18, ADR 0032): a changed tool is used on
the next turn without a restart, in-process and isolated; a broken new version
(syntax error, failing initialize, failing start) leaves the old one working
with the error reported; a call in flight finishes before the old instance is
destroyed; ``dev.watch`` reloads on a file change. Driven through ``/reload``
and ScriptedModel on a real kernel."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code, grant_all
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for


def greeter(version: str, *, init: str = "", start: str = "") -> str:
    """An extension whose ``greet`` tool answers ``version``."""
    return ext_code(
        header="""
        from agents import function_tool
        """,
        body=f"""
        version = {version!r}

        async def initialize(self, context):
            self.ctx = context
            {init or "pass"}

        async def start(self):
            {start or "pass"}

        def get_tools(self):
            version = self.version

            @function_tool
            def greet() -> str:
                "Say hello."
                return f"hello from {{version}}"

            return [greet]
        """,
    )


BREAKAGES = {
    "syntax error": ("def broken(:\n", "SyntaxError"),
    "failing initialize": (
        greeter("v2", init='raise RuntimeError("cannot initialize v2")'),
        "initialize failed: RuntimeError: cannot initialize v2",
    ),
    "failing start": (
        greeter("v2", start='raise RuntimeError("cannot start v2")'),
        "start failed: RuntimeError: cannot start v2",
    ),
}


def tool_outputs(model: ScriptedModel) -> list[str]:
    """Every tool result the model was shown, in order (each once, by call id)."""
    outputs = {
        item["call_id"]: str(item["output"])
        for call in model.calls
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
    return list(outputs.values())


def greet_turns(n: int) -> ScriptedModel:
    steps = []
    for i in range(n):
        steps += [[function_call("greet", {}, call_id=f"c{i}")], [assistant_message("ok")]]
    return ScriptedModel(steps)


def replies(kernel) -> list[str]:
    return [entry[2] for entry in kernel.loader.instance("capture")._log()]


async def say(kernel, text: str) -> str:
    """Send ``text`` as the user; the kernel's reply."""
    before = len(replies(kernel))
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: len(replies(kernel)) > before, timeout=60)
    return replies(kernel)[before]


def rewrite(ext_dir: Path, source: str) -> None:
    """New code for ``ext_dir``, granted as its developer would (a grant binds code,
    ADR 0044: an isolated greeter asks nothing and needs none)."""
    (ext_dir / "main.py").write_text(source)
    grant_all(ext_dir.parent, ext_dir.parent.parent / "data", only=ext_dir.name)


@pytest.fixture(params=["inprocess", "process"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_changed_tool_is_used_on_the_next_turn(mode, make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    ext_dir = make_ext("greeter", greeter("v1"), {"isolation": mode})
    model = greet_turns(2)
    async with running_kernel(settings_file(isolation={"call_timeout_s": 20}), model=model) as k:
        await say(k, "greet me")
        old = k.loader.records["greeter"].instance
        old_pid = getattr(old, "host_pid", None)
        rewrite(ext_dir, greeter("v2"))
        answer = await say(k, "/reload greeter")
        assert answer.startswith("Reloaded greeter in ") and "Tools: greet." in answer
        await say(k, "greet me again")
        record = k.loader.records["greeter"]
        assert record.instance is not old and k.wiring.is_wired("greeter")
        if mode == "process":  # a fresh plugin host runs the new code; the old one is gone
            assert record.instance.host_pid not in (None, old_pid)
    assert tool_outputs(model) == ["hello from v1", "hello from v2"]
    model.assert_complete()


@pytest.mark.parametrize(
    ("mode", "breakage"),
    [
        ("inprocess", "syntax error"),
        ("inprocess", "failing initialize"),
        ("inprocess", "failing start"),
        ("process", "syntax error"),
        ("process", "failing start"),
    ],
)
async def test_a_broken_new_version_leaves_the_old_one_working(
    mode, breakage, make_ext, settings_file
):
    source, error = BREAKAGES[breakage]
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    ext_dir = make_ext("greeter", greeter("v1"), {"isolation": mode})
    model = greet_turns(2)
    async with running_kernel(settings_file(isolation={"call_timeout_s": 20}), model=model) as k:
        await say(k, "greet me")
        old = k.loader.records["greeter"].instance
        rewrite(ext_dir, source)
        answer = await say(k, "/reload greeter")
        assert answer.startswith("Reload of greeter failed: ")
        assert error in answer and "The previous version keeps running." in answer
        await say(k, "greet me again")
        record = k.loader.records["greeter"]
        assert record.instance is old and record.live and k.wiring.is_wired("greeter")
    assert tool_outputs(model) == ["hello from v1", "hello from v1"]
    model.assert_complete()


SLOW = ext_code(
    header="""
    import asyncio
    from agents import function_tool
    """,
    body="""
    async def initialize(self, context):
        self.ctx = context
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.seen = []

    async def destroy(self):
        self.seen.append("destroyed")

    def get_tools(self):
        @function_tool
        async def slow() -> str:
            "Take a while."
            self.entered.set()
            await self.release.wait()
            self.seen.append("call finished")
            return "slow done"

        return [slow]
    """,
)


async def test_a_call_in_flight_finishes_before_the_old_instance_is_destroyed(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("slowpoke", SLOW)
    model = ScriptedModel([[function_call("slow", {}, call_id="c1")], [assistant_message("ok")]])
    async with running_kernel(settings_file(), model=model) as k:
        old = k.loader.records["slowpoke"].instance
        old_gate = k.loader.records["slowpoke"].calls
        turn = asyncio.create_task(say(k, "take your time"))
        await wait_for(old.entered.is_set)
        reload = asyncio.create_task(k.reloads.reload("slowpoke"))
        await wait_for(lambda: old_gate.closed)
        # closed: a new call of the old instance is refused, the one in flight goes on
        refused = await old_gate.run(lambda: asyncio.sleep(0, "ran"))
        assert "slowpoke is being reloaded" in refused
        assert old.seen == [] and not reload.done()
        old.release.set()
        assert (await reload).startswith("Reloaded slowpoke")
        assert old.seen == ["call finished", "destroyed"]
        assert await turn == "ok"
        assert k.loader.records["slowpoke"].instance is not old
    assert tool_outputs(model) == ["slow done"]


async def test_dev_watch_reloads_an_extension_when_its_file_changes(make_ext, settings_file):
    ext_dir = make_ext("greeter", greeter("v1"))
    path = settings_file(dev={"watch": True, "watch_debounce_ms": 50})
    async with running_kernel(path) as k:
        record = k.loader.records["greeter"]
        old = record.instance

        def reloaded() -> bool:
            if record.instance is not old and record.live:
                return True
            # the watcher starts with the kernel's tasks: write until it has seen a change
            rewrite(ext_dir, greeter("v2"))
            return False

        await wait_for(reloaded, timeout=30)
        assert record.instance.version == "v2" and k.wiring.is_wired("greeter")


async def test_reload_refuses_an_unknown_extension_and_bad_usage(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    async with running_kernel(settings_file()) as k:
        assert (await say(k, "/reload nope")).startswith("Reload of nope failed: no such extension")
        assert (await say(k, "/reload")).startswith("Usage: /reload ID")


async def test_an_extension_granted_after_start_is_loaded_by_reload(
    ext_root, make_ext, settings_file
):
    """Skipped at start for want of a grant: `/grant ID yes`, then `/reload ID`, no restart."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)  # grants the capture channel only
    ext_dir = ext_root / "greeter"
    ext_dir.mkdir()
    (ext_dir / "manifest.yaml").write_text("id: greeter\nname: Greeter\nentrypoint: main:Ext\n")
    (ext_dir / "main.py").write_text(greeter("v1"))
    async with running_kernel(settings_file()) as k:
        assert k.loader.records["greeter"].status == "skipped"
        refused = await say(k, "/reload greeter")
        assert refused.startswith("Reload of greeter failed: not granted: it asks to")
        assert "previous version" not in refused  # there was none running
        granted = await say(k, "/grant greeter yes")
        assert "Send `/reload greeter` to load it now" in granted
        assert (await say(k, "/reload greeter")).startswith("Reloaded greeter")
        record = k.loader.records["greeter"]
        assert record.live and k.wiring.is_wired("greeter") and record.instance.version == "v1"


def test_settings_dev_defaults_are_off(tmp_path: Path) -> None:
    from core.config import Settings

    dev = Settings().dev
    assert dev.watch is False and dev.reload_drain_s > 0


LISTENER = ext_code(
    body="""
    async def initialize(self, context):
        self.ctx = context
        self.ticks = []

        async def on_tick(event):
            self.ticks.append(event.payload["n"])

        context.subscribe_event("probe.tick", on_tick)
    """
)


async def test_events_published_during_a_reload_reach_the_new_instance(make_ext, settings_file):
    """The subscription's journal cursor is kept: nothing is lost, nothing reaches
    an unwired instance."""
    make_ext("listener", LISTENER, {"permissions": {"subscribe": ["probe.*"]}})
    async with running_kernel(settings_file(events={"poll_interval_s": 0.05})) as k:
        record = k.loader.records["listener"]
        old = record.instance
        await k.bus.publish("probe.tick", "test", {"n": 1})
        await wait_for(lambda: old.ticks == [1])
        old.ctx.release_subscriptions()  # as the reload does first: the next event waits
        await k.bus.publish("probe.tick", "test", {"n": 2})
        assert (await k.reloads.reload("listener")).startswith("Reloaded listener")
        new = record.instance
        await k.bus.publish("probe.tick", "test", {"n": 3})
        await wait_for(lambda: new.ticks == [2, 3])
        assert old.ticks == [1]


def unhealthy_then(version: str, healthy: bool) -> str:
    check = f"    def health_check(self):\n        return {healthy}\n\n    def get_tools(self):"
    return greeter(version).replace("    def get_tools(self):", check, 1)


async def test_reload_fixes_an_extension_the_supervisor_keeps_restarting(make_ext, settings_file):
    """The supervisor's recovery of the broken version stops; the fixed one runs."""
    ext_dir = make_ext("greeter", unhealthy_then("v1", healthy=False))
    path = settings_file(loader={"health_check_interval_s": 3600})
    async with running_kernel(path) as k:
        record = k.loader.records["greeter"]
        await k.supervision.check_all()  # unhealthy: stopped, and restarted with backoff
        assert record.status == "error" and "health check returned False" in (record.error or "")
        rewrite(ext_dir, unhealthy_then("v2", healthy=True))
        assert (await k.reloads.reload("greeter")).startswith("Reloaded greeter")
        assert record.live and record.instance.version == "v2"
        await k.supervision.check_all()
        assert record.live and k.wiring.is_wired("greeter")


async def test_a_call_gate_drain_stops_waiting_at_its_deadline():
    from core.extensions.access.call_gate import CallGate

    gate = CallGate("slowpoke")
    release = asyncio.Event()
    call = asyncio.create_task(gate.run(release.wait))
    await wait_for(lambda: gate.in_flight == 1)
    gate.close()
    assert await gate.drain(0.05) == 1  # still running at the deadline
    release.set()
    assert await call is True
    assert await gate.drain(1) == 0
