"""Tool schemas on demand (issue 47, ADR 0097): a model on this machine is sent a small
stable prefix — the system prompt naming every tool group, and only the resident
tools' schemas — and the groups it loads with ``load_tools`` from its next step on,
for the rest of the conversation. Through a real kernel and the real ``openai``
client against the scripted server, which records every request body."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel
from support.memory_kit import converse, replies

WORDS_ONLY = {"embeddings": {"backend": "none"}, "local_first": False}  # the model answers


def household(ext_root, make_ext, settings_file, srv, **provider):
    copy_bundled(ext_root, "memory", "kv", "scheduler")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    return settings_file(
        channels={"default": "capture"},
        models=models_section(srv.base_url, max_retries=0, warm="off", **provider),
        extensions={"memory": WORDS_ONLY, "scheduler": {"local_first": False}},
    )


def names(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def system(request: dict) -> str:
    return request["messages"][0]["content"]


async def test_a_local_model_loads_the_groups_it_needs_and_keeps_them(
    ext_root, make_ext, settings_file
) -> None:
    with FakeOpenAIServer() as srv:
        srv.script(
            ToolCall("load_tools", {"groups": ["memory"]}),
            ToolCall("remember", {"text": "The user's cat is called Miso."}),
            "Noted.",
            "Hello again.",
        )
        path = household(ext_root, make_ext, settings_file, srv)
        async with running_kernel(path) as k:
            await converse(k, "remember that my cat is called Miso")
            await converse(k, "hello", n=2)
            assert [m for _, _, m in replies(k)] == ["Noted.", "Hello again."]
        first, after_load, remembered, next_turn = srv.requests
    assert names(first) == ["current_time", "load_tools"]
    assert "- memory: remember, recall, forget, list_memories, search_conversations" in system(
        first
    )
    assert "call load_tools with the groups you need first" in system(first)
    memory_tools = ["remember", "recall", "forget", "list_memories", "search_conversations"]
    assert names(after_load) == ["current_time", "load_tools", *memory_tools]
    loaded = next(m for m in after_load["messages"] if m.get("role") == "tool")["content"]
    assert loaded.startswith("memory is loaded; call its tools now:\n- remember: ")
    # each tool named with the first sentence of what it does, none left blank
    assert all(line.split(": ", 1)[1] for line in loaded.splitlines()[1:]), loaded
    # the next turn starts with the same prefix as the last step: the group stays
    assert names(next_turn) == names(after_load)
    assert system(next_turn) == system(first)
    assert remembered["messages"][-1]["content"].startswith("remembered #1")
    sent = sum(len(json.dumps(t)) for t in first["tools"]) + len(system(first))
    everything = sum(len(json.dumps(t)) for t in next_turn["tools"])
    assert sent < 3000 < everything + len(system(first))


async def test_a_tool_it_was_not_shown_still_runs(ext_root, make_ext, settings_file) -> None:
    with FakeOpenAIServer() as srv:
        srv.script(ToolCall("kv_set", {"key": "pad", "value": '"clear"'}), "Stored.")
        path = household(ext_root, make_ext, settings_file, srv)
        async with running_kernel(path) as k:
            await converse(k, "store pad=clear")
            assert [m for _, _, m in replies(k)] == ["Stored."]
        assert "kv_set" not in names(srv.requests[0])
        assert "error" not in srv.requests[1]["messages"][-1]["content"]


async def test_every_schema_goes_to_a_provider_that_asks_for_all(
    ext_root, make_ext, settings_file
) -> None:
    with FakeOpenAIServer() as srv:
        path = household(ext_root, make_ext, settings_file, srv, tool_schemas="all")
        async with running_kernel(path) as k:
            await converse(k, "hi")
        request = srv.requests[0]
    assert "load_tools" not in names(request)
    assert {"remember", "kv_set", "schedule_once", "current_time"} <= set(names(request))
    assert "Tools by extension (agents marked; call them as tools):" in system(request)
    assert "- kv: kv_get, kv_set, kv_delete, kv_list" in system(request)
    # names only: each description is in its tool's schema, not twice
    assert "durable key-value store" not in system(request)


async def test_a_local_models_next_request_repeats_the_last_one(
    ext_root, make_ext, settings_file
) -> None:
    """The turn's note is kept before the user's message (``turn_notes: auto`` for a
    server on this machine): the next request begins with every message of the last,
    so only the new note and the new words are read anew."""
    with FakeOpenAIServer() as srv:
        path = household(ext_root, make_ext, settings_file, srv)
        async with running_kernel(path) as k:
            await converse(k, "hi")
            await converse(k, "and now?", n=2)
        first, second = srv.requests
    assert [m["role"] for m in first["messages"]] == ["system", "system", "user"]
    assert second["messages"][:3] == first["messages"]
    assert [m["role"] for m in second["messages"][3:]] == ["assistant", "system", "user"]
    assert first["messages"][1]["content"].endswith("Channel: capture; user: u1.")
    # the channel is in the kept history already: the new note is the clock alone
    assert second["messages"][4]["content"].startswith("Now: ")
    assert "Channel:" not in second["messages"][4]["content"]


async def test_a_kept_note_says_the_day_once_a_day(
    ext_root, make_ext, settings_file, monkeypatch
) -> None:
    """Where notes are kept, the clock names the day, weekday and offset once: later
    notes of that day say the time alone (fewer tokens read anew each turn), and
    the next day's first note names the new day."""
    utc = ZoneInfo("UTC")
    moments = [
        datetime(2026, 11, day, hour, minute, tzinfo=utc)
        for day, hour, minute in ((26, 9, 0), (26, 9, 5), (26, 23, 59), (27, 0, 1))
    ]

    def now_at(zone: object) -> datetime:
        # the last instant stays: a further reading (a turn run again on a loaded machine)
        # must not raise StopIteration into the kernel's tasks, which hangs the test
        return moments.pop(0) if len(moments) > 1 else moments[0]

    monkeypatch.setattr("core.agents.orchestrator.now_at", now_at)
    with FakeOpenAIServer() as srv:
        path = household(ext_root, make_ext, settings_file, srv)
        async with running_kernel(path) as k:
            for n, text in enumerate(("hi", "and now?", "late", "a new day"), start=1):
                await converse(k, text, n=n)
    clocks = [r["messages"][-2]["content"].split("\n")[0] for r in srv.requests]
    assert clocks == [
        "Now: 2026-11-26 09:00 (Thursday, UTC, UTC+00:00).",
        "Now: 09:05.",
        "Now: 23:59.",
        "Now: 2026-11-27 00:01 (Friday, UTC, UTC+00:00).",
    ]


async def test_a_remote_providers_notes_stay_out_of_the_history(
    ext_root, make_ext, settings_file
) -> None:
    with FakeOpenAIServer() as srv:
        path = household(ext_root, make_ext, settings_file, srv, turn_notes="fresh")
        async with running_kernel(path) as k:
            await converse(k, "hi")
            await converse(k, "and now?", n=2)
        second = srv.requests[1]
    assert [m["role"] for m in second["messages"]] == [
        "system",
        "user",
        "assistant",
        "system",
        "user",
    ]
