"""Shared by the replay suites: a recorded conversation with tools, a hook that
modifies arguments, a post-processor and an approval, through a real kernel
and the fake model server."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import ext_code
from core.config import Settings, load_settings
from core.kernel.runner import Kernel
from core.replay.trace import Trace, load_session
from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer, ToolCall
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, CONVERSING, running_kernel, wait_for
from support.rocket_ext import ROCKETS

SESSION = "capture:u1"


def guard(destination: str) -> str:
    """A ``before_tool_call`` hook that turns the target ``mars?`` into ``destination``."""
    return ext_code(
        header="from core.extensions.contract import ToolDecision",
        body=f"""
        async def before_tool_call(self, call, turn):
            if call.arguments.get("target") == "mars?":
                return ToolDecision.modify({{"target": "{destination}"}})
            return None
        """,
    )


def model_settings(srv: FakeOpenAIServer | None) -> dict[str, Any]:
    """The fake server as the default model (``None``: a replay, which never asks it,
    still names the same provider and model)."""
    base_url = srv.base_url if srv is not None else "http://127.0.0.1:9/v1"
    return {
        "default": {"provider": "fake", "model": "fake-model"},
        "providers": {
            "fake": {"type": "openai_compatible", "base_url": base_url, "max_retries": 0}
        },
    }


def write_extensions(make_ext: Callable[..., Path], destination: str = "mars") -> None:
    """The capture channel, the rockets and their guard, and the bundled
    post-processors (``#json`` is asked for)."""
    ext_root = make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST).parent
    if not (ext_root / "postprocessors").exists():
        copy_bundled(ext_root, "postprocessors")
    make_ext("rockets", ROCKETS)
    make_ext("guard", guard(destination), CONVERSING)


def sent(kernel: Kernel) -> list[str]:
    return [text for _, _, text in kernel.loader.instance("capture")._log()]


async def say(kernel: Kernel, text: str) -> None:
    await kernel.loader.instance("capture").say(text)


async def question(kernel: Kernel) -> str:
    """The id of the open question the capture channel was sent."""
    await wait_for(lambda: any("/approve " in t for t in sent(kernel)))
    text = next(t for t in sent(kernel) if "/approve " in t)
    match = re.search(r"/approve (\w+)", text)
    assert match is not None
    return match.group(1)


async def record_conversation(
    srv: FakeOpenAIServer, settings_path: Path
) -> tuple[Settings, list[str]]:
    """Two turns: a side-effect-free tool; then a side-effecting one whose target a
    hook modifies, approved by the user, with ``#json`` asked for. Returns the
    settings and what the user was sent."""
    srv.script(ToolCall("peek", {}, call_id="c1"), "The pad is clear.")
    srv.script(ToolCall("launch", {"target": "mars?"}, call_id="c2"), '{"launched": "mars"}')
    async with running_kernel(settings_path) as kernel:
        await say(kernel, "is the pad clear?")
        await wait_for(lambda: "The pad is clear." in sent(kernel))
        await say(kernel, "launch at mars? #json")
        qid = await question(kernel)
        await say(kernel, f"/approve {qid}")
        await wait_for(lambda: any('"launched"' in t for t in sent(kernel)), timeout=20)
        assert kernel.loader.instance("rockets").log() == ["mars"]
        replies = sent(kernel)
    return load_settings(settings_path), replies


async def recorded(settings: Settings, session: str = SESSION) -> Trace:
    return await load_session(
        settings.data_dir / "events.db", settings.data_dir / "sessions.db", session, 7.0
    )


# ---------------------------------------------------------------- golden traces

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_SETTINGS: dict[str, Any] = {"timezone": "UTC"}  # the instructions name the zone
REPLAY_MODELS = model_settings(None)

# shapes every turn: a note before the user's words, the answer's first line in capitals
SHAPER = ext_code(
    body="""
    async def on_input_messages(self, messages, turn):
        return [{"role": "user", "content": "(asked on the pad) " + messages[-1]["content"]}]
    async def on_llm_output(self, output, turn):
        first, _, rest = output.partition("\\n")
        return first.upper() + ("\\n" + rest if rest else "")
    """,
)


def write_streaming_extensions(make_ext: Callable[..., Path]) -> None:
    """A streaming channel and the shaper hook (golden trace ``streamed_shaping``)."""
    from test_reply_outbox import STREAM_CHANNEL

    make_ext("stream", STREAM_CHANNEL, CAPTURE_MANIFEST)
    make_ext("shaper", SHAPER, CONVERSING)


async def record_streamed_conversation(srv: FakeOpenAIServer, settings_path: Path) -> Settings:
    """Two streamed turns: the clock tool (non-deterministic: stood in on replay),
    then a plain answer; both shaped by the hooks."""
    srv.script(ToolCall("current_time", {}, call_id="t1"), "It is launch time.\nGo.")
    srv.script("All systems nominal.")
    async with running_kernel(settings_path) as kernel:
        channel = kernel.loader.instance("stream")

        def ends() -> int:
            return len([e for e in channel._log() if e[0] == "end"])

        await channel.say("what time is it?")
        await wait_for(lambda: ends() == 1)
        await channel.say("status?")
        await wait_for(lambda: ends() == 2)
    return load_settings(settings_path)
