"""A turn late in a long conversation costs what one early in it costs (issue 42, ADR 0078).

The model router's OpenAI client must not walk the whole conversation again on
every turn (the openai library's per-message type walk was most of why the
250th turn of one conversation took 2.75× the 10th), and must still send the
model exactly the bytes the plain client sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from agents import ModelSettings, Runner
from openai import AsyncOpenAI
from openai._utils import _transform

from core.agents import ModelRouter, Orchestrator, configure_tracing
from core.config import ModelsSettings
from core.tools import build_core_tools
from support.fake_openai import FakeOpenAIServer

configure_tracing(False)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def agent_for(srv: FakeOpenAIServer) -> Any:
    settings = ModelsSettings.model_validate(
        {
            "default": {"provider": "local", "model": "fake-model"},
            "providers": {
                "local": {"type": "openai_compatible", "base_url": srv.base_url, "max_retries": 0}
            },
        }
    )
    tools = build_core_tools(timezone="UTC", list_extensions=list, request_restart=lambda _: None)
    router = ModelRouter(settings, env={})
    return Orchestrator(model_router=router, timezone="UTC", tools=tools).agent()


def conversation(turns: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(turns):
        items.append({"role": "user", "content": f"question {i}"})
        items.append({"role": "assistant", "content": f"answer {i}"})
    return [*items, {"role": "user", "content": "and now?"}]


async def walked_per_turn(agent: Any, turns: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many typed dicts the client library walked for one turn after ``turns`` turns."""
    walked = 0
    real = _transform._async_transform_typeddict

    async def counting(data: Any, expected_type: type) -> Any:
        nonlocal walked
        walked += 1
        return await real(data, expected_type)

    monkeypatch.setattr(_transform, "_async_transform_typeddict", counting)
    result = await Runner.run(agent, conversation(turns))
    monkeypatch.setattr(_transform, "_async_transform_typeddict", real)
    assert result.final_output == "echo: and now?"
    return walked


async def test_a_turn_does_no_more_work_at_turn_250_than_at_turn_10(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = agent_for(server)
    early = await walked_per_turn(agent, 10, monkeypatch)
    late = await walked_per_turn(agent, 250, monkeypatch)

    assert late == early, f"the 250th turn walked {late} typed dicts, the 10th {early}"
    # and the model still read the whole conversation, in order
    sent = server.requests[-1]["messages"]
    assert len(sent) == 1 + 2 * 250 + 1
    assert sent[1] == {"role": "user", "content": "question 0"}
    assert sent[-2] == {"role": "assistant", "content": "answer 249"}
    assert sent[-1] == {"role": "user", "content": "and now?"}


async def test_long_conversation_tool_schemas_and_extra_body_reach_the_model(
    server: FakeOpenAIServer,
) -> None:
    agent = agent_for(server).clone(
        model_settings=ModelSettings(extra_body={"cache_hint": "chat-7"}, temperature=0.2)
    )
    await Runner.run(agent, conversation(30))

    body = server.requests[-1]
    assert body["cache_hint"] == "chat-7"
    assert body["temperature"] == 0.2
    assert len(body["messages"]) == 1 + 60 + 1
    assert "current_time" in {tool["function"]["name"] for tool in body["tools"]}


async def sent_bytes(kind: type[AsyncOpenAI], call: str, kwargs: dict[str, Any]) -> bytes:
    """The request body a ``kind`` client puts on the wire for ``call`` (nothing answers it)."""
    seen: list[bytes] = []

    def capture(request: httpx.Request) -> httpx.Response:
        seen.append(request.read())
        return httpx.Response(418, json={"error": {"message": "captured"}})

    client = kind(
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(capture)),
    )
    with pytest.raises(openai.APIStatusError):
        if call == "chat":
            await client.chat.completions.create(**kwargs)
        else:
            await client.responses.create(**kwargs)
    await client.close()
    assert len(seen) == 1
    return seen[0]


@pytest.mark.parametrize("call", ["chat", "responses"])
@pytest.mark.parametrize("extra_body", [None, {"messages": "theirs", "input": "theirs", "k": 1}])
async def test_the_bytes_sent_are_the_plain_clients(
    call: str, extra_body: dict[str, Any] | None
) -> None:
    from core.agents.openai_client import ConversationOpenAI

    kwargs: dict[str, Any] = {"model": "m", "temperature": 0.5, "extra_body": extra_body}
    kwargs["messages" if call == "chat" else "input"] = conversation(5)
    plain = await sent_bytes(AsyncOpenAI, call, kwargs)
    ours = await sent_bytes(ConversationOpenAI, call, kwargs)
    assert ours == plain, (json.loads(plain), json.loads(ours))
