"""Fallback chains (ADR 0061): two scripted model servers, the first failing each
way a provider fails — refused connection, no answer before the timeout, 429
with ``retry-after``, 500 — and the turn answered by the second; a 400 is the
request's fault and is reported, the second never asked. A chain that falls
over between steps keeps the tool the first model's step ran; a model that
failed cools down and is skipped until it has cooled."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest
from agents import Agent, Runner, function_tool

from core.agents import ModelFailedError, ModelRouter, configure_tracing
from core.agents.fallback import AllModelsFailedError, ModelHealth, falls_over
from core.config import ModelsSettings
from support.fake_openai import Failure, FakeOpenAIServer, Hang, ToolCall, closed_port_url

configure_tracing(False)


def chain(first_url: str, second_url: str, **first: Any) -> ModelsSettings:
    """``first`` then ``second`` (both serve ``fake-model``); ``first`` adds to the
    first provider's fields (``timeout_s``, ``max_retries``)."""

    def provider(url: str, **extra: Any) -> dict[str, Any]:
        return {"type": "openai_compatible", "base_url": url, "api_key": "x", **extra}

    return ModelsSettings.model_validate(
        {
            "default": {
                "provider": "first",
                "model": "fake-model",
                "fallbacks": [{"provider": "second", "model": "fake-model"}],
            },
            "providers": {
                "first": provider(first_url, **{"max_retries": 0, **first}),
                "second": provider(second_url, max_retries=0),
            },
        }
    )


async def ask(router: ModelRouter, text: str = "hello", tools: list[Any] | None = None) -> str:
    agent = Agent(name="t", instructions="be brief", model=router.get_model(), tools=tools or [])
    result = await Runner.run(agent, text)
    return str(result.final_output)


FAILURES = {
    "refused connection": ([], {}),
    "hang past the timeout": ([Hang(30)], {"timeout_s": 1.0}),
    "429 with retry-after": (
        [Failure(429, "slow down", retry_after=0.5)] * 2,
        {"max_retries": 1},
    ),
    "500": ([Failure(500, "model crashed")] * 2, {"max_retries": 1}),
}


@pytest.mark.parametrize("kind", list(FAILURES))
async def test_a_failing_first_model_hands_the_turn_to_the_second(kind: str) -> None:
    script, first_fields = FAILURES[kind]
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        url = closed_port_url() if kind == "refused connection" else first.base_url
        first.script(*script)
        second.script("Second model here.")
        router = ModelRouter(chain(url, second.base_url, **first_fields), env={})
        started = time.monotonic()
        answer = await ask(router)
        elapsed = time.monotonic() - started
        await router.aclose()
    assert answer == "Second model here."  # nothing extra in the answer
    assert len(second.requests) == 1
    assert len(first.requests) == len(script)  # the provider's own retries, then the chain
    assert router.health.last_served == "second/fake-model"
    assert router.health.cooling("first/fake-model") > 0
    assert "first/fake-model" in router.describe("orchestrator")
    print(f"\nfall-over time, {kind}: {elapsed:.2f} s")
    assert elapsed < {"hang past the timeout": 20.0}.get(kind, 10.0)


async def test_a_400_is_reported_and_never_handed_on() -> None:
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(Failure(400, "unknown parameter: temprature"))
        router = ModelRouter(chain(first.base_url, second.base_url), env={})
        with pytest.raises(ModelFailedError) as refused:
            await ask(router)
        await router.aclose()
    assert str(refused.value) == (
        "the model fake-model at provider first refused the request (400): "
        "unknown parameter: temprature"
    )
    assert isinstance(refused.value.__cause__, openai.BadRequestError)
    assert second.requests == []
    assert router.health.cooling("first/fake-model") == 0  # not the model's fault


async def test_falling_over_mid_run_keeps_the_tool_that_ran() -> None:
    runs: list[str] = []

    @function_tool
    def launch(target: str) -> str:
        """Launch at a target."""
        runs.append(target)
        return f"launched at {target}"

    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(ToolCall("launch", {"target": "moon"}, call_id="c1"), Failure(503, "gone"))
        second.script("Launched at the moon.")
        router = ModelRouter(chain(first.base_url, second.base_url), env={})
        answer = await ask(router, "launch", tools=[launch])
        await router.aclose()
    assert answer == "Launched at the moon."
    assert runs == ["moon"]  # the tool ran once, before the failure
    handed = second.requests[0]["messages"]
    assert any(m["role"] == "tool" and "launched at moon" in m["content"] for m in handed)


async def test_every_model_failing_names_each_failure() -> None:
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(Failure(500, "first is down"))
        second.script(Failure(502, "second is down"))
        router = ModelRouter(chain(first.base_url, second.base_url), env={})
        with pytest.raises(AllModelsFailedError) as caught:
            await ask(router)
        await router.aclose()
    message = str(caught.value)
    assert "first/fake-model" in message and "first is down" in message
    assert "second/fake-model" in message and "second is down" in message


async def test_a_cooling_model_is_skipped_then_tried_again_once_cooled() -> None:
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(Failure(500, "down"), "First is back.")
        second.script("Second, turn 1.", "Second, turn 2.")
        router = ModelRouter(chain(first.base_url, second.base_url), env={})
        now = [1000.0]
        router.health._clock = lambda: now[0]  # the breakers' clock, moved by the test
        assert await ask(router) == "Second, turn 1."
        assert await ask(router) == "Second, turn 2."  # cooling: not asked at all
        assert len(first.requests) == 1
        assert "cooling" in router.describe("orchestrator")
        now[0] += router.health.cooldown_s + 1
        assert await ask(router) == "First is back."
        assert router.health.cooling_models() == {}
        await router.aclose()


async def test_streamed_turns_fall_over_before_the_first_chunk() -> None:
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(Failure(500, "down"))
        second.script("Streamed from the second.")
        router = ModelRouter(chain(first.base_url, second.base_url), env={})
        agent = Agent(name="t", instructions="be brief", model=router.get_model())
        result = Runner.run_streamed(agent, "hello")
        async for _ in result.stream_events():
            pass
        await router.aclose()
    assert result.final_output == "Streamed from the second."


def test_the_breaker_doubles_its_cool_down_and_honours_retry_after() -> None:
    now = [0.0]
    health = ModelHealth(cooldown_s=10, cooldown_max_s=60, clock=lambda: now[0])
    error = RuntimeError("x")
    assert health.failed("m", error) == 10
    assert health.failed("m", error) == 20
    assert health.failed("m", error) == 40
    assert health.failed("m", error) == 60  # capped
    health.succeeded("m")
    assert health.cooling("m") == 0
    assert health.failed("m", error) == 10  # a success forgets the failures


@pytest.mark.parametrize(
    ("status", "hands_on"),
    [
        *[(status, False) for status in (400, 401, 403, 404, 422)],
        *[(status, True) for status in (408, 409, 429, 500, 503)],
    ],
)
def test_which_statuses_fall_over(status: int, hands_on: bool) -> None:
    import httpx

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, request=request)
    error = openai.APIStatusError("x", response=response, body=None)
    assert falls_over(error) is hands_on


async def test_a_chain_of_one_tries_its_model_even_while_it_cools_and_names_it() -> None:
    """A chain of one has no order to choose: after a failure its model cools down
    (``/status`` says so) and the next turn asks it all the same, counted as served."""
    with FakeOpenAIServer() as only:
        only.script(Failure(500, "down"), "Back again.")
        settings = chain(only.base_url, only.base_url).model_copy(deep=True)
        assert settings.default is not None
        settings.default.fallbacks = []
        router = ModelRouter(settings, env={})
        with pytest.raises(ModelFailedError, match="fake-model at provider first failed"):
            await ask(router)
        assert "first/fake-model" in router.health.cooling_models()
        assert await ask(router) == "Back again."
        assert router.health.last_served == "first/fake-model"
        assert router.health.cooling_models() == {}
        await router.aclose()
