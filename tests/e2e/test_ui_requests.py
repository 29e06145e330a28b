"""Extensions' questions to the user (seed 003 UI requests, ADR 0021): one contract
suite, the same scenarios on every surface — a test channel, the Telegram channel
(fake Bot API) and the CLI (``main.py`` on piped stdin). A tool asks through
``context.ui_request``; the channel renders the question; the user answers;
the tool gets the answer (``confirm`` → yes/no, ``select`` → the option,
``input`` → the text), or ``None`` when nobody answered in time. The model is
the fake OpenAI server for all three."""

from __future__ import annotations

import asyncio
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from conftest import PROJECT_ROOT, ext_code
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section
from support.fake_telegram import FakeTelegram
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, CONVERSING, running_kernel, wait_for
from support.telegram_support import ALICE, install_extension, telegram_config

ASKER = ext_code(
    header="""
    from agents import function_tool
    from core.extensions.sdk import side_effects
    """,
    body="""
    def get_tools(self):
        @function_tool
        async def ask_things(kind: str) -> str:
            "Ask the user something."
            if kind == "confirm":
                answer = await self.ctx.ui_request("confirm", "Book the table?")
            elif kind == "select":
                answer = await self.ctx.ui_request("select", "Which drink?", ["tea", "coffee"])
            elif kind == "input":
                answer = await self.ctx.ui_request("input", "Which city?")
            else:
                answer = await self.ctx.ui_request("confirm", "Still there?", timeout_s=1)
            return f"answer: {answer}"
        return [side_effects(ask_things, False)]
    """,
)

# An InteractiveChannel that records what it is asked; the test answers for the user.
TEST_CHANNEL = ext_code(
    """
    def _list(self, name):
        return self.__dict__.setdefault(name, [])
    async def send_to_user(self, user_id, message):
        self._list("sent").append(message)
    async def send_message(self, message):
        self._list("sent").append(message)
    async def ask_user(self, user_id, request):
        self._list("asked").append(request)
    async def close_request(self, user_id, request_id, outcome):
        self._list("closed").append((request_id, outcome))
    async def say(self, text):
        await self.ctx.on_user_message(text, "u1")
    async def reply(self, request_id, value):
        await self.ctx.answer_request(request_id, value, "u1")
    """
)


@dataclass(frozen=True)
class Scenario:
    kind: str
    prompt: str
    options: tuple[str, ...]
    choice: str | None  # what the user picks or types; None: no answer
    expected: str  # what the tool returns to the model


SCENARIOS = [
    Scenario("confirm", "asker asks: Book the table?", ("Yes", "No"), "yes", "answer: yes"),
    Scenario("select", "asker asks: Which drink?", ("tea", "coffee"), "coffee", "answer: coffee"),
    Scenario("input", "asker asks: Which city?", (), "Lisbon", "answer: Lisbon"),
    Scenario("timeout", "asker asks: Still there?", ("Yes", "No"), None, "answer: None"),
]


# ------------------------------------------------------------------ surfaces


class ChannelSurface:
    def __init__(self, make_ext, settings_file, srv) -> None:
        make_ext("testchan", TEST_CHANNEL, {"permissions": {"user_messages": True}})
        self.settings = settings_file(
            channels={"default": "testchan"}, models=models_section(srv.base_url)
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with running_kernel(self.settings) as kernel:
            self.kernel = kernel
            self.channel = kernel.loader.instance("testchan")
            yield

    async def say(self, text: str) -> None:
        await self.channel.say(text)

    async def shown(self) -> tuple[str, tuple[str, ...]]:
        request = (await wait_for(lambda: self.channel._list("asked")))[0]
        options = [o.label for o in request.options] or (
            ["Yes", "No"] if request.kind == "confirm" else []
        )
        return request.prompt, tuple(options)

    async def answer(self, scenario: Scenario) -> None:
        await self.channel.reply(self.channel._list("asked")[0].id, scenario.choice)

    async def reply(self) -> str:
        return (await wait_for(lambda: self.channel._list("sent")))[-1]


class TelegramSurface:
    def __init__(self, make_ext, settings_file, srv, ext_root, monkeypatch) -> None:
        self.tg = FakeTelegram().__enter__()
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", self.tg.token)
        install_extension(ext_root)
        self.settings = settings_file(
            channels={"default": "telegram_channel"},
            extensions={"telegram_channel": telegram_config(self.tg)},
            models=models_section(srv.base_url),
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            async with running_kernel(self.settings):
                yield
        finally:
            self.tg.__exit__(None, None, None)

    def _question(self):
        found = [m for m in self.tg.messages(ALICE) if m.text != "Done."]
        return found[0] if found else None

    async def say(self, text: str) -> None:
        self.tg.send_update(text, user_id=ALICE)

    async def shown(self) -> tuple[str, tuple[str, ...]]:
        message = await wait_for(self._question)
        prompt = message.text.removesuffix("\n(Reply with your answer.)")
        return prompt, tuple(label for label, _ in message.buttons)

    async def answer(self, scenario: Scenario) -> None:
        message = self._question()
        assert scenario.choice is not None
        pressed = [data for label, data in message.buttons if label.lower() == scenario.choice]
        if pressed:
            self.tg.press(ALICE, message.message_id, pressed[0], user_id=ALICE)
        else:
            self.tg.send_update(scenario.choice, user_id=ALICE)

    async def reply(self) -> str:
        await wait_for(lambda: "Done." in self.tg.chat_texts(ALICE))
        return "Done."


class CliSurface:
    _PROMPTS = {
        "confirm": "asker asks: Book the table? [y/N]",
        "select": "asker asks: Which drink? [1] tea / [2] coffee",
        "input": "asker asks: Which city? (type your answer)",
        "timeout": "asker asks: Still there? [y/N]",
    }

    def __init__(self, settings_file, srv, ext_root) -> None:
        shutil.copytree(
            PROJECT_ROOT / "sandbox" / "extensions" / "cli_channel", ext_root / "cli_channel"
        )
        self.settings = settings_file(models=models_section(srv.base_url))
        self.lines: queue.Queue[str] = queue.Queue()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self.proc = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(self.settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        try:
            yield
        finally:
            _, stderr = await asyncio.to_thread(self.proc.communicate, timeout=60)
            assert self.proc.returncode == 0, stderr

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))

    async def _line(self) -> str:
        return await asyncio.to_thread(self.lines.get, True, 30)

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    async def say(self, text: str) -> None:
        self._send(text)

    async def shown(self) -> tuple[str, tuple[str, ...]]:
        line = await self._line()
        for kind, prompt in self._PROMPTS.items():
            if line == prompt:
                return {
                    "confirm": ("asker asks: Book the table?", ("Yes", "No")),
                    "select": ("asker asks: Which drink?", ("tea", "coffee")),
                    "input": ("asker asks: Which city?", ()),
                    "timeout": ("asker asks: Still there?", ("Yes", "No")),
                }[kind]
        raise AssertionError(f"unexpected line {line!r}")

    async def answer(self, scenario: Scenario) -> None:
        assert scenario.choice is not None
        self._send({"yes": "y", "coffee": "2"}.get(scenario.choice, scenario.choice))

    async def reply(self) -> str:
        while (line := await self._line()).startswith("("):  # "(Not answered in time)"
            pass
        return line


@pytest.fixture(params=["test channel", "telegram", "cli"])
def surface(request, make_ext, settings_file, ext_root, monkeypatch):
    with FakeOpenAIServer() as srv:
        make_ext("asker", ASKER, CONVERSING)
        if request.param == "test channel":
            built = ChannelSurface(make_ext, settings_file, srv)
        elif request.param == "telegram":
            built = TelegramSurface(make_ext, settings_file, srv, ext_root, monkeypatch)
        else:
            built = CliSurface(settings_file, srv, ext_root)
        built.srv = srv
        yield built


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.kind for s in SCENARIOS])
async def test_a_question_is_rendered_answered_and_reaches_the_tool(surface, scenario):
    surface.srv.script(ToolCall("ask_things", {"kind": scenario.kind}), "Done.")
    async with surface.running():
        await surface.say("ask me")
        prompt, options = await surface.shown()
        assert (prompt, options) == (scenario.prompt, scenario.options)
        if scenario.choice is not None:
            await surface.answer(scenario)
        assert await surface.reply() == "Done."
    assert surface.srv.requests[-1]["messages"][-1]["content"] == scenario.expected


async def test_only_the_asked_conversation_can_answer_and_the_outcome_is_journaled(
    make_ext, settings_file
):
    with FakeOpenAIServer() as srv:
        make_ext("asker", ASKER, CONVERSING)
        channel_surface = ChannelSurface(make_ext, settings_file, srv)
        srv.script(ToolCall("ask_things", {"kind": "select"}), "Done.")
        async with channel_surface.running():
            channel = channel_surface.channel
            await channel.say("ask me")
            [request] = await wait_for(lambda: channel._list("asked"))
            await channel.ctx.answer_request(request.id, "tea", "someone-else")
            await channel.reply(request.id, "whisky")  # not an option: still open
            await channel.reply(request.id, "2")  # the second option, by number
            await wait_for(lambda: "Done." in channel._list("sent"))
            events = await channel_surface.kernel.bus.journal.recent_events(20, topic="hook.ui")
    kernel_frames = [dict(e.payload) for e in reversed(events)]
    assert srv.requests[-1]["messages"][-1]["content"] == "answer: coffee"
    assert channel._list("closed") == [(request.id, "Answered: coffee")]
    assert [(f["decision"], f["after"]) for f in kernel_frames] == [
        ("asked", None),
        ("answered", "coffee"),
    ]


async def test_an_isolated_extension_asks_over_its_rpc_channel(make_ext, settings_file):
    with FakeOpenAIServer() as srv:
        make_ext("asker", ASKER, {"isolation": "process", **CONVERSING})
        channel_surface = ChannelSurface(make_ext, settings_file, srv)
        srv.script(ToolCall("ask_things", {"kind": "input"}), "Done.")
        async with channel_surface.running():
            channel = channel_surface.channel
            await channel.say("ask me")
            [request] = await wait_for(lambda: channel._list("asked"))
            assert (request.kind, request.prompt) == ("input", "asker asks: Which city?")
            await channel.reply(request.id, "Porto")
            await wait_for(lambda: "Done." in channel._list("sent"))
    assert srv.requests[-1]["messages"][-1]["content"] == "answer: Porto"


async def test_a_channel_without_buttons_gets_the_question_in_words_and_answer_works(
    make_ext, settings_file
):
    with FakeOpenAIServer() as srv:
        make_ext("asker", ASKER, CONVERSING)
        make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
        srv.script(ToolCall("ask_things", {"kind": "select"}), "Done.")
        settings = settings_file(
            channels={"default": "capture"}, models=models_section(srv.base_url)
        )
        async with running_kernel(settings) as kernel:
            capture = kernel.loader.instance("capture")

            def sent() -> list[str]:
                return [text for _, _, text in capture._log()]

            await capture.say("ask me")
            question = (await wait_for(sent))[0]
            request_id = question.split("/answer ")[1].split()[0]
            assert question == (
                f"asker asks: Which drink?\n1. tea / 2. coffee\n"
                f"Reply /answer {request_id} followed by your choice."
            )
            await capture.say(f"/answer {request_id} tea")
            await wait_for(lambda: "Done." in sent())
    assert "Answered: tea" in sent()
    assert srv.requests[-1]["messages"][-1]["content"] == "answer: tea"
