"""The openai_compatible path end to end: ModelRouter -> real `openai` client -> HTTP.

A scripted Chat Completions server on 127.0.0.1 (tests/support/fake_openai.py) stands
in for Ollama / vLLM / llama.cpp; everything in between is the real code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from agents import Runner

from core.agents import (
    DeclarativeAgentAdapter,
    ModelFailedError,
    ModelRouter,
    Orchestrator,
    configure_tracing,
)
from core.config import ModelsSettings
from core.extensions.loading.manifest import load_manifest
from core.tools import build_core_tools
from support.fake_openai import Failure, FakeOpenAIServer, ToolCall

configure_tracing(False)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def router_for(srv: FakeOpenAIServer, **provider: Any) -> ModelRouter:
    settings = ModelsSettings.model_validate(
        {
            "default": {"provider": "local", "model": "fake-model"},
            "providers": {
                "local": {
                    "type": "openai_compatible",
                    "base_url": srv.base_url,
                    "max_retries": 0,
                    **provider,
                }
            },
        }
    )
    return ModelRouter(settings, env={})


def orchestrator(router: ModelRouter, restarts: list[str]) -> Orchestrator:
    tools = build_core_tools(timezone="UTC", list_extensions=list, request_restart=restarts.append)
    return Orchestrator(model_router=router, timezone="UTC", tools=tools)


async def test_tool_call_round_trip_without_streaming(server: FakeOpenAIServer) -> None:
    server.script(ToolCall("request_restart", {"reason": "user asked"}), "Restarting now.")
    restarts: list[str] = []
    router = router_for(server)

    result = await Runner.run(orchestrator(router, restarts).agent(), "please restart")

    assert result.final_output == "Restarting now."
    assert restarts == ["user asked"]
    first, second = server.requests
    assert first["model"] == "fake-model"
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][0]["content"].startswith("You are Hearth")
    assert first["messages"][-1] == {"role": "user", "content": "please restart"}
    assert {t["function"]["name"] for t in first["tools"]} == {
        "current_time",
        "list_extensions",
        "request_restart",
    }
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "restart requested" in tool_message["content"]
    await router.aclose()


async def test_streamed_run_with_a_tool_call(server: FakeOpenAIServer) -> None:
    server.script(ToolCall("current_time", {}), "It is later than you think.")
    router = router_for(server)

    stream = Runner.run_streamed(orchestrator(router, []).agent(), "what time is it?")
    deltas: list[str] = []
    tool_calls: list[str] = []
    async for event in stream.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)
        elif event.type == "run_item_stream_event" and event.name == "tool_called":
            tool_calls.append(event.item.raw_item.name)  # type: ignore[union-attr]

    assert stream.final_output == "It is later than you think."
    assert "".join(deltas) == "It is later than you think."
    assert len(deltas) > 1
    assert tool_calls == ["current_time"]
    assert all(r["stream"] for r in server.requests)
    tool_result = json.loads(server.requests[1]["messages"][-1]["content"])
    assert tool_result["timezone"].startswith("UTC")
    await router.aclose()


async def test_empty_script_echoes_the_user(server: FakeOpenAIServer) -> None:
    router = router_for(server)
    result = await Runner.run(orchestrator(router, []).agent(), "ping 42")
    assert result.final_output == "echo: ping 42"
    await router.aclose()


async def test_http_500_surfaces_naming_the_model_provider_and_status(
    server: FakeOpenAIServer,
) -> None:
    server.script(Failure(500, "model crashed"))
    router = router_for(server)
    with pytest.raises(ModelFailedError) as failed:
        await Runner.run(orchestrator(router, []).agent(), "hi")
    assert str(failed.value) == "the model fake-model at provider local failed (500): model crashed"
    assert isinstance(failed.value.__cause__, openai.InternalServerError)
    await router.aclose()


async def test_declarative_agent_over_http_honours_its_time_budget(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    ext_dir = tmp_path / "slowpoke"
    ext_dir.mkdir()
    manifest = {
        "id": "slowpoke",
        "name": "Slowpoke",
        "agent": {"instructions": "Be slow.", "limits": {"time_budget_ms": 300}},
    }
    (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    server.delay_s = 1.0
    router = router_for(server)
    agent = DeclarativeAgentAdapter(load_manifest(ext_dir), ext_dir, router, lambda _: [])

    started = time.monotonic()
    response = await agent.invoke("anything")

    assert time.monotonic() - started < 0.9
    assert response.status == "error"
    assert response.error == "time_budget_ms=300 exceeded"
    server.delay_s = 0.0
    assert (await agent.invoke("fast now")).content == "echo: fast now"
    await router.aclose()
