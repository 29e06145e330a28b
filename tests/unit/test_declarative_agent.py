"""Declarative agents (SPEC §4): a manifest `agent:` section becomes an AgentProvider.

Driven by ScriptedModel through the real Runner; the extension directory and
manifest are real files. Every limit must end the run with status "error"
naming the limit — never an exception, never a hang.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from agents import FunctionTool, Tool, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage

from core.agents import (
    DeclarativeAgentAdapter,
    ModelRouter,
    PromptTemplateError,
    configure_tracing,
)
from core.config import ModelsSettings
from core.extensions.contract import AgentProvider, Extension
from core.extensions.loading.manifest import load_manifest

configure_tracing(False)


def write_agent(
    root: Path, agent: dict[str, Any], *, prompt: str | None = None, ext_id: str = "helper"
) -> Path:
    ext_dir = root / ext_id
    ext_dir.mkdir()
    manifest = {
        "id": ext_id,
        "name": "Helper Agent",
        "description": "Answers questions about the user's notes.",
        "agent": agent,
    }
    (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    if prompt is not None:
        (ext_dir / "prompt.jinja2").write_text(prompt, encoding="utf-8")
    return ext_dir


def adapter(
    ext_dir: Path,
    model: ScriptedModel | None,
    tools: dict[str, list[Tool]] | None = None,
    seen: list[list[str]] | None = None,
) -> DeclarativeAgentAdapter:
    overrides = {"*": model} if model is not None else None
    router = ModelRouter(ModelsSettings(), env={}, overrides=overrides)

    def resolve_tools(uses: list[str]) -> list[Tool]:
        if seen is not None:
            seen.append(uses)
        return [t for ext in uses for t in (tools or {}).get(ext, [])]

    return DeclarativeAgentAdapter(load_manifest(ext_dir), ext_dir, router, resolve_tools)


def tool_named(name: str, fn: Callable[..., Any]) -> FunctionTool:
    return function_tool(fn, name_override=name)


async def test_instructions_are_prompt_file_then_manifest_instructions(tmp_path: Path) -> None:
    ext_dir = write_agent(
        tmp_path,
        {"instructions": "Always answer in one sentence.", "parameters": {"tone": "dry"}},
        prompt="You manage notes. Use a {{ tone }} tone.\n",
    )
    model = ScriptedModel([[assistant_message("Noted.")]])
    agent = adapter(ext_dir, model)

    response = await agent.invoke("summarise my notes")

    assert response.status == "success"
    assert response.content == "Noted."
    expected = "You manage notes. Use a dry tone.\n\nAlways answer in one sentence."
    assert agent.resolved_instructions == expected
    assert model.first_call is not None
    assert model.first_call.system_instructions == expected
    assert model.first_call.input[0]["content"] == "summarise my notes"
    model.assert_complete()


async def test_adapter_is_an_extension_and_agent_provider(tmp_path: Path) -> None:
    ext_dir = write_agent(tmp_path, {"model": "gpt-5-nano", "instructions": "x"})
    agent = adapter(ext_dir, None)
    assert isinstance(agent, Extension)
    assert isinstance(agent, AgentProvider)
    descriptor = agent.get_agent_descriptor()
    assert descriptor.name == "helper"
    assert descriptor.description == "Answers questions about the user's notes."
    assert descriptor.integration_mode == "tool"
    assert agent.agent_id == "helper"
    assert agent.agent_model == "gpt-5-nano"
    assert agent.health_check()


async def test_uses_tools_are_offered_and_called(tmp_path: Path) -> None:
    calls: list[str] = []

    def lookup(key: str) -> str:
        """Look a key up."""
        calls.append(key)
        return f"value-of-{key}"

    ext_dir = write_agent(tmp_path, {"uses_tools": ["kv", "core_tools"]})
    model = ScriptedModel(
        [
            [function_call("kv_get", {"key": "color"}, call_id="c1")],
            [assistant_message("Your color is value-of-color.")],
        ]
    )
    seen: list[list[str]] = []
    tools: dict[str, list[Tool]] = {"kv": [tool_named("kv_get", lookup)]}
    agent = adapter(ext_dir, model, tools, seen)

    response = await agent.invoke("what is my color?")

    assert response.status == "success", response
    assert response.content == "Your color is value-of-color."
    assert seen == [["kv", "core_tools"]]
    assert calls == ["color"]
    assert model.first_call is not None
    assert [t.name for t in model.first_call.tools] == ["kv_get"]
    model.assert_complete()


async def test_max_turns_exceeded_is_an_error_naming_the_limit(tmp_path: Path) -> None:
    ext_dir = write_agent(tmp_path, {"uses_tools": ["kv"], "limits": {"max_turns": 2}})
    model = ScriptedModel([[function_call("ping", {}, call_id=f"c{i}")] for i in range(3)])
    agent = adapter(ext_dir, model, {"kv": [tool_named("ping", lambda: "pong")]})

    response = await agent.invoke("loop forever")

    assert response.status == "error"
    assert response.error == "max_turns=2 exceeded"
    assert "2 turns" in response.content


async def test_time_budget_exceeded_by_a_slow_tool_ends_within_the_budget(tmp_path: Path) -> None:
    async def slow() -> str:
        """Takes far too long."""
        await asyncio.sleep(30)
        return "late"

    ext_dir = write_agent(tmp_path, {"uses_tools": ["kv"], "limits": {"time_budget_ms": 300}})
    model = ScriptedModel([[function_call("slow", {}, call_id="c1")]])
    agent = adapter(ext_dir, model, {"kv": [tool_named("slow", slow)]})

    started = time.monotonic()
    response = await agent.invoke("do the slow thing")
    elapsed = time.monotonic() - started

    assert response.status == "error"
    assert response.error == "time_budget_ms=300 exceeded"
    assert elapsed < 1.5


async def test_token_budget_exceeded_is_an_error(tmp_path: Path) -> None:
    ext_dir = write_agent(
        tmp_path, {"uses_tools": ["kv"], "limits": {"max_tokens_per_invocation": 1000}}
    )
    model = ScriptedModel(
        [
            [function_call("ping", {}, call_id="c1")],
            [function_call("ping", {}, call_id="c2")],
            [assistant_message("never reached")],
        ],
        default_usage=Usage(requests=1, input_tokens=500, output_tokens=100, total_tokens=600),
    )
    agent = adapter(ext_dir, model, {"kv": [tool_named("ping", lambda: "pong")]})

    response = await agent.invoke("spend tokens")

    assert response.status == "error"
    assert response.error == "max_tokens_per_invocation=1000 exceeded (1200 tokens used)"
    assert response.tokens_used == 1200
    assert len(model.calls) == 2


async def test_no_model_configured_answers_with_the_how_to_line(tmp_path: Path) -> None:
    ext_dir = write_agent(tmp_path, {"instructions": "x"})
    agent = adapter(ext_dir, None)  # default settings, empty environment: no OPENAI_API_KEY

    response = await agent.invoke("hello")

    assert response.status == "error"
    assert response.error is not None
    assert response.error.startswith("No model configured: set OPENAI_API_KEY")
    assert response.content == response.error


async def test_model_failure_is_an_error_response_not_an_exception(tmp_path: Path) -> None:
    ext_dir = write_agent(tmp_path, {"instructions": "x"})
    model = ScriptedModel([RuntimeError("connection reset by peer")])
    agent = adapter(ext_dir, model)

    response = await agent.invoke("hello")

    assert response.status == "error"
    assert response.error == "connection reset by peer"
    assert "helper failed" in response.content


async def test_broken_prompt_template_names_the_file(tmp_path: Path) -> None:
    ext_dir = write_agent(tmp_path, {"instructions": "x"}, prompt="Hello {{ missing_param }}")
    agent = adapter(ext_dir, ScriptedModel())
    with pytest.raises(PromptTemplateError) as info:
        _ = agent.resolved_instructions
    assert str(ext_dir / "prompt.jinja2") in str(info.value)
    assert "missing_param" in str(info.value)
