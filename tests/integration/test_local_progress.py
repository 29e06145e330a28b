"""Progress while a local model reads the prompt (issue 47, ADR 0098): the first turn
a server on this machine must read from the start (no warm prefix yet, nothing
served since the start) shows "reading the conversation…" on a streaming channel
before the first token; once the server holds the prompt, turns show nothing. A
server still loading its model (llama.cpp answers 503) is waited for, by the turn
and by the warm-up, instead of failing the first message."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest
from agents.testing import ModelStep, ScriptedModel, assistant_message

from conftest import ext_code
from core.kernel.turns.router import READING
from core.kernel.turns.warm import STARTING_S
from support.fake_openai import FakeOpenAIServer, closed_port_url, models_section
from support.harness import CAPTURE_MANIFEST, running_kernel, wait_for

SCREEN = ext_code(
    """
    shown = None
    def _log(self):
        if self.shown is None:
            self.shown = []
        return self.shown
    async def send_to_user(self, user_id, message):
        self._log().append(("reply", message))
    async def send_message(self, message):
        self._log().append(("notify", message))
    async def on_stream_start(self, user_id):
        return True
    async def on_stream_chunk(self, user_id, chunk):
        self._log().append(("chunk", chunk))
    async def on_stream_status(self, user_id, status):
        self._log().append(("status", status))
    async def on_stream_end(self, user_id, full_text):
        self._log().append(("reply", full_text))
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    """
)


@pytest.fixture
def age_the_kernel(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Moves the warmer's clock on by the seconds given: the kernel has run that much
    longer, without a test waiting for it."""
    later = [0.0]

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return time.monotonic() + later[0]

    monkeypatch.setattr("core.kernel.turns.warm.time", Clock)
    return lambda seconds: later.__setitem__(0, seconds)


def kinds(log: list[tuple[str, str]], kind: str) -> list[str]:
    return [text for k, text in log if k == kind]


async def test_a_cold_local_model_shows_progress_until_the_first_token(
    make_ext, settings_file
) -> None:
    make_ext("screen", SCREEN, CAPTURE_MANIFEST)
    with FakeOpenAIServer() as server:
        server.script("Hello there.", "Again.")
        server.chunk_gate = gate = threading.Semaphore(0)  # the server still "reads"
        models = models_section(server.base_url, max_retries=0, warm="off")
        async with running_kernel(
            settings_file(channels={"default": "screen"}, models=models)
        ) as k:
            screen = k.loader.instance("screen")
            assert k.warmer.reads_anew()  # nothing warmed, nothing served yet
            await screen.say("Good morning!")
            await wait_for(lambda: ("status", READING) in screen._log(), timeout=30)
            assert kinds(screen._log(), "chunk") == []  # shown before any token
            server.chunk_gate = None
            gate.release(100)
            await wait_for(lambda: ("reply", "Hello there.") in screen._log(), timeout=30)
            log = screen._log()
            assert log.index(("status", READING)) < next(
                i for i, (kind, _) in enumerate(log) if kind == "chunk"
            )
            # served once: the server holds the prompt, the next turn reads only what is new
            assert not k.warmer.reads_anew()
            await screen.say("And now?")
            await wait_for(lambda: ("reply", "Again.") in screen._log(), timeout=30)
            assert kinds(screen._log(), "status") == [READING]


async def test_a_turn_waits_while_the_local_server_loads_its_model(make_ext, settings_file) -> None:
    make_ext("screen", SCREEN, CAPTURE_MANIFEST)
    with FakeOpenAIServer() as server:
        server.loading = True  # just started beside Hearth: /health and completions 503
        server.script("Ready now.")
        models = models_section(server.base_url, max_retries=0)
        async with running_kernel(
            settings_file(channels={"default": "screen"}, models=models)
        ) as k:
            screen = k.loader.instance("screen")
            await screen.say("Good morning!")
            await wait_for(lambda: ("status", READING) in screen._log(), timeout=30)
            await wait_for(lambda: server.health_checks >= 2, timeout=30)  # the turn waits
            assert server.requests == [] and kinds(screen._log(), "reply") == []
            server.loading = False
            await wait_for(lambda: ("reply", "Ready now.") in screen._log(), timeout=30)
            await wait_for(lambda: k.warmer.last is not None, timeout=30)  # retried, not given up
            assert len(server.warmups) == 1


async def test_a_warmed_local_model_and_a_remote_one_show_nothing(make_ext, settings_file) -> None:
    make_ext("screen", SCREEN, CAPTURE_MANIFEST)
    with FakeOpenAIServer() as server:
        server.script("Warm already.")
        models = models_section(server.base_url, max_retries=0)  # warm: auto, on here
        async with running_kernel(
            settings_file(channels={"default": "screen"}, models=models)
        ) as k:
            await wait_for(lambda: k.warmer.last is not None, timeout=30)
            assert not k.warmer.reads_anew()
            screen = k.loader.instance("screen")
            await screen.say("Good morning!")
            await wait_for(lambda: ("reply", "Warm already.") in screen._log(), timeout=30)
            assert kinds(screen._log(), "status") == []
    scripted = ScriptedModel([ModelStep(output=[assistant_message("Remote.")])])
    async with running_kernel(settings_file(channels={"default": "screen"}), model=scripted) as k:
        assert not k.warmer.reads_anew()  # not a server on this machine


async def test_a_local_server_that_is_down_does_not_hold_a_turn_its_fallback_can_answer(
    make_ext, settings_file
) -> None:
    """Waiting up to 30 s for a local server that may be starting is for a model with
    no fallback; with one, the fallback answers at once."""
    make_ext("screen", SCREEN, CAPTURE_MANIFEST)
    down = closed_port_url()
    with FakeOpenAIServer() as cloud:
        cloud.script("From the fallback.")
        models = {
            "default": {
                "provider": "local",
                "model": "fake-model",
                "fallbacks": [{"provider": "cloud", "model": "fake-model"}],
            },
            "providers": {
                "local": {"type": "openai_compatible", "base_url": down, "max_retries": 0},
                "cloud": {
                    "type": "openai_compatible",
                    "base_url": cloud.base_url,
                    "max_retries": 0,
                },
            },
        }
        async with running_kernel(
            settings_file(channels={"default": "screen"}, models=models)
        ) as k:
            screen = k.loader.instance("screen")
            started = time.monotonic()
            await screen.say("Good morning!")
            await wait_for(lambda: ("reply", "From the fallback.") in screen._log(), timeout=60)
    assert time.monotonic() - started < STARTING_S / 2  # 30 s before


async def test_a_local_server_that_is_down_after_the_start_fails_the_turn_at_once(
    make_ext, settings_file, age_the_kernel
) -> None:
    """A server that does not listen may be starting beside Hearth only in the kernel's
    first 30 s (or when Hearth keeps it); later it is down, and the turn says so at once
    instead of waiting 30 s every time."""
    make_ext("screen", SCREEN, CAPTURE_MANIFEST)
    down = closed_port_url()
    models = models_section(down, max_retries=0)
    async with running_kernel(settings_file(channels={"default": "screen"}, models=models)) as k:
        screen = k.loader.instance("screen")
        age_the_kernel(2 * STARTING_S)  # it has run a minute
        started = time.monotonic()
        await screen.say("Good morning!")
        await wait_for(lambda: kinds(screen._log(), "reply"), timeout=60)
    assert time.monotonic() - started < STARTING_S / 2  # 30 s before
    assert kinds(screen._log(), "reply")[0].startswith("Sorry, I could not get an answer")


async def test_a_server_hearth_keeps_is_waited_for_while_it_comes_back(
    make_ext, settings_file, age_the_kernel
) -> None:
    """With ``models.local_server.start`` Hearth restarts the server after a crash, so a
    turn polls for it however long the kernel has run."""
    make_ext("screen", SCREEN, CAPTURE_MANIFEST)
    tries = []
    with socket.socket() as crashed:  # takes each connection and drops it, as a dying server
        crashed.bind(("127.0.0.1", 0))
        crashed.listen()

        def drop() -> None:
            while True:
                try:
                    conn, _ = crashed.accept()
                except OSError:
                    return
                tries.append(1)
                conn.close()

        threading.Thread(target=drop, daemon=True).start()
        url = f"http://127.0.0.1:{crashed.getsockname()[1]}/v1"
        models = {**models_section(url, max_retries=0), "local_server": {"start": True}}
        async with running_kernel(
            settings_file(channels={"default": "screen"}, models=models)
        ) as k:
            screen = k.loader.instance("screen")
            age_the_kernel(2 * STARTING_S)
            before = len(tries)
            await screen.say("Good morning!")
            await wait_for(lambda: len(tries) >= before + 3, timeout=30)  # it keeps asking
            assert kinds(screen._log(), "reply") == []
