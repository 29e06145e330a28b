"""The HTTP API channel's edges, against a fake kernel (``sdk.FakeContext``): every
failure is an OpenAI error object with the right status, and a reply nobody
waits for any more becomes a notification."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from core.extensions.sdk.testing import FakeContext, running
from sandbox.extensions.http_api.main import HttpApiChannel
from support.harness import wait_for
from support.http_api_support import AUTH, TOKEN, fake_kernel_channel

channel = fake_kernel_channel
ASK = {"model": "hearth", "messages": [{"role": "user", "content": "hi"}]}


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


async def reply_to_last(ctx: FakeContext, ext: HttpApiChannel, text: str) -> None:
    await wait_for(lambda: ctx.user_messages)
    await ext.send_to_user(ctx.user_messages[-1]["user_id"], text)


async def test_requests_before_ready_get_503_with_retry_after(tmp_path):
    async with channel(tmp_path, ready=False) as (_, ctx, http):
        response = await http.post("/v1/chat/completions", json=ASK, headers=AUTH)
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert error_of(response)["code"] == "unavailable"
    assert ctx.user_messages == []


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[]", 400, "JSON object"),
        (json.dumps({"model": "hearth"}).encode(), 400, "messages"),
        (json.dumps({"messages": []}).encode(), 400, "messages"),
        (
            json.dumps({"messages": [{"role": "assistant", "content": "x"}]}).encode(),
            400,
            "no text",
        ),
        (json.dumps({**ASK, "padding": "x" * 3000}).encode(), 413, "max_body_bytes"),
    ],
)
async def test_bad_bodies_are_refused_in_the_openai_shape(tmp_path, body, status, words):
    async with channel(tmp_path, max_body_bytes=2048) as (_, ctx, http):
        response = await http.post("/v1/chat/completions", content=body, headers=AUTH)
    assert response.status_code == status
    assert words in error_of(response)["message"]
    assert ctx.user_messages == []


async def test_unknown_routes_and_missing_tokens(tmp_path):
    async with channel(tmp_path) as (_, _ctx, http):
        missing = await http.get("/v1/nothing", headers=AUTH)
        unknown_model = await http.get("/v1/models/gpt-4", headers=AUTH)
        no_token = await http.get("/v1/models")
        no_token_notes = await http.get("/v1/notifications")
    assert missing.status_code == 404 and "no such endpoint" in error_of(missing)["message"]
    assert unknown_model.status_code == 404
    assert error_of(unknown_model)["code"] == "model_not_found"
    assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
    assert error_of(no_token)["code"] == "invalid_api_key"
    assert no_token_notes.status_code == 401


async def test_too_many_requests_in_flight_get_429(tmp_path):
    async with channel(tmp_path, max_inflight=1) as (ext, ctx, http):
        first = asyncio.create_task(http.post("/v1/chat/completions", json=ASK, headers=AUTH))
        await wait_for(lambda: ctx.user_messages)
        second = await http.post("/v1/chat/completions", json=ASK, headers=AUTH)
        await reply_to_last(ctx, ext, "done")
        answered = await first
    assert second.status_code == 429 and second.headers["retry-after"] == "1"
    assert error_of(second)["code"] == "rate_limit_exceeded"
    assert answered.json()["choices"][0]["message"]["content"] == "done"
    assert len(ctx.user_messages) == 1


async def test_a_reply_after_the_deadline_is_kept_as_a_notification(tmp_path):
    async with channel(tmp_path, reply_timeout_s=0.2) as (ext, ctx, http):
        late = await http.post(
            "/v1/chat/completions", json=ASK, headers={**AUTH, "X-Hearth-Conversation": "ann"}
        )
        await reply_to_last(ctx, ext, "sorry, slow")
        notes = await http.get("/v1/notifications", params={"user": "ann"}, headers=AUTH)
    assert late.status_code == 504 and "/v1/notifications" in error_of(late)["message"]
    assert [(n["conversation"], n["text"]) for n in notes.json()["data"]] == [
        ("ann", "sorry, slow")
    ]
    assert ctx.user_messages[0]["user_id"].startswith("ann#reply:")


async def test_a_client_that_hangs_up_leaves_the_reply_as_a_notification(tmp_path):
    async with channel(tmp_path) as (ext, ctx, http):
        asking = asyncio.create_task(http.post("/v1/chat/completions", json=ASK, headers=AUTH))
        await wait_for(lambda: ctx.user_messages)
        asking.cancel()  # the connection closes
        await wait_for(lambda: ext.in_flight == 0)
        await reply_to_last(ctx, ext, "you left")
        notes = await http.get("/v1/notifications", headers=AUTH)
    assert [n["text"] for n in notes.json()["data"]] == ["you left"]


async def test_a_stream_whose_client_hangs_up_frees_its_slot(tmp_path):
    async with channel(tmp_path) as (ext, ctx, http):
        ask = {**ASK, "stream": True}
        async with http.stream("POST", "/v1/chat/completions", json=ask, headers=AUTH) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    break  # the role chunk; then the client goes away
        await wait_for(lambda: ext.in_flight == 0)
        await reply_to_last(ctx, ext, "streamed to nobody")
        notes = await http.get("/v1/notifications", headers=AUTH)
    assert [n["text"] for n in notes.json()["data"]] == ["streamed to nobody"]


async def test_notifications_stream_as_server_sent_events(tmp_path):
    async with channel(tmp_path) as (ext, _ctx, http):
        await ext.send_message("before")
        seen: list[dict[str, Any]] = []

        async def read() -> None:
            params = {"stream": "true", "user": "ann"}
            async with http.stream("GET", "/v1/notifications", params=params, headers=AUTH) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        seen.append(json.loads(line[6:]))
                        if len(seen) == 2:
                            return

        reader = asyncio.create_task(read())
        await wait_for(lambda: seen)
        await ext.send_to_user("bob", "not for ann")
        await ext.send_to_user("ann#reply:r123", "a reminder for ann")
        await asyncio.wait_for(reader, 10)
    assert [(n["conversation"], n["text"]) for n in seen] == [
        (None, "before"),
        ("ann", "a reminder for ann"),
    ]


async def test_a_message_sent_while_the_reply_streams_is_not_the_reply(tmp_path):
    async with channel(tmp_path) as (ext, ctx, http):
        asking = asyncio.create_task(http.post("/v1/chat/completions", json=ASK, headers=AUTH))
        await wait_for(lambda: ctx.user_messages)
        user_id = ctx.user_messages[-1]["user_id"]
        await ext.on_stream_start(user_id)
        await ext.on_stream_chunk(user_id, "Work")
        await ext.send_to_user(user_id, "a tool told you something")
        await ext.on_stream_end(user_id, "Working on it.")
        answered = await asking
        notes = await http.get("/v1/notifications", headers=AUTH)
    assert answered.json()["choices"][0]["message"]["content"] == "Working on it."
    assert [n["text"] for n in notes.json()["data"]] == ["a tool told you something"]


async def test_stopping_answers_waiting_requests_with_503(tmp_path):
    ctx = FakeContext(
        tmp_path,
        extension_id="http_api",
        config_values={"listen": "127.0.0.1:0"},
        secrets={"HEARTH_API_TOKEN": TOKEN},
    )
    ext = HttpApiChannel()
    async with running(ext, ctx):
        await wait_for(lambda: ext.ready)
        async with httpx.AsyncClient(base_url=ext.base_url, timeout=10) as http:
            asking = asyncio.create_task(http.post("/v1/chat/completions", json=ASK, headers=AUTH))
            await wait_for(lambda: ctx.user_messages)
            await ext.stop()
            answered = await asking
    assert answered.status_code == 503
    assert "stopping" in error_of(answered)["message"]


def test_a_reply_tag_names_a_request_not_a_conversation():
    from core.extensions.contract import reply_address, split_reply_address
    from core.kernel.conversations.sessions import Conversations

    tagged = reply_address("alice", "r1f")
    assert tagged == "alice#reply:r1f"
    assert split_reply_address(tagged) == ("alice", "r1f")
    assert split_reply_address("x#reply:y#reply:k2") == ("x#reply:y", "k2")
    assert split_reply_address("bob#reply:not a tag") == ("bob#reply:not a tag", None)
    assert split_reply_address("-100123") == ("-100123", None)
    assert Conversations.key("http_api", tagged) == Conversations.key("http_api", "alice")
    with pytest.raises(ValueError, match="reply tag"):
        reply_address("alice", "a b")
