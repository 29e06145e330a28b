"""A request prefix a model server can reuse (issue 29, ADR 0054).

Two turns through a real kernel and the real ``openai`` client against the
scripted server (which records every request body), across a minute boundary,
with a memory recalled only on the second turn: the tools and the system prompt
are the same bytes, turn 1's messages are sent again unchanged, the shared
prefix is most of turn 1's request, and the clock and the memory still reach
the model — in the turn's note, after the history, never stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from conftest import ext_code
from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer, models_section
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    CONVERSING,
    running_kernel,
    session_history,
)
from support.memory_kit import converse, replies

BERLIN = ZoneInfo("Europe/Berlin")
MOOD = {  # an unconditional system addition (stable) and a conditional one (per turn)
    "prompt_additions": [
        {"position": "system_suffix", "content": "Units are metric."},
        {
            "position": "system_suffix",
            "content": "The user mentioned a cat: be warm.",
            "condition": {"context_match": r"\bcat\b"},
        },
    ]
}
MOOD_CODE = ext_code("")


class Clock:
    """The kernel's clock, set by the test: ``core.agents.orchestrator.now_at``."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 26, 10, 59, 58, tzinfo=BERLIN)

    def __call__(self, zone: tzinfo) -> datetime:
        return self.now.astimezone(zone)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moment = Clock()
    monkeypatch.setattr("core.agents.orchestrator.now_at", moment)
    return moment


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def household(ext_root, make_ext, settings_file, server):
    """Memory and kv (their tools in every request), the mood additions, the capture channel."""
    copy_bundled(ext_root, "memory", "kv")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("mood", MOOD_CODE, {**CONVERSING, **MOOD})
    return settings_file(
        channels={"default": "capture"},
        timezone="Europe/Berlin",
        models=models_section(server.base_url, max_retries=0, tool_schemas="all"),
    )


def laid_out(body: dict[str, Any]) -> bytes:
    """A request as a chat template lays it out for the model: tools and the system
    prompt first, then the messages in order (what a server's prefix cache sees)."""
    messages = body["messages"]
    head = {"tools": body.get("tools", []), "system": messages[0]}
    parts = [
        json.dumps(head, sort_keys=True),
        *(json.dumps(m, sort_keys=True) for m in messages[1:]),
    ]
    return "\n".join(parts).encode()


def shared_prefix(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def notes(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"][1:] if m["role"] == "system"]


async def test_the_prefix_stays_across_a_minute_and_a_recalled_memory(
    household, server, clock
) -> None:
    async with running_kernel(household) as kernel:
        await converse(kernel, "Good morning! Any plans for today?")
        clock.now = datetime(2026, 11, 26, 11, 0, 3, tzinfo=BERLIN)  # the minute turned
        await kernel.loader.instance("memory").store.insert_many(
            [("The user's cat is called Miso.", "import", 1_700_000_000.0)]
        )
        await converse(kernel, "What is my cat called?", n=2)
        assert len(replies(kernel)) == 2
    first, second = server.requests

    # the stable prefix: tools (order and text) and the system prompt, byte for byte
    assert [t["function"]["name"] for t in first["tools"]] == [
        t["function"]["name"] for t in second["tools"]
    ]
    assert first["tools"] == second["tools"] and len(first["tools"]) >= 7
    assert first["messages"][0] == second["messages"][0]
    system = first["messages"][0]["content"]
    assert "Units are metric." in system  # an unconditional addition is part of it
    for per_turn in ("Now:", "10:59", "Miso", "Channel: capture", "be warm"):
        assert per_turn not in system

    # turn 1 is sent again unchanged: every message but its note, in order, then the reply
    (note_1,) = notes(first)
    kept = [m for m in first["messages"] if m is not note_1]
    assert second["messages"][: len(kept)] == kept
    assert second["messages"][len(kept)] == {
        "role": "assistant",
        "content": f"echo: {kept[-1]['content']}",
    }
    assert second["messages"][-1] == {"role": "user", "content": "What is my cat called?"}

    # most of turn 1's request is a prefix of turn 2's
    before, after = laid_out(first), laid_out(second)
    assert shared_prefix(before, after) >= 0.9 * len(before), (
        shared_prefix(before, after),
        len(before),
    )

    # the clock, the session context, the memory and the conditional addition reach
    # the model in the turn's note, just before the newest message
    assert note_1 == first["messages"][-2]
    assert note_1["content"].startswith("Now: 2026-11-26 10:59 (Thursday, CET, UTC+01:00).")
    assert "Miso" not in note_1["content"] and "be warm" not in note_1["content"]
    (note_2,) = notes(second)
    assert note_2 == second["messages"][-2]
    assert note_2["content"].startswith("Now: 2026-11-26 11:00 (Thursday, CET")
    assert "Channel: capture; user: " in note_2["content"]
    assert "[Relevant memories]\n- The user's cat is called Miso." in note_2["content"]
    assert "The user mentioned a cat: be warm." in note_2["content"]

    # and the history keeps the conversation, never a note
    stored = session_history(household.parent / "data", "capture:u1")
    assert [m.get("role") for m in stored] == ["user", "assistant", "user", "assistant"]
    assert "Now:" not in json.dumps(stored) and "Miso" not in json.dumps(stored)


async def test_a_user_addition_wraps_only_the_newest_message(
    ext_root, make_ext, settings_file, server, clock
) -> None:
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    wrap = {"prompt_additions": [{"position": "user_prefix", "content": "(be brief)"}]}
    make_ext("brief", MOOD_CODE, {**CONVERSING, **wrap})
    path = settings_file(
        channels={"default": "capture"},
        models=models_section(server.base_url, max_retries=0, tool_schemas="all"),
    )
    async with running_kernel(path) as kernel:
        await converse(kernel, "one")
        await converse(kernel, "two", n=2)
    first, second = server.requests
    assert first["messages"][-1] == {"role": "user", "content": "(be brief)\n\none"}
    # sent again as it was stored: without the addition of its own turn
    assert {"role": "user", "content": "one"} in second["messages"]
    assert second["messages"][-1] == {"role": "user", "content": "(be brief)\n\ntwo"}
    assert first["messages"][0] == second["messages"][0]
