"""A warm prompt prefix (issue 47, ADR 0089): a local model server is sent the stable
prefix once, so the first real message does not wait for it to read the whole prompt.

Through a real kernel and the real ``openai`` client against the scripted server,
which tells a warm-up (``X-Hearth-Warm``) from a turn's request and offers
llama.cpp's slot files when a test asks it to.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import ext_code
from core.config import ProviderSettings
from support.bundled import copy_bundled
from support.fake_openai import Failure, FakeOpenAIServer, models_section
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    CONVERSING,
    running_kernel,
    wait_for,
)
from support.memory_kit import converse, replies

STABLE = {"prompt_additions": [{"position": "system_suffix", "content": "Units are metric."}]}


async def warmed(kernel) -> None:
    await wait_for(lambda: kernel.warmer.last is not None, timeout=30)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def household(ext_root, make_ext, settings_file, server):
    """Memory and kv (their tools in every request), a stable addition, the capture channel."""

    def write(**provider):
        copy_bundled(ext_root, "memory", "kv")
        make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
        make_ext("units", ext_code(""), {**CONVERSING, **STABLE})
        return settings_file(
            channels={"default": "capture"},
            models=models_section(server.base_url, max_retries=0, tool_schemas="all", **provider),
        )

    return write


async def test_the_first_message_finds_the_prefix_already_sent(household, server) -> None:
    server.script("Hello there.")
    async with running_kernel(household()) as kernel:
        await warmed(kernel)
        (warm,) = server.warmups
        await converse(kernel, "Good morning!")
        assert replies(kernel)[0][2] == "Hello there."  # the warm-up took no answer
    (turn,) = server.requests
    assert warm["max_tokens"] == 1
    # the same stable prefix, byte for byte: tools in order, then the system prompt
    assert warm["tools"] == turn["tools"] and len(turn["tools"]) >= 7
    assert warm["messages"][0] == turn["messages"][0]
    assert "Units are metric." in warm["messages"][0]["content"]
    assert "Now:" not in warm["messages"][0]["content"]  # nothing per turn in it
    assert kernel.warmer.last is not None and kernel.warmer.last.label == "local/fake-model"


async def test_warm_off_sends_nothing_before_the_first_message(household, server) -> None:
    async with running_kernel(household(warm="off")) as kernel:
        await converse(kernel, "Good morning!")
        assert await kernel.warmer.warm() is None
    assert server.warmups == [] and len(server.requests) == 1


async def test_a_saved_slot_is_restored_on_the_next_start(household, server) -> None:
    server.slots = {}  # a llama.cpp server started with --slot-save-path
    settings = household()
    async with running_kernel(settings) as kernel:
        await warmed(kernel)
        first = await kernel.warmer.warm()  # the same prefix again: now restored
    assert first is not None and first.restored
    (name,) = server.slots
    assert name.startswith("hearth-prefix-") and name.endswith(".bin")
    # the first start: nothing to restore yet, then the warmed slot saved
    assert server.slot_calls[:2] == [("restore", name), ("save", name)]
    assert server.slot_calls[2:] == [("restore", name)]


async def test_a_server_without_slot_files_is_not_asked_again(household, server) -> None:
    async with running_kernel(household()) as kernel:
        await warmed(kernel)
        await kernel.warmer.warm()
    assert [action for action, _ in server.slot_calls] == ["restore", "save"]


async def test_after_a_failed_turn_the_prefix_is_warmed_again(household, server) -> None:
    server.script(Failure(500, "model crashed"), "Back again.")
    async with running_kernel(household()) as kernel:
        await warmed(kernel)
        await converse(kernel, "Are you there?")
        await wait_for(lambda: len(server.warmups) == 2, timeout=30)  # it may restart empty
        await converse(kernel, "Now?", n=2)
        assert replies(kernel)[-1][2] == "Back again."


@pytest.mark.parametrize(
    ("fields", "warmed"),
    [
        ({"type": "openai_compatible", "base_url": "http://127.0.0.1:8089/v1"}, True),
        ({"type": "openai_compatible", "base_url": "http://localhost:11434/v1"}, True),
        ({"type": "openai_compatible", "base_url": "http://[::1]:8000/v1"}, True),
        ({"type": "openai_compatible", "base_url": "http://192.168.1.20:8000/v1"}, False),
        ({"type": "openai_compatible", "base_url": "https://api.example.com/v1"}, False),
        ({"type": "openai"}, False),  # a paid provider is never sent a request unasked
        ({"type": "openai", "warm": "on"}, True),
        ({"type": "openai_compatible", "base_url": "http://127.0.0.1/v1", "warm": "off"}, False),
        ({"type": "openai_compatible", "base_url": "http://10.0.0.5/v1", "warm": "on"}, True),
    ],
)
def test_auto_warms_servers_on_this_machine_only(fields, warmed) -> None:
    assert ProviderSettings(**fields).warmed is warmed
