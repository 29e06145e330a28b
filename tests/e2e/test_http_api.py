"""The HTTP API channel with the real ``openai`` client: Hearth answers as the model
``hearth``, keeps the history itself, streams, runs tools, and answers a retried
POST once (ADR 0024)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import openai
import pytest

from conftest import PROJECT_ROOT
from support.fake_openai import FakeOpenAIServer, ToolCall
from support.harness import running_kernel
from support.http_api_support import TOKEN, api_settings, client, install, serving


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


async def test_a_completion_continues_the_conversation_hearth_keeps(settings, model):
    async with serving(settings) as (_, base):
        api = client(base)
        first = await api.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": "hello"}], user="alice"
        )
        # a client resending its whole history: only the newest message is new
        second = await api.chat.completions.create(
            model="hearth",
            messages=[
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "something the client made up"},
                {"role": "user", "content": "and again"},
            ],
            user="alice",
        )
        other = await api.chat.completions.create(
            model="hearth",
            messages=[{"role": "user", "content": "I am Bob"}],
            extra_headers={"X-Hearth-Conversation": "bob"},
        )
    assert first.choices[0].message.content == "echo: hello"
    assert first.model == "hearth" and first.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "echo: and again"
    assert other.choices[0].message.content == "echo: I am Bob"
    alice_second, bob = model.requests[1], model.requests[2]
    assert user_texts(alice_second) == ["hello", "and again"]
    assert "something the client made up" not in str(alice_second)
    assert user_texts(bob) == ["I am Bob"]


async def test_a_streamed_reply_arrives_in_chunks_and_ends_with_done(settings, model):
    model.script("one two three four")
    async with serving(settings) as (_, base):
        stream = await client(base).chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": "count"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
    pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert "".join(pieces) == "one two three four"
    assert len(pieces) >= 4  # the model's deltas, as they came
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert {c.model for c in chunks} == {"hearth"}
    assert model.requests[-1].get("stream") is True  # the model streamed for it


async def test_a_whole_reply_is_asked_of_the_model_whole(settings, model):
    """A client that does not read a stream gets a turn run unstreamed (cheaper for
    the kernel, ADR 0065); one that does still gets the model's deltas."""
    async with serving(settings) as (_, base):
        api = client(base)
        whole = await api.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": "all at once"}], user="dan"
        )
        stream = await api.chat.completions.create(
            model="hearth",
            messages=[{"role": "user", "content": "bit by bit"}],
            user="dan",
            stream=True,
        )
        pieces = [c.choices[0].delta.content async for c in stream if c.choices[0].delta.content]
    assert whole.choices[0].message.content == "echo: all at once"
    assert "".join(pieces) == "echo: bit by bit"
    assert [bool(r.get("stream")) for r in model.requests] == [False, True]


async def test_a_tool_call_runs_inside_hearth(settings, model):
    model.script(ToolCall("current_time", {}), "It is tea time.")
    async with serving(settings) as (_, base):
        reply = await client(base).chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": "what time is it?"}]
        )
    assert reply.choices[0].message.content == "It is tea time."
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"


async def test_commands_work(settings, model):
    async with serving(settings) as (_, base):
        reply = await client(base).chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": "/status"}]
        )
    assert reply.choices[0].message.content.startswith("Uptime:")
    assert model.requests == []


async def test_models_lists_hearth_and_a_wrong_token_is_refused(settings):
    async with serving(settings) as (_, base):
        models = await client(base).models.list()
        hearth = await client(base).models.retrieve("hearth")
        with pytest.raises(openai.AuthenticationError) as refused:
            await client(base, token="wrong").chat.completions.create(
                model="hearth", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.AuthenticationError):
            await client(base, token="wrong").models.list()
    assert [m.id for m in models.data] == ["hearth"] and hearth.id == "hearth"
    assert refused.value.status_code == 401
    assert "HEARTH_API_TOKEN" in str(refused.value)


async def test_a_retried_post_is_answered_once(settings, model):
    model.delay_s = 0.3  # the retry arrives while the first is still waiting
    key = {"Idempotency-Key": "order-42"}
    ask = {"model": "hearth", "messages": [{"role": "user", "content": "book it"}]}
    async with serving(settings) as (_, base):
        api = client(base)
        first, retry = await asyncio.gather(
            api.chat.completions.create(**ask, extra_headers=key),
            api.chat.completions.create(**ask, extra_headers=key),
        )
        later = await api.chat.completions.create(**ask, extra_headers=key)
        stream = await api.chat.completions.create(**ask, extra_headers=key, stream=True)
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
        fresh = await api.chat.completions.create(**ask)
    texts = {r.choices[0].message.content for r in (first, retry, later)}
    assert texts == {"echo: book it"} and streamed == "echo: book it"
    assert fresh.choices[0].message.content == "echo: book it"
    assert len(model.requests) == 2  # the keyed request once, the unkeyed one once
    # and after a restart the retry still gets the same reply without a model call
    async with serving(settings) as (_, base):
        again = await client(base).chat.completions.create(**ask, extra_headers=key)
    assert again.choices[0].message.content == "echo: book it"
    assert len(model.requests) == 2


async def test_reminders_and_unaddressed_messages_wait_at_notifications(settings, model):
    async with serving(settings) as (kernel, base):
        api = client(base)
        set_reply = await api.chat.completions.create(
            model="hearth",
            messages=[{"role": "user", "content": "/remind 1s stretch"}],
            user="alice",
        )
        await kernel.router.notify_user("Hearth restarts at noon", "http_api")
        for_alice = await _notifications_until(api, "alice", "stretch")
        for_bob = await api.get(
            "/notifications", cast_to=object, options={"params": {"user": "bob"}}
        )
    assert set_reply.choices[0].message.content.startswith("Reminder #1 set")
    texts = [n["text"] for n in for_alice["data"]]
    assert "Hearth restarts at noon" in texts
    assert "⏰ Reminder: stretch" in texts
    assert {n["conversation"] for n in for_alice["data"]} == {None, "alice"}
    assert [n["text"] for n in for_bob["data"]] == ["Hearth restarts at noon"]


@pytest.mark.usefixtures("postprocessors")
async def test_post_processor_results_come_in_the_hearth_field(settings, model):
    ask = "how is the disk? #json:minimal #decision"
    async with serving(settings) as (_, base):
        api = client(base)
        reply = await api.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": ask}], user="carol"
        )
        stream = await api.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": ask}], user="carol", stream=True
        )
        last = [chunk async for chunk in stream][-1]
        plain = await api.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": "no tags, C# is fine"}]
        )
        followup = await _notifications_until(api, "carol", '"query": "how is the disk?"')
    assert reply.choices[0].message.content == "echo: how is the disk?"
    results = reply.model_extra["hearth"]["postprocess"]
    assert results["json"]["success"] and results["json"]["content"] == {
        "query": "how is the disk?",
        "answer": "echo: how is the disk?",
    }
    assert results["decision"]["output_target"] == "silent"
    assert last.choices[0].finish_reason == "stop"
    assert set(last.model_extra["hearth"]["postprocess"]) == {"json", "decision"}
    assert "hearth" not in (plain.model_extra or {})
    assert "#json" in followup["data"][-1]["text"]  # the visible ones also follow, as for chat


async def _notifications_until(api: openai.AsyncOpenAI, user: str, text: str) -> dict:
    found: dict = {}

    async def check() -> bool:
        nonlocal found
        found = await api.get("/notifications", cast_to=object, options={"params": {"user": user}})
        return any(text in n["text"] for n in found["data"])

    deadline = asyncio.get_running_loop().time() + 15
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"no {text!r} in {found}"
        await asyncio.sleep(0.1)
    return found


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "0.0.0.0:0"])
async def test_without_a_token_nothing_listens_and_no_error_is_logged(
    monkeypatch, ext_root, settings_file, caplog, listen
):
    monkeypatch.delenv("HEARTH_API_TOKEN", raising=False)
    install(ext_root)
    async with running_kernel(api_settings(settings_file, None, listen=listen)) as kernel:
        record = kernel.loader.records["http_api"]
        instance = kernel.loader.instance("http_api")
    assert record.status.value == "skipped" and instance is None
    assert "missing secret HEARTH_API_TOKEN" in (record.error or "")
    assert not [r for r in caplog.records if r.levelname == "ERROR" and r.name != "asyncio"]


def test_the_http_benchmark_runs_and_reports_its_numbers():
    """``bench/http_api.py`` scaled down: it runs against a real kernel process and
    prints one JSON object with the numbers the issue asks for."""
    done = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "bench" / "http_api.py"),
            "--conversations",
            "3",
            "--messages",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=PROJECT_ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["conversations"] == 3 and result["messages"] == 2
    assert result["wall_s"] >= result["ideal_s"] == 0.4
    for key in ("kernel_added_ms_p50", "kernel_added_ms_p99", "requests_per_s_0ms_model"):
        assert result[key] > 0
    assert result["cpu_count"] == os.cpu_count() and isinstance(result["ok"], bool)
