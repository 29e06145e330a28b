"""Post-processors through the HTTP API with the real ``openai`` client: the
``extensions`` field asks for them with no ``#`` in the text, merged with inline
tokens, and ``GET /v1/postprocess/{turn_id}`` gives a turn's results back (issue 46)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from support.fake_openai import FakeOpenAIServer
from support.http_api_support import TOKEN, api_settings, client, install, serving

pytestmark = pytest.mark.usefixtures("postprocessors")


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def settings(monkeypatch, ext_root, settings_file, model):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    return api_settings(settings_file, model)


def user_texts(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_the_extensions_field_runs_post_processors_with_no_tag_in_the_text(settings, model):
    async with serving(settings) as (_, base):
        api = client(base)
        reply = await api.chat.completions.create(
            model="hearth",
            messages=[{"role": "user", "content": "is the disk full?"}],
            user="dana",
            extra_body={"extensions": [{"name": "json", "param": "minimal"}, {"name": "decision"}]},
        )
        turn_id = reply.model_extra["hearth"]["turn_id"]
        kept = await api.get(f"/postprocess/{turn_id}", cast_to=object)
    assert user_texts(model.requests[-1])[-1] == "is the disk full?"  # the model saw no token
    results = reply.model_extra["hearth"]["postprocess"]
    assert list(results) == ["json", "decision"]  # in the order asked
    assert results["json"]["content"] == {
        "query": "is the disk full?",
        "answer": "echo: is the disk full?",
    }
    assert kept["turn_id"] == turn_id and kept["query"] == "is the disk full?"
    assert kept["results"]["decision"]["output_target"] == "silent"
    assert kept["usage"]["postprocess_input"] == 0


async def test_inline_tokens_and_the_field_merge_and_the_typed_param_wins(settings, model):
    async with serving(settings) as (_, base):
        api = client(base)
        answer = await api.responses.create(
            model="hearth",
            input="count the rows #json:minimal",
            user="erin",
            extra_body={"extensions": [{"name": "json", "param": "full"}, {"name": "classify"}]},
        )
    hearth = answer.model_extra["hearth"]
    assert user_texts(model.requests[-1])[-1] == "count the rows"
    assert list(hearth["postprocess"]) == ["json", "classify"]
    assert hearth["postprocess"]["json"]["metadata"]["param"] == "minimal"
    assert hearth["postprocess"]["classify"]["content"]["primary_category"] == "data_report"


async def test_a_post_processor_not_activated_or_misspelt_is_refused_by_name(settings, model):
    async with serving(settings) as (_, base):
        api = client(base)
        with pytest.raises(openai.BadRequestError) as unknown:
            await api.chat.completions.create(
                model="hearth",
                messages=[{"role": "user", "content": "hi"}],
                user="finn",
                extra_body={"extensions": [{"name": "nosuch"}]},
            )
        with pytest.raises(openai.BadRequestError) as bad_param:
            await api.chat.completions.create(
                model="hearth",
                messages=[{"role": "user", "content": "hi"}],
                user="finn",
                extra_body={"extensions": [{"name": "json", "param": "a b"}]},
            )
        with pytest.raises(openai.NotFoundError):
            await api.get("/postprocess/12@34.5", cast_to=object)
    assert "#nosuch" in unknown.value.message and "json" in unknown.value.message
    assert unknown.value.body["param"] == "extensions[0].name"
    assert bad_param.value.body["param"] == "extensions[0].param"
    assert model.requests == []  # nothing was journaled, no turn ran
