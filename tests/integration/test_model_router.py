"""ModelRouter (SPEC §4): which model serves which agent, and what happens without one."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from agents.testing import ScriptedModel

from core.agents import ModelNotConfiguredError, ModelRouter, configure_tracing
from core.agents.fallback import FallbackModel
from core.agents.tool_view import OnDemandModel
from core.config import ModelsSettings
from support.fake_openai import FakeOpenAIServer

configure_tracing(False)


def models(**data: Any) -> ModelsSettings:
    return ModelsSettings.model_validate(data)


def served_by(model: object) -> object:
    """The first model of the chain ``get_model`` hands out (under the on-demand tool
    view a server on this machine gets, ADR 0097)."""
    assert isinstance(model, FallbackModel)
    first = model.chain[0][1]
    return first.model if isinstance(first, OnDemandModel) else first


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LOCAL = {"type": "openai_compatible", "base_url": "http://127.0.0.1:9/v1"}


def test_default_settings_use_openai_responses_model_when_key_is_set() -> None:
    router = ModelRouter(ModelsSettings(), env={"OPENAI_API_KEY": "sk-test"})
    model = served_by(router.get_model("orchestrator"))
    assert isinstance(model, OpenAIResponsesModel)
    assert model.model == "gpt-5-mini"
    assert router.describe() == "openai:openai/gpt-5-mini"


def test_resolution_order_explicit_then_agent_mapping_then_default() -> None:
    router = ModelRouter(
        models(
            default={"provider": "openai", "model": "gpt-5-mini"},
            providers={"openai": {"type": "openai"}, "local": LOCAL},
            agents={"notes": {"provider": "local", "model": "llama3"}},
        ),
        env={"OPENAI_API_KEY": "sk-test"},
    )
    assert router.describe("someone") == "openai:openai/gpt-5-mini"
    assert router.describe("notes") == "openai_compatible:local/llama3"
    # agent.model keeps the agent's provider ...
    assert router.describe("notes", "qwen2.5:7b") == "openai_compatible:local/qwen2.5:7b"
    # ... or names one as provider/model; an unknown prefix is part of the model id.
    assert router.describe("someone", "local/mistral") == "openai_compatible:local/mistral"
    assert router.describe("someone", "org/model-x") == "openai:openai/org/model-x"

    notes = served_by(router.get_model("notes"))
    assert isinstance(notes, OpenAIChatCompletionsModel)
    assert notes.model == "llama3"


def test_missing_api_key_gives_one_line_how_to() -> None:
    router = ModelRouter(ModelsSettings(), env={})
    with pytest.raises(ModelNotConfiguredError) as info:
        router.get_model("orchestrator")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("No model configured:")
    assert "OPENAI_API_KEY" in message and "settings.yaml" in message
    assert "openai_compatible" in message
    assert not router.is_configured()
    assert router.describe().startswith("No model configured: set OPENAI_API_KEY")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (models(default=None), "models.default is null"),
        (
            models(default={"provider": "ollama", "model": "llama3"}),
            "provider 'ollama' (models.default) is not defined",
        ),
        (
            models(
                default={"provider": "local", "model": "llama3"},
                providers={"local": {"type": "openai_compatible"}},
            ),
            "provider 'local' is openai_compatible but has no base_url",
        ),
    ],
)
def test_unusable_settings_name_what_to_fix(settings: ModelsSettings, expected: str) -> None:
    router = ModelRouter(settings, env={"OPENAI_API_KEY": "sk-test"})
    with pytest.raises(ModelNotConfiguredError, match=r"^No model configured: ") as info:
        router.get_model()
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_openai_compatible_needs_no_key_and_no_network_at_resolution() -> None:
    # The port is closed: resolving must not connect (a dead model never fails a load).
    router = ModelRouter(
        models(
            default={"provider": "local", "model": "llama3"},
            providers={"local": {**LOCAL, "base_url": f"http://127.0.0.1:{closed_port()}/v1"}},
        ),
        env={},
    )
    first, second = served_by(router.get_model("a")), served_by(router.get_model("b"))
    assert isinstance(first, OpenAIChatCompletionsModel)
    assert isinstance(second, OpenAIChatCompletionsModel)
    assert router.is_configured("a")


def test_overrides_replace_models_for_tests() -> None:
    everyone, special = ScriptedModel(), ScriptedModel()
    router = ModelRouter(
        models(default=None), env={}, overrides={"*": everyone, "special": special}
    )
    assert router.get_model("orchestrator") is everyone
    assert router.get_model("special") is special
    assert router.is_configured()
    assert router.describe("special") == "override:ScriptedModel"


async def test_check_providers_reports_reachable_unreachable_and_missing_key() -> None:
    with FakeOpenAIServer() as srv:
        router = ModelRouter(
            models(
                default={"provider": "up", "model": "fake-model"},
                providers={
                    "up": {"type": "openai_compatible", "base_url": srv.base_url},
                    "down": {
                        "type": "openai_compatible",
                        "base_url": f"http://127.0.0.1:{closed_port()}/v1",
                    },
                    "openai": {"type": "openai", "api_key_env": "OPENAI_API_KEY"},
                },
                agents={"x": {"provider": "up", "model": "not-served"}},
            ),
            env={},
        )
        started = time.monotonic()
        checks = {c.name: c for c in await router.check_providers(timeout_s=2.0)}
        elapsed = time.monotonic() - started
        await router.aclose()

    assert elapsed < 3.0
    assert checks["up"].ok
    assert "fake-model" in checks["up"].detail
    assert "configured but not offered: not-served" in checks["up"].detail
    assert not checks["down"].ok
    assert "127.0.0.1" in checks["down"].detail
    assert not checks["openai"].ok
    assert "OPENAI_API_KEY" in checks["openai"].detail
