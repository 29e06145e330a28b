"""Hostile isolated extensions: each misbehaves, the kernel keeps serving.

Hosts are given small limits (256 MB, 1 s per call) so the suite stays fast.
Tests that depend on bubblewrap are skipped where it cannot run.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from agents.tool_context import ToolContext

from conftest import ext_code
from core.events.models import Event
from core.extensions.contract import TurnContext
from core.extensions.isolation.kernel.confinement import probe
from core.kernel.commands.table import parse_command
from support.harness import running_kernel, wait_for

TURN = TurnContext(channel_id="cli_channel", user_id="u1")
ISOLATION = {"call_timeout_s": 1, "memory_mb": 256, "restart_backoff_max_s": 1}
LOADER = {"lifecycle_timeout_s": 30}
needs_bwrap = pytest.mark.skipif(not probe().available, reason=probe().detail)


def settings(settings_file, **isolation):
    return settings_file(isolation={**ISOLATION, **isolation}, loader=LOADER)


def isolated(extra: dict | None = None) -> dict:
    return {"isolation": "process", **(extra or {})}


async def command(kernel, text: str) -> str:
    return await kernel.commands.run(parse_command(text), TURN)


async def call_tool(kernel, ext_id: str, name: str) -> str:
    tool = next(t for t in kernel.loader.records[ext_id].tools if t.name == name)
    ctx = ToolContext(context=TURN, tool_name=name, tool_call_id="c1", tool_arguments="{}")
    return str(await tool.on_invoke_tool(ctx, "{}"))


async def answers_quickly(kernel, text: str = "/help", within_s: float = 1.0) -> None:
    started = time.monotonic()
    reply = await command(kernel, text)
    assert reply and "failed" not in reply
    assert time.monotonic() - started < within_s, f"{text} took too long"


async def restarted(kernel, ext_id: str, old_pid: int, reason: str) -> None:
    record = kernel.loader.records[ext_id]
    await wait_for(lambda: record.error is not None and reason in record.error, 10)
    await wait_for(lambda: record.status.value == "active" and record.error is None, 20)
    assert record.instance.host_pid not in (None, old_pid)


# --------------------------------------------------------------------- CPU and memory

SPINNER = ext_code(
    header="from agents import function_tool",
    body="""
    def get_tools(self):
        @function_tool
        async def spin() -> str:
            "Spin forever on the event loop."
            while True:
                pass

        @function_tool
        def spin_thread() -> str:
            "Spin forever in a worker thread."
            while True:
                pass

        @function_tool
        async def nap() -> str:
            "Sleep for an hour."
            import asyncio
            await asyncio.sleep(3600)
            return "woke up"

        @function_tool
        def echo() -> str:
            "Answer at once."
            return "echo"

        return [spin, spin_thread, nap, echo]
    """,
)


async def test_hung_calls_time_out_and_an_unresponsive_host_is_replaced(make_ext, settings_file):
    make_ext("spinner", SPINNER, isolated())
    async with running_kernel(settings(settings_file)) as kernel:
        instance = kernel.loader.instance("spinner")
        pid = instance.host_pid

        # a sleeping call times out; the host still answers, so it is kept
        reply = await call_tool(kernel, "spinner", "nap")
        assert reply == (
            "error: tool nap failed: tool 'nap' of isolated extension 'spinner' "
            "did not answer within 1 s"
        )
        assert await call_tool(kernel, "spinner", "echo") == "echo"
        await wait_for(lambda: not instance.probing)
        assert instance.host_pid == pid

        # a spinning call blocks the host's loop: timeout, then the host is killed and restarted
        spinning = asyncio.create_task(call_tool(kernel, "spinner", "spin"))
        await answers_quickly(kernel)
        assert "did not answer within 1 s" in await spinning
        await restarted(kernel, "spinner", pid, "unresponsive after tool 'spin' timed out")
        assert await call_tool(kernel, "spinner", "echo") == "echo"

        # spinning in a thread leaves the host answering, but burning CPU: also replaced
        pid = instance.host_pid
        assert "did not answer within 1 s" in await call_tool(kernel, "spinner", "spin_thread")
        await restarted(kernel, "spinner", pid, "CPU after tool 'spin_thread' timed out")
        assert await call_tool(kernel, "spinner", "echo") == "echo"


HOG = ext_code(
    header="from agents import function_tool",
    body="""
    def get_tools(self):
        @function_tool(failure_error_function=None)
        def hog() -> str:
            "Allocate memory without end."
            chunks = []
            while True:
                chunks.append(bytearray(32 * 1024 * 1024))

        @function_tool
        def limits() -> str:
            "Report the limits in force."
            import json, os, resource
            return json.dumps({
                "as": resource.getrlimit(resource.RLIMIT_AS),
                "cpu": resource.getrlimit(resource.RLIMIT_CPU),
                "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
                "cwd": os.getcwd(),
            })

        return [hog, limits]
    """,
)


async def test_memory_hog_is_stopped_by_its_limit_while_the_kernel_answers(
    make_ext, settings_file, tmp_path: Path
):
    make_ext("hog", HOG, isolated())
    async with running_kernel(settings(settings_file, call_timeout_s=10)) as kernel:
        hogging = asyncio.create_task(call_tool(kernel, "hog", "hog"))
        await answers_quickly(kernel)
        reply = await hogging
        assert reply.startswith("error: tool hog failed: MemoryError")
        limits = json.loads(await call_tool(kernel, "hog", "limits"))
        mb = 256 * 1024 * 1024
        assert limits["as"] == [mb, mb]  # hard == soft: the plugin cannot raise it
        assert limits["cpu"] == [600, 600]
        assert limits["nofile"] == [256, 256]
        assert limits["cwd"] == str(tmp_path / "data" / "extensions" / "hog")


# --------------------------------------------------------------------- crashes

CRASHER = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import ctypes, os

        async def exit_now(args, turn):
            os._exit(3)

        async def segfault(args, turn):
            ctypes.string_at(0)

        async def alive(args, turn):
            return f"alive in {os.getpid()}"

        return [
            Command("exit_now", "os._exit(3)", exit_now),
            Command("segfault", "read address 0", segfault),
            Command("alive", "answer", alive),
        ]
    """,
)


async def test_a_dying_host_marks_the_extension_error_and_is_restarted(make_ext, settings_file):
    make_ext("crasher", CRASHER, isolated())
    async with running_kernel(settings(settings_file)) as kernel:
        instance = kernel.loader.instance("crasher")
        pid = instance.host_pid
        reply = await command(kernel, "/exit_now")
        assert reply == (
            "/exit_now failed: HostUnavailableError: isolated extension 'crasher' is not running: "
            "plugin host exited with code 3"
        )
        await answers_quickly(kernel)
        await restarted(kernel, "crasher", pid, "plugin host exited with code 3")
        assert (await command(kernel, "/alive")).startswith("alive in ")

        pid = instance.host_pid
        assert "signal 11 (SIGSEGV)" in await command(kernel, "/segfault")
        await restarted(kernel, "crasher", pid, "plugin host exited with signal 11")
        assert (await command(kernel, "/alive")).startswith("alive in ")


# --------------------------------------------------------------------- permissions

SNOOP = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import json, os

        def attempt(fn):
            try:
                return fn()
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        async def snoop(args, turn):
            victim = self.ctx.data_dir.parent / "victim" / "diary.txt"
            return json.dumps({
                "declared": self.ctx.get_secret("SNOOP_TOKEN"),
                "undeclared": attempt(lambda: self.ctx.get_secret("VICTIM_TOKEN")),
                "env": sorted(os.environ),
                "diary": attempt(victim.read_text),
                "own": attempt(lambda: (self.ctx.data_dir / "mine.txt").write_text("x")),
            })

        return [Command("snoop", "look around", snoop)]
    """,
)


async def test_undeclared_secrets_and_other_data_dirs_are_out_of_reach(
    make_ext, settings_file, monkeypatch, tmp_path: Path
):
    monkeypatch.setenv("SNOOP_TOKEN", "mine")
    monkeypatch.setenv("VICTIM_TOKEN", "theirs")
    make_ext("snoop", SNOOP, isolated({"secrets": ["SNOOP_TOKEN"]}))
    (tmp_path / "data" / "extensions" / "victim").mkdir(parents=True)
    (tmp_path / "data" / "extensions" / "victim" / "diary.txt").write_text("dear diary")
    async with running_kernel(settings(settings_file)) as kernel:
        report = json.loads(await command(kernel, "/snoop"))
    assert report["declared"] == "mine"
    assert report["undeclared"] == (
        "SecretNotDeclaredError: extension 'snoop' is not permitted to read secret "
        "'VICTIM_TOKEN' (not declared in its manifest `secrets`)"
    )
    assert not {"SNOOP_TOKEN", "VICTIM_TOKEN"} & set(report["env"])
    assert set(report["env"]) <= {"PATH", "HOME", "LANG", "MALLOC_ARENA_MAX", "PWD"}
    assert report["own"] == 1
    if probe().available:
        assert report["diary"].startswith("FileNotFoundError")


PUBLISHER = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command

        async def publish(args, turn):
            try:
                await self.ctx.emit(args, {"x": 1})
            except Exception as exc:
                return f"refused: {type(exc).__name__}: {exc}"
            return "published"

        async def listen(args, turn):
            async def handler(event):
                pass
            try:
                self.ctx.subscribe_event(args, handler)
            except Exception as exc:
                return f"refused: {type(exc).__name__}: {exc}"
            return "subscribed"

        return [Command("publish", "emit", publish), Command("listen", "subscribe", listen)]
    """,
)


async def test_topics_outside_the_manifest_permissions_are_refused(make_ext, settings_file):
    permissions = {"emit": ["allowed.*"], "subscribe": ["allowed.*"]}
    make_ext("publisher", PUBLISHER, isolated({"permissions": permissions}))
    topics: list[str] = []

    async def collect(event: Event) -> None:
        topics.append(event.topic)

    async with running_kernel(settings(settings_file)) as kernel:
        kernel.bus.subscribe("*", collect, "test/collect")
        assert await command(kernel, "/publish allowed.news") == "published"
        assert await command(kernel, "/publish secret.news") == (
            "refused: PermissionDeniedError: extension 'publisher' is not permitted to emit topic 'secret.news'"
        )
        assert await command(kernel, "/listen allowed.x") == "subscribed"
        assert await command(kernel, "/listen user.message") == (
            "refused: PermissionDeniedError: extension 'publisher' is not permitted to subscribe to 'user.message'"
        )
        await wait_for(lambda: "allowed.news" in topics)
    assert "secret.news" not in topics


FLOODER = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import asyncio

        async def flood(args, turn):
            async def refused():
                try:
                    await self.ctx.emit("forbidden", {})
                except Exception:
                    pass
            for i in range(20000):
                self.ctx.logger.warning("flood line %d", i)
            await asyncio.gather(*(refused() for _ in range(3000)))
            return "flooded"

        return [Command("flood", "flood the kernel", flood)]
    """,
)


async def test_a_message_flood_is_bounded_and_the_kernel_keeps_answering(
    make_ext, settings_file, caplog
):
    make_ext("flooder", FLOODER, isolated({"permissions": {"emit": ["allowed"]}}))
    async with running_kernel(settings(settings_file, call_timeout_s=30)) as kernel:
        flooding = asyncio.create_task(command(kernel, "/flood"))
        while not flooding.done():
            await answers_quickly(kernel, within_s=1.0)
            await asyncio.sleep(0.05)
        assert await flooding == "flooded"
    lines = [r for r in caplog.records if r.name == "ext.flooder" and "flood line" in r.message]
    assert 0 < len(lines) < 2000  # rate-limited, not 20000
