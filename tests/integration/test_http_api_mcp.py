"""Hearth as an MCP server over the streamable HTTP transport at the HTTP API's
``/mcp``, driven by the ``mcp`` package's own client (ADR 0062): the token
holder's tools are listed, ``remember`` then ``recall`` round-trip, a token
whose identity is a member's never reads the owner's memories, no or a wrong
token is refused with 401, ``ask`` runs a turn whose side-effecting call waits
for the person's yes (as over stdio, ADR 0059), and an extension without
``permissions.mcp_server`` cannot reach the desk."""

from __future__ import annotations

import re
from contextlib import asynccontextmanager

import httpx
import pytest
from agents.testing import ScriptedModel, assistant_message, function_call
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_mcp_server import assert_hints_follow_the_spec

from conftest import ext_code
from core.extensions.contract import TurnContext
from core.kernel.commands.table import parse_command
from support.bundled import copy_bundled
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel
from support.http_api_support import AUTH, EXTENSION_ID, TOKEN, install, serving
from support.rocket_ext import ROCKETS
from support.scheduler_helpers import install_scheduler


@pytest.fixture
def mcp_settings(monkeypatch, ext_root, make_ext, settings_file):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root, "memory", "kv")
    install_scheduler(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("rockets", ROCKETS)

    def write(**sections):
        return settings_file(
            channels={"default": "capture"},
            policy={"profile": "safe"},
            extensions={
                "memory": {"embeddings": {"backend": "none"}},
                EXTENSION_ID: {"listen": "127.0.0.1:0"},
            },
            **sections,
        )

    return write


@asynccontextmanager
async def mcp_client(base_url, token=TOKEN):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_tools_are_listed_and_remember_then_recall_over_http(mcp_settings):
    path = mcp_settings()
    async with serving(path, model=ScriptedModel([])) as (_, base), mcp_client(base) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert {"remember", "recall", "forget", "kv_get", "kv_set", "ask"} <= set(tools)
        assert {"schedule_once", "list_schedules", "cancel_schedule"} <= set(tools)
        assert "launch" not in tools  # not the person's data
        assert_hints_follow_the_spec(tools)  # as over stdio: one server for both fronts
        stored = await mcp.call_tool("remember", {"text": "My sister Ada lives in Lyon."})
        assert not stored.isError, text_of(stored)
        found = await mcp.call_tool("recall", {"query": "Where does Ada live?", "limit": 5})
        assert "Lyon" in text_of(found)
        assert "Lyon" in (await mcp.read_resource("hearth://memories")).contents[0].text
        wrong = await mcp.call_tool("launch", {"target": "moon"})
        assert wrong.isError and "no tool 'launch' for MCP clients" in text_of(wrong)


async def test_a_members_token_sees_only_the_members_data(mcp_settings):
    people = {
        "ann": {"role": "owner", "identities": ["cli:local", "mcp:desktop"]},
        "bob": {"role": "member", "identities": ["http:default"]},
    }
    path = mcp_settings(people=people)
    async with serving(path, model=ScriptedModel([])) as (kernel, base):
        owner = kernel.mcp_desk  # the owner's own MCP client (stdio's desk, ADR 0059)
        await owner.serve("mcp", "desktop", "call", "remember", '{"text": "PIN: blue door"}')
        mine = await owner.serve("mcp", "desktop", "call", "recall", '{"query": "PIN"}')
        assert "blue door" in mine.text
        async with mcp_client(base) as bob:  # the API token is bob's identity
            found = text_of(await bob.call_tool("recall", {"query": "PIN"}))
            assert "blue door" not in found and "no memories match" in found
            memories = (await bob.read_resource("hearth://memories")).contents[0].text
            assert "blue door" not in memories
            await bob.call_tool("remember", {"text": "Bob parks on level 3."})
        theirs = await owner.serve("mcp", "desktop", "call", "recall", '{"query": "parks"}')
        assert "level 3" not in theirs.text


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}])
async def test_mcp_without_the_token_is_refused(mcp_settings, headers):
    path = mcp_settings()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "intruder", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with serving(path, model=ScriptedModel([])) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            answer = await http.post("/mcp", json=initialize, headers={**accept, **headers})
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"] == "Bearer"
            assert "bearer token" in answer.json()["error"]["message"]
            ok = await http.post("/mcp", json=initialize, headers={**accept, **AUTH})
            assert ok.status_code == 200  # the same request with the token is served
            session = {"mcp-session-id": ok.headers["mcp-session-id"], **accept, **headers}
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            hijack = await http.post("/mcp", json=listing, headers=session)
            assert hijack.status_code == 401  # a session's id is no token


async def test_ask_over_http_waits_for_the_yes_before_a_side_effect(mcp_settings):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    path = mcp_settings()
    async with serving(path, model=model) as (kernel, base), mcp_client(base) as mcp:
        asked = text_of(await mcp.call_tool("ask", {"text": "launch at the moon"}))
        assert 'Allow launch(target="moon")?' in asked
        assert re.search(r"/approve \w+", asked)
        assert kernel.loader.instance("rockets").log() == []  # nothing ran while waiting
        answer = text_of(await mcp.call_tool("ask", {"text": "yes"}))
        assert "Launched at the moon." in answer  # the turn went on once the person said yes
        assert kernel.loader.instance("rockets").log() == ["moon"]
    model.assert_complete()


async def test_an_extension_without_the_permission_cannot_reach_the_desk(make_ext, settings_file):
    code = """
from core.extensions.sdk import BaseExtension

class Prober(BaseExtension):
    async def probe(self):
        return await self.context.mcp_request("call", "anyone", "recall", '{"query": "x"}')
"""
    make_ext("prober", code, {"id": "prober", "entrypoint": "main:Prober"})
    async with running_kernel(settings_file(), model=ScriptedModel([])) as kernel:
        with pytest.raises(Exception, match=r"permissions\.mcp_server: true"):
            await kernel.loader.instance("prober").probe()


PROBER = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command

        async def probe(args, turn):
            mine = await self.ctx.mcp_request("call", "mallory", "recall", '{"query": "PIN"}')
            out = [mine.error or mine.text]
            forged = {"op": "list", "user_id": "local", "channel_id": "cli_channel"}
            try:
                await self.ctx._peer.call("ctx.mcp_request", forged)
            except Exception as exc:
                out.append(f"{type(exc).__name__}: {exc}")
            return "\\n".join(out)

        return [Command("probe", "Ask the MCP desk.", probe)]
    """
)


async def test_an_isolated_extension_reaches_the_desk_only_for_its_own_channel(
    ext_root, make_ext, settings_file
):
    copy_bundled(ext_root, "memory")
    make_ext(
        "prober",
        PROBER,
        {"isolation": "process", "permissions": {"mcp_server": True}},
    )
    people = {"ann": {"role": "owner", "identities": ["cli:local", "mcp:desktop"]}}
    path = settings_file(
        people=people,
        isolation={"call_timeout_s": 20},
        extensions={"memory": {"embeddings": {"backend": "none"}}},
    )
    async with running_kernel(path, model=ScriptedModel([])) as kernel:
        assert kernel.loader.records["prober"].status.value == "active"
        await kernel.mcp_desk.serve("mcp", "desktop", "call", "remember", '{"text": "PIN 4711"}')
        turn = TurnContext(channel_id="capture", user_id="local")
        reply = await kernel.commands.run(parse_command("/probe"), turn)
        found, forged = reply.splitlines()
        assert "4711" not in found and "no memories match" in found  # prober:mallory is no one
        assert forged == "FrameError: ctx.mcp_request: unknown key 'channel_id'"
