"""MCP servers from settings (issue 8 part 5): a real stdio server written with
the ``mcp`` package is started by the kernel, and the orchestrator
(ScriptedModel) calls its tool. Failures are reported, never fatal; a server
that dies is reconnected with backoff (issue 12 item 10b)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from core.cli.doctor import run_doctor
from core.config import SettingsError, load_settings
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

DEMO_SERVER = Path(__file__).parents[1] / "fixtures" / "mcp_demo_server.py"
MISSING_COMMAND = "/nonexistent/hearth-mcp-server"


@pytest.fixture
def http_server_url() -> Iterator[str]:
    """The demo server on streamable HTTP at 127.0.0.1 (a free port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(DEMO_SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"demo MCP server exited with {process.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"demo MCP server not listening on {port} within {timeout} s")


def demo_server(**extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(DEMO_SERVER)], **extra}


def replies(kernel) -> list[str]:
    return [entry[2] for entry in kernel.loader.instance("capture")._log()]


def tool_names(call) -> set[str]:
    return {getattr(tool, "name", "") for tool in call.tools}


def tool_output(call, call_id: str) -> str:
    return next(
        str(item["output"])
        for item in call.input
        if isinstance(item, dict) and item.get("call_id") == call_id and "output" in item
    )


def mcp_state(kernel, name: str = "demo"):
    return next(s for s in kernel.mcp.statuses() if s.name == name)


async def test_orchestrator_calls_a_tool_of_a_stdio_mcp_server(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel(
        [
            [function_call("shout", {"text": "tea is ready"}, call_id="c1")],
            [assistant_message("The server shouted back.")],
        ]
    )
    path = settings_file(mcp={"servers": {"demo": demo_server()}})
    async with running_kernel(path, model=model) as kernel:
        channel = kernel.loader.instance("capture")
        await channel.say("shout that tea is ready")
        await wait_for(lambda: replies(kernel))
        await channel.say("/status")
        await wait_for(lambda: len(replies(kernel)) == 2)
    assert replies(kernel)[0] == "The server shouted back."
    assert {"shout", "lucky_number"} <= tool_names(model.calls[0])
    assert "TEA IS READY!" in str(model.calls[1].input)  # the tool's result reached the model
    assert "demo: connected — 2 tool(s): shout, lucky_number" in replies(kernel)[1]
    model.assert_complete()


async def test_orchestrator_calls_a_tool_over_streamable_http(
    make_ext, settings_file, http_server_url
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel(
        [[function_call("lucky_number", {}, call_id="c1")], [assistant_message("It is 42.")]]
    )
    servers = {"web": {"url": http_server_url, "headers": {"X-Hearth-Test": "1"}}}
    async with running_kernel(settings_file(mcp={"servers": servers}), model=model) as kernel:
        await kernel.loader.instance("capture").say("what is the lucky number?")
        await wait_for(lambda: replies(kernel))
    assert replies(kernel) == ["It is 42."]
    assert "42" in str(model.calls[1].input)
    model.assert_complete()


async def test_allowed_tools_hide_the_other_tools_of_a_server(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("ok")]])
    servers = {"demo": demo_server(allowed_tools=["lucky_number"])}
    async with running_kernel(settings_file(mcp={"servers": servers}), model=model) as kernel:
        await kernel.loader.instance("capture").say("what tools do you have?")
        await wait_for(lambda: replies(kernel))
    names = tool_names(model.calls[0])
    assert "lucky_number" in names and "shout" not in names


async def test_a_server_that_fails_is_reported_and_the_kernel_still_answers(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Still here.")]])
    servers = {"broken": {"command": MISSING_COMMAND}, "demo": demo_server()}
    async with running_kernel(settings_file(mcp={"servers": servers}), model=model) as kernel:
        channel = kernel.loader.instance("capture")
        await channel.say("/status")
        await wait_for(lambda: replies(kernel))
        await channel.say("hello?")
        await wait_for(lambda: len(replies(kernel)) == 2)
    status, answer = replies(kernel)
    assert "MCP servers (1/2 connected):" in status
    assert f"broken: failed — command {MISSING_COMMAND!r}:" in status
    assert "No such file or directory" in status
    assert answer == "Still here."
    assert "shout" in tool_names(model.calls[0])  # the healthy server is still attached


def test_doctor_reports_each_mcp_server(settings_file, capsys):
    servers = {"broken": {"command": MISSING_COMMAND}, "demo": demo_server(), "off": {}}
    servers["off"] = {"url": "http://127.0.0.1:9/mcp", "enabled": False}
    path = settings_file(mcp={"servers": servers}, models={"default": None, "providers": {}})
    assert run_doctor(load_settings(path)) == 1
    out = capsys.readouterr().out
    assert "FAIL mcp server broken: failed — command" in out
    assert "ok   mcp server demo: connected — 2 tool(s)" in out
    assert "ok   mcp server off: disabled" in out


@pytest.mark.parametrize(
    "server",
    [{"args": ["x"]}, {"command": "x", "url": "http://127.0.0.1:9/mcp"}],
    ids=["neither", "both"],
)
def test_a_server_needs_exactly_one_of_command_or_url(settings_file, server):
    path = settings_file(mcp={"servers": {"weather": server}})
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    assert "mcp.servers.weather: needs exactly one of `command` (stdio) or `url`" in str(err.value)


RECONNECT = {"health_interval_s": 0.1, "reconnect_initial_s": 0.2, "reconnect_max_s": 0.5}


async def test_a_server_that_dies_is_reconnected_and_its_tools_work_again(
    make_ext, settings_file, tmp_path
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    pidfile, gate = tmp_path / "demo.pid", tmp_path / "keep-down"
    server = demo_server(args=[str(DEMO_SERVER), "--pidfile", str(pidfile), "--gate", str(gate)])
    model = ScriptedModel(
        [
            [function_call("shout", {"text": "anyone there"}, call_id="down")],
            [assistant_message("The shouting server is away.")],
            [function_call("shout", {"text": "tea is ready"}, call_id="up")],
            [assistant_message("It shouted.")],
        ]
    )
    mcp = {"servers": {"demo": server}, "reconnect_max_attempts": 1000, **RECONNECT}
    async with running_kernel(settings_file(mcp=mcp), model=model) as kernel:
        channel = kernel.loader.instance("capture")
        first_pid = int(pidfile.read_text())
        gate.touch()  # every restart of the server exits at once until the gate is gone
        os.kill(first_pid, signal.SIGKILL)
        await wait_for(lambda: mcp_state(kernel).state == "reconnecting", timeout=30)
        await wait_for(lambda: mcp_state(kernel).attempt >= 2, timeout=30)  # retries fail
        await channel.say("/status")
        await wait_for(lambda: replies(kernel))

        started = time.monotonic()
        await channel.say("shout that anyone is there")
        await wait_for(lambda: len(replies(kernel)) == 2, timeout=30)
        outage_turn_s = time.monotonic() - started

        gate.unlink()
        await wait_for(lambda: mcp_state(kernel).state == "connected", timeout=30)
        await channel.say("shout that tea is ready")
        await wait_for(lambda: len(replies(kernel)) == 3, timeout=30)
        assert int(pidfile.read_text()) != first_pid  # a new server process
    status, outage, back = replies(kernel)
    assert "MCP servers (0/1 connected):" in status
    assert "demo: reconnecting (attempt " in status and ", next in " in status
    assert outage == "The shouting server is away."
    down = tool_output(model.calls[1], "down")
    assert "McpServerUnavailableError: MCP server 'demo' is reconnecting (attempt" in down
    assert outage_turn_s < 10  # failed fast (a call waits up to call_timeout_s = 60 s)
    assert back == "It shouted."
    assert "TEA IS READY!" in tool_output(model.calls[3], "up")
    model.assert_complete()


async def test_a_server_that_stays_down_is_failed_after_the_bounded_attempts(
    make_ext, settings_file, tmp_path
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    pidfile, gate = tmp_path / "demo.pid", tmp_path / "keep-down"
    server = demo_server(args=[str(DEMO_SERVER), "--pidfile", str(pidfile), "--gate", str(gate)])
    mcp = {"servers": {"demo": server}, "reconnect_max_attempts": 2, **RECONNECT}
    async with running_kernel(settings_file(mcp=mcp)) as kernel:
        gate.touch()
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
        await wait_for(lambda: mcp_state(kernel).state == "failed", timeout=30)
        await kernel.loader.instance("capture").say("/status")
        await wait_for(lambda: replies(kernel))
    assert "demo: failed — gave up after 2 reconnect attempt(s): command " in replies(kernel)[0]


def _running(pid: int) -> bool:
    """Whether ``pid`` is alive (a killed process waiting to be reaped is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone while read: ESRCH
        return False
    return state not in ("Z", "X")


async def test_a_call_that_finds_the_server_dead_fails_fast_and_starts_the_reconnect(
    make_ext, settings_file, tmp_path
):
    """No health ping in time (60 s): the failing call itself notices the death."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    pidfile = tmp_path / "demo.pid"
    server = demo_server(args=[str(DEMO_SERVER), "--pidfile", str(pidfile)])
    model = ScriptedModel(
        [
            [function_call("lucky_number", {}, call_id="c1")],
            [assistant_message("The server is away.")],
        ]
    )
    mcp = {"servers": {"demo": server}, **RECONNECT, "health_interval_s": 60}
    async with running_kernel(settings_file(mcp=mcp), model=model) as kernel:
        first_pid = int(pidfile.read_text())
        os.kill(first_pid, signal.SIGKILL)
        await wait_for(lambda: not _running(first_pid))
        assert mcp_state(kernel).state == "connected"  # nobody has noticed yet
        started = time.monotonic()
        await kernel.loader.instance("capture").say("what is the lucky number?")
        await wait_for(lambda: replies(kernel), timeout=30)
        turn_s = time.monotonic() - started
        await wait_for(lambda: mcp_state(kernel).state == "connected", timeout=30)
        assert int(pidfile.read_text()) != first_pid
    assert replies(kernel) == ["The server is away."]
    output = tool_output(model.calls[1], "c1")
    assert "McpServerUnavailableError: MCP server 'demo' is reconnecting" in output
    assert turn_s < 10
    model.assert_complete()
