"""Hearth as an MCP server, driven by the ``mcp`` package's own client over stdio
(``main.py mcp`` spawned as a desktop assistant would): the person's tools are
listed with annotations that follow their side effects, ``remember`` then
``recall`` round-trip, a reminder set through MCP fires on the kernel's
channel, ``ask`` runs a turn whose side-effecting call waits for the user's
yes, the person's memories and reminders are resources, and a client named in
``people:`` as a member sees only their own data (ADR 0059)."""

from __future__ import annotations

import re
import sys
from contextlib import asynccontextmanager

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import PROJECT_ROOT, ext_code
from support.bundled import copy_bundled
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.rocket_ext import ROCKETS
from support.scheduler_helpers import install_scheduler, notified


@pytest.fixture
def mcp_settings(ext_root, make_ext, settings_file):
    copy_bundled(ext_root, "memory", "kv")
    install_scheduler(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("rockets", ROCKETS)

    def write(**sections):
        return settings_file(
            channels={"default": "capture"},
            events={"poll_interval_s": 0.05},  # the kernel sees the front's requests quickly
            policy={"profile": "safe"},
            extensions={"memory": {"embeddings": {"backend": "none"}}},
            **sections,
        )

    return write


@asynccontextmanager
async def mcp_client(settings, client="local"):
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            str(PROJECT_ROOT / "main.py"),
            "mcp",
            "--settings",
            str(settings),
            "--client",
            client,
        ],
        cwd=str(PROJECT_ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


READ_ONLY = ("recall", "list_schedules", "kv_get", "kv_list")
ADDITIVE = ("remember", "schedule_once")  # they add, never change or remove
DESTRUCTIVE = ("forget", "kv_delete", "cancel_schedule", "kv_set")  # kv_set overwrites


def assert_hints_follow_the_spec(tools):
    """MCP's tool annotations: ``readOnlyHint`` only for a tool that changes nothing
    (clients may run those without asking); ``destructiveHint`` for one that removes
    or overwrites."""
    hints = {
        name: (tools[name].annotations.readOnlyHint, tools[name].annotations.destructiveHint)
        for name in (*READ_ONLY, *ADDITIVE, *DESTRUCTIVE)
    }
    assert hints == {
        **{name: (True, False) for name in READ_ONLY},
        **{name: (False, False) for name in ADDITIVE},
        **{name: (False, True) for name in DESTRUCTIVE},
    }


async def test_tools_are_listed_with_annotations_and_remember_then_recall(mcp_settings):
    path = mcp_settings()
    async with running_kernel(path, model=ScriptedModel([])), mcp_client(path) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert {"remember", "recall", "forget", "kv_get", "kv_set"} <= set(tools)
        assert {"schedule_once", "list_schedules", "cancel_schedule", "ask"} <= set(tools)
        assert "launch" not in tools and "request_restart" not in tools  # not the person's data
        assert_hints_follow_the_spec(tools)
        assert "query" in tools["recall"].inputSchema["required"]
        stored = await mcp.call_tool("remember", {"text": "My sister Ada lives in Lyon."})
        assert not stored.isError, text_of(stored)
        found = await mcp.call_tool("recall", {"query": "Where does Ada live?", "limit": 5})
        assert "Lyon" in text_of(found)
        set_ = await mcp.call_tool("kv_set", {"key": "colour", "value": '"green"'})
        assert text_of(set_) == "stored 'colour'"
        assert "green" in text_of(await mcp.call_tool("kv_get", {"key": "colour"}))
        memories = await mcp.read_resource("hearth://memories")
        assert "Lyon" in memories.contents[0].text
        wrong = await mcp.call_tool("launch", {"target": "moon"})
        assert wrong.isError and "no tool 'launch' for MCP clients" in text_of(wrong)


async def test_a_reminder_set_through_mcp_fires_on_the_kernels_channel(mcp_settings):
    path = mcp_settings()
    async with running_kernel(path, model=ScriptedModel([])) as kernel, mcp_client(path) as mcp:
        # far enough ahead to be listed first: the front's first tool listing loads the
        # extensions apart (~1.5 s, more on a loaded machine) before the resource is read
        result = await mcp.call_tool("schedule_once", {"text": "stretch", "delay": "8s"})
        assert text_of(result).startswith("scheduled"), text_of(result)
        reminders = await mcp.read_resource("hearth://reminders")
        assert "stretch" in reminders.contents[0].text
        await wait_for(lambda: any("stretch" in t for t in notified(kernel)), timeout=30)


async def test_ask_runs_a_turn_and_a_side_effecting_call_waits_for_the_yes(mcp_settings):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    path = mcp_settings()
    async with running_kernel(path, model=model) as kernel, mcp_client(path) as mcp:
        asked = text_of(await mcp.call_tool("ask", {"text": "launch at the moon"}))
        assert 'Allow launch(target="moon")?' in asked
        assert kernel.loader.instance("rockets").log() == []  # nothing ran while waiting
        assert re.search(r"/approve \w+", asked)
        answer = text_of(await mcp.call_tool("ask", {"text": "yes"}))
        assert answer == "Launched at the moon."  # the turn went on once the person said yes
        assert kernel.loader.instance("rockets").log() == ["moon"]
    model.assert_complete()


async def test_a_member_client_sees_only_their_own_data(mcp_settings):
    people = {
        "ann": {"role": "owner", "identities": ["cli:local", "mcp:desktop"]},
        "bob": {"role": "member", "identities": ["mcp:bob-laptop"]},
    }
    path = mcp_settings(people=people)
    async with running_kernel(path, model=ScriptedModel([])) as kernel:
        async with mcp_client(path, "desktop") as ann:
            await ann.call_tool("remember", {"text": "Ann's PIN hint is the blue door."})
            await ann.call_tool("kv_set", {"key": "secret", "value": '"ann-only"'})
            mine = text_of(await ann.call_tool("recall", {"query": "PIN hint"}))
            assert "blue door" in mine  # the owner's client reads the owner's memory
        async with mcp_client(path, "bob-laptop") as bob:
            found = text_of(await bob.call_tool("recall", {"query": "PIN hint"}))
            assert "blue door" not in found and "no memories match" in found
            assert "ann-only" not in text_of(await bob.call_tool("kv_get", {"key": "secret"}))
            assert (
                "blue door" not in (await bob.read_resource("hearth://memories")).contents[0].text
            )
            # bob's reminder never reaches the owner's default channel: it waits for bob
            await bob.call_tool("schedule_once", {"text": "bob's pills", "delay": "1s"})
            await wait_for(lambda: kernel.mcp_desk.channel.unread("bob-laptop"), timeout=20)
            status = text_of(await bob.call_tool("ask", {"text": "/status"}))
            assert status.startswith("⏰ Reminder: bob's pills")
            assert not any("pills" in text for text in notified(kernel))


async def test_without_a_running_kernel_the_tools_are_listed_and_a_call_says_so(
    mcp_settings, tmp_path
):
    path = mcp_settings(turns={"timeout_s": 1})
    async with mcp_client(path) as mcp:  # no kernel ever ran on this data dir
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert {"remember", "recall", "forget", "kv_get", "cancel_schedule", "ask"} <= set(tools)
        assert "launch" not in tools
        assert_hints_follow_the_spec(tools)  # from the extensions' declarations on disk
        assert "query" in tools["recall"].inputSchema["required"]
        result = await mcp.call_tool("ask", {"text": "hello"})
        recalled = await mcp.call_tool("recall", {"query": "x"})
    for answer in (result, recalled):
        said = text_of(answer)
        assert answer.isError and "no Hearth kernel has run (data dir" in said
        assert "start it with `python main.py`" in said
    assert not (tmp_path / "data" / "events.db").exists()  # the front made no journal
    async with running_kernel(path, model=ScriptedModel([])):
        pass  # a kernel ran once, then stopped: its journal is there, nobody answers
    async with mcp_client(path) as mcp:
        result = await mcp.call_tool("remember", {"text": "x"})
    assert result.isError and "no running Hearth kernel answered within" in text_of(result)


async def test_an_extension_cannot_forge_a_request_of_an_mcp_client(make_ext, settings_file):
    forger = ext_code(
        """
        async def forge(self):
            await self.ctx.emit(
                "system.kernel.mcp.request",
                {"request_id": "x", "client": "local", "op": "call", "expires_at": "9e12",
                 "name": "kv_get", "arguments": '{"key": "secret"}'},
            )
        """
    )
    make_ext("forger", forger)
    path = settings_file()
    async with running_kernel(path, model=ScriptedModel([])) as kernel:
        with pytest.raises(Exception, match="kernel control is the user's"):
            await kernel.loader.instance("forger").forge()
