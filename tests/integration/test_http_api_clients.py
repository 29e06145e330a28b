"""The HTTP API as clients nobody here wrote use it (issue 30), with the official
``openai`` client: token usage, a conversation found from the history a client
resends, approvals answered from the same client, a retry joining the running
turn, errors in the OpenAI shape, and the Responses API."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from conftest import ext_code
from support.fake_openai import FakeOpenAIServer, ToolCall
from support.http_api_support import AUTH, TOKEN, api_settings, client, install, serving

ROCKETS = ext_code(
    """
    def get_tools(self):
        log = self.ctx.get_config("log")

        @function_tool
        async def launch(target: str) -> str:
            "Launch a rocket at a target."
            with open(log, "a") as f:
                f.write(target + "\\n")
            return f"launched at {target}"

        return [launch]
    """,
    header="from agents import function_tool\n",
)


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def settings(monkeypatch, ext_root, settings_file, model):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root, "scheduler")
    return api_settings(settings_file, model)


def user_texts(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def chat(*texts: str) -> list[dict[str, str]]:
    """user, assistant, user, …"""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]


async def test_usage_comes_with_every_reply_and_as_the_last_streamed_chunk(settings, model):
    model.script("Fine, thanks.", ToolCall("current_time", {}), "It is noon.")
    async with serving(settings) as (_, base):
        api = client(base)
        whole = await api.chat.completions.create(model="hearth", messages=chat("how are you?"))
        stream = await api.chat.completions.create(
            model="hearth",
            messages=chat("time?"),
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        command = await api.chat.completions.create(model="hearth", messages=chat("/status"))
    assert whole.choices[0].message.content == "Fine, thanks."
    assert whole.usage is not None and whole.usage.prompt_tokens > 0
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    # summed over the turn's two model calls (the tool call, then the answer)
    assert last.usage.prompt_tokens > whole.usage.prompt_tokens
    assert len(model.requests) == 3
    assert command.usage is not None and command.usage.total_tokens == 0  # no model call


async def test_clients_without_a_conversation_name_follow_their_history(settings, model):
    async with serving(settings) as (_, base):
        api = client(base)
        first = await api.chat.completions.create(model="hearth", messages=chat("I am Ada"))
        said = first.choices[0].message.content
        # "new chat": no history, a conversation of its own
        other = await api.chat.completions.create(model="hearth", messages=chat("I am Bob"))
        # the first chat goes on: its history continues the first conversation
        more = await api.chat.completions.create(
            model="hearth", messages=chat("I am Ada", said, "who am I?")
        )
        # an edited earlier message: a branch, with the client's copy as its context
        edited = await api.chat.completions.create(
            model="hearth", messages=chat("I am Eve", "echo: I am Eve", "who am I?")
        )
    assert edited.choices[0].message.content.endswith("who am I?")
    assert other.choices[0].message.content == "echo: I am Bob"
    assert more.choices[0].message.content == "echo: who am I?"
    assert user_texts(model.requests[1]) == ["I am Bob"]  # not Ada's conversation
    assert user_texts(model.requests[2]) == ["I am Ada", "who am I?"]
    branch = user_texts(model.requests[3])
    assert len(branch) == 1 and "User: I am Eve" in branch[0] and "who am I?" in branch[0]
    assert "Ada" not in str(model.requests[3]["messages"])


async def test_two_clients_with_the_same_first_exchange_keep_their_chats_apart(settings, model):
    """Issue 41: a chat is found from its history *and* its caller (ADR 0075). Two
    clients that cannot be told apart (one token, no client id) and open with the
    same exchange each branch with their own transcript; clients that name
    themselves (``X-Hearth-Client``) each continue their own conversation."""
    async with serving(settings) as (_, base):
        ada, bob = client(base), client(base)
        said = await ada.chat.completions.create(model="hearth", messages=chat("hi"))
        said = said.choices[0].message.content
        await bob.chat.completions.create(model="hearth", messages=chat("hi"))
        await ada.chat.completions.create(model="hearth", messages=chat("hi", said, "PIN 4711"))
        await bob.chat.completions.create(model="hearth", messages=chat("hi", said, "my PIN?"))
        carol = client(base, headers={"X-Hearth-Client": "carol"})
        dave = client(base, headers={"X-Hearth-Client": "dave"})
        for who in (carol, dave):
            await who.chat.completions.create(model="hearth", messages=chat("hello"))
        said = "echo: hello"
        await carol.chat.completions.create(model="hearth", messages=chat("hello", said, "PIN 1"))
        await dave.chat.completions.create(model="hearth", messages=chat("hello", said, "PIN?"))
    bobs = model.requests[3]
    assert "4711" not in json.dumps(bobs["messages"])  # ada's secret stays hers
    assert "my PIN?" in user_texts(bobs)[-1]
    assert user_texts(model.requests[6]) == ["hello", "PIN 1"]  # carol's own conversation
    assert user_texts(model.requests[7]) == ["hello", "PIN?"]  # dave's: no carol in it


async def test_an_idempotency_key_is_bound_to_its_caller_and_body(settings, model):
    """Issue 41: the same key with another body is a 422 naming the key, not
    another chat's reply; the same body gets the same reply once; another caller's
    key is its own (ADR 0075)."""
    key = {"Idempotency-Key": "req-1"}
    async with serving(settings) as (_, base):
        api = client(base)
        ask = {"model": "hearth", "messages": chat("book the train"), "extra_headers": key}
        first = await api.chat.completions.create(**ask)
        again = await api.chat.completions.create(**ask)
        with pytest.raises(openai.UnprocessableEntityError) as reused:
            await api.chat.completions.create(
                model="hearth", messages=chat("cancel everything"), extra_headers=key
            )
        phone = client(base, headers={"X-Hearth-Client": "phone"})
        theirs = await phone.chat.completions.create(
            model="hearth", messages=chat("cancel everything"), extra_headers=key
        )
    assert first.choices[0].message.content == "echo: book the train"
    assert again.choices[0].message.content == "echo: book the train"
    assert reused.value.status_code == 422
    error = reused.value.body
    assert error["code"] == "idempotency_key_reused" and "req-1" in error["message"]
    assert theirs.choices[0].message.content == "echo: cancel everything"
    assert len(model.requests) == 2  # the train once, the phone's request once


async def test_an_approval_is_answered_by_the_same_client(
    monkeypatch, ext_root, make_ext, settings_file, model, tmp_path
):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    log = tmp_path / "launched"
    make_ext("rockets", ROCKETS, {"config": {"log": str(log)}})
    path = api_settings(settings_file, model)
    text = path.read_text() + "policy: {profile: safe}\n"
    path.write_text(text)
    model.script(
        ToolCall("launch", {"target": "moon"}),
        "Another conversation, another turn.",
        "Launched at the moon.",
        ToolCall("launch", {"target": "mars"}),
        "Mars refused me.",
    )
    async with serving(path) as (_, base):
        api = client(base)
        asked = await api.chat.completions.create(
            model="hearth", messages=chat("launch at the moon"), user="ops"
        )
        question = asked.choices[0].message.content
        assert "Waiting for your answer" in question and "launch" in question
        assert not log.exists()
        # a yes from another conversation answers nothing: it is a message of its own
        other = await api.chat.completions.create(
            model="hearth", messages=chat("yes"), user="intruder"
        )
        assert other.choices[0].message.content == "Another conversation, another turn."
        assert not log.exists()
        yes = await api.chat.completions.create(model="hearth", messages=chat("yes"), user="ops")
        assert log.read_text() == "moon\n"
        # the web page's buttons: the question's id and options come in `hearth`
        asked = await api.chat.completions.create(
            model="hearth", messages=chat("and at mars"), user="ops"
        )
        found = asked.model_extra["hearth"]["questions"][0]
        assert [o["label"] for o in found["options"]] == ["Allow once", "Always allow", "Deny"]
        denied = await api.chat.completions.create(
            model="hearth", messages=chat(f"/deny {found['id']}"), user="ops"
        )
    assert yes.choices[0].message.content == "Launched at the moon."
    assert denied.choices[0].message.content == "Mars refused me."
    assert log.read_text() == "moon\n"


async def test_a_retry_after_a_timeout_joins_the_turn_still_running(
    monkeypatch, ext_root, settings_file
):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    with FakeOpenAIServer(delay_s=3.0) as slow:
        path = api_settings(settings_file, slow, reply_timeout_s=1)
        async with serving(path) as (_, base):
            retrying = openai.AsyncOpenAI(
                base_url=f"{base}/v1", api_key=TOKEN, max_retries=4, timeout=30
            )
            try:
                reply = await retrying.chat.completions.create(
                    model="hearth", messages=chat("slow question")
                )
            finally:
                await retrying.close()
        assert reply.choices[0].message.content == "echo: slow question"
        assert len(slow.requests) == 1  # the message ran once, not once per retry


async def test_errors_come_in_the_openai_shape(settings, model):
    async with serving(settings) as (_, base):
        deep = b'{"messages": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
        async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
            nested = await http.post("/v1/chat/completions", content=deep)
            no_input = await http.post("/v1/responses", json={"input": []})
            blank = [{"role": "user", "content": [{"type": "input_text", "text": "  "}]}]
            no_text = await http.post("/v1/responses", json={"input": blank})
            link = [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]
            linked = await http.post("/v1/responses", json={"input": link})
        with pytest.raises(openai.APIStatusError) as too_big:
            await client(base).chat.completions.create(model="hearth", messages=chat("x" * 300_000))
    assert nested.status_code == 400
    assert "nested too deeply" in nested.json()["error"]["message"]
    assert no_input.status_code == 400 and no_input.json()["error"]["param"] == "input"
    assert no_text.status_code == 400 and "no text" in no_text.json()["error"]["message"]
    assert linked.status_code == 400 and "data: URL" in linked.json()["error"]["message"]
    assert too_big.value.status_code == 413
    error = too_big.value.body
    assert error["code"] == "message_too_large" and "max_message_bytes" in error["message"]
    assert model.requests == []


async def test_the_responses_api_answers_whole_and_streamed(settings, model):
    model.script("Hello from Hearth.", "Streamed hello.")
    async with serving(settings) as (_, base):
        api = client(base)
        whole = await api.responses.create(model="hearth", input="hi there")
        stream = await api.responses.create(
            model="hearth",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "stream it"}]}],
            stream=True,
        )
        events = [event async for event in stream]
    assert whole.output_text == "Hello from Hearth."
    assert whole.usage is not None and whole.usage.input_tokens > 0
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Streamed hello."
    assert events[-1].response.output_text == "Streamed hello."
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert user_texts(model.requests[1]) == ["stream it"]


async def test_a_message_the_event_bus_refuses_for_its_size_is_a_413(
    monkeypatch, ext_root, settings_file, model
):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    path = api_settings(settings_file, model)
    path.write_text(path.read_text() + "events: {max_payload_bytes: 2048}\n")
    async with serving(path) as (_, base):
        with pytest.raises(openai.APIStatusError) as refused:
            await client(base).chat.completions.create(model="hearth", messages=chat("y" * 5000))
    assert refused.value.status_code == 413
    assert "events.max_payload_bytes" in refused.value.body["message"]
    assert model.requests == []
