"""Soak: a Telegram daemon whose kernel is SIGKILLed again and again answers
every message once, in order, and fires every reminder once (issue 41).

``main.py daemon`` runs the real supervisor and kernel with the bundled
Telegram, scheduler, kv and memory extensions against the fake Bot API and the
fake OpenAI server (echo). One user sends a message every ``SEND_EVERY_S`` and
now and then a ``/remind``; the kernel child (never the supervisor) is killed
every 8–15 s (a seeded random, so a failing run can be repeated). Then the
sending stops, the killing stops, and the daemon is given time to catch up.

``HEARTH_SOAK_S`` sets how long messages are sent (default 45 s; the issue's
run was 150 s, a message every 1.25 s, and left 14-17 unanswered).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from conftest import PROJECT_ROOT
from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer, models_section
from support.fake_telegram import FakeTelegram
from support.kernel_process import wait_until
from support.telegram_support import ALICE, telegram_config

SOAK_S = float(os.environ.get("HEARTH_SOAK_S", "45"))
# faster than one chat drained on main (~0.9 a second); HEARTH_SOAK_EVERY_S changes it
SEND_EVERY_S = float(os.environ.get("HEARTH_SOAK_EVERY_S", "0.6"))
REMIND_EVERY = 8  # every 8th message is a /remind (10 in the 150 s run)
REMIND_DELAY_S = 10
# the daemon had 90 s to catch up and left 14-17 messages unanswered; a kernel
# starting on a loaded 2-core machine can take 20 s, so this is generous on purpose
CATCH_UP_S = 90.0


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (the supervisor's kernel child)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


class _Killer(threading.Thread):
    """SIGKILLs the daemon's kernel child every 8–15 s until stopped."""

    def __init__(self, supervisor: int, seed: int) -> None:
        super().__init__(name="soak-killer", daemon=True)
        self.supervisor = supervisor
        self.random = random.Random(seed)
        self.stopped = threading.Event()
        self.kills = 0

    def run(self) -> None:
        while not self.stopped.wait(self.random.uniform(8.0, 15.0)):
            for pid in _children(self.supervisor):
                try:
                    os.kill(pid, signal.SIGKILL)
                    self.kills += 1
                except ProcessLookupError:
                    pass


def _once(texts: list[str]) -> list[str]:
    """``texts`` with each one's repeats left out (first occurrences, in order)."""
    return list(dict.fromkeys(texts))


def _replies(tg: FakeTelegram) -> list[str]:
    return tg.chat_texts(ALICE)


def test_a_daemon_killed_every_few_seconds_answers_every_message_once(
    tmp_path: Path, ext_root: Path, settings_file: Callable[..., Path]
) -> None:
    copy_bundled(ext_root, "telegram_channel", "scheduler", "kv", "memory")
    seed = int(os.environ.get("HEARTH_SOAK_SEED", "41"))
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        settings = settings_file(
            channels={"default": "telegram_channel"},
            extensions={
                "telegram_channel": telegram_config(tg),
                "memory": {"embeddings": {"backend": "none"}},
            },
            models=models_section(model.base_url),
            logging={"level": os.environ.get("HEARTH_SOAK_LOG", "INFO")},
            supervisor={
                "max_crashes": 10_000,
                "backoff_initial_s": 0.2,
                "backoff_max_s": 1.0,
            },
        )
        env = {**os.environ, "TELEGRAM_BOT_TOKEN": tg.token, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        log = tmp_path / "daemon.stderr"
        with log.open("wb") as err:
            daemon = subprocess.Popen(
                [sys.executable, "main.py", "daemon", "--settings", str(settings)],
                cwd=PROJECT_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        killer = _Killer(daemon.pid, seed)
        sent: list[str] = []
        reminders: list[str] = []
        try:
            tg.wait_until(lambda: tg.calls_of("getUpdates"), timeout_s=120)
            killer.start()
            started = time.monotonic()
            index = 0
            while time.monotonic() - started < SOAK_S:
                index += 1
                if index % REMIND_EVERY == 0:
                    text = f"r{index}"
                    reminders.append(text)
                    tg.send_update(f"/remind {REMIND_DELAY_S}s {text}", user_id=ALICE)
                else:
                    sent.append(f"m{index}")
                    tg.send_update(f"m{index}", user_id=ALICE)
                time.sleep(SEND_EVERY_S)  # the user's pace, not a synchronisation
            killer.stopped.set()
            killer.join()

            expected = [f"echo: {text}" for text in sent]

            def caught_up() -> bool:
                replies = _replies(tg)
                echoes = _once([r for r in replies if r.startswith("echo: ")])
                fired = {r for r in replies if r.startswith("⏰")}
                return len(echoes) >= len(expected) and len(fired) >= len(reminders)

            def progress() -> str:
                replies = _replies(tg)
                echoes = {r for r in replies if r.startswith("echo: ")}
                missing = [e for e in expected if e not in echoes]
                return (
                    f"{len(expected) - len(missing)}/{len(expected)} answered after "
                    f"{killer.kills} kills; missing {missing}; replies {replies}"
                )

            wait_until(caught_up, timeout_s=CATCH_UP_S, describe=progress)
            # a settled daemon: one more poll round answers nothing twice
            polled = len(tg.calls_of("getUpdates")) + 3
            tg.wait_until(lambda: len(tg.calls_of("getUpdates")) >= polled, timeout_s=60)
        finally:
            killer.stopped.set()
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()

        replies = _replies(tg)
        # an answer streamed in well within edit_interval_s is one message: no turn waited
        # out the interval for an edit while it held the conversation (main: all of them)
        edited = [m.text for m in tg.messages(ALICE) if m.edits]
        assert not edited, edited
        assert killer.kills >= 2, killer.kills
        # every message answered, in order, and every reminder fired. A kill that lands
        # between Telegram taking a message and the kernel recording that it was sent
        # (a few milliseconds: the Bot API has no idempotent send) re-sends that one
        # message after the restart: one repeat per kill at most (a chat's replies go
        # one at a time), each a single copy. Mostly none or one; a loaded machine
        # widens the window, and two kills in one run have both landed in it
        echoes = [r for r in replies if r.startswith("echo: ")]
        fired = sorted(r for r in replies if r.startswith("⏰"))
        confirmations = [r for r in replies if r.startswith("Reminder #")]
        repeats = (
            len(echoes)
            - len(_once(echoes))
            + len(fired)
            - len(set(fired))
            + len(confirmations)
            - len(set(confirmations))
        )
        assert _once(echoes) == expected, progress()
        assert sorted(set(fired)) == sorted(f"⏰ Reminder: {text}" for text in reminders), fired
        assert len(set(confirmations)) == len(reminders), confirmations
        assert repeats <= killer.kills, (killer.kills, replies)
        sent = echoes + fired + confirmations
        assert all(sent.count(text) <= 2 for text in sent), replies
        shutdown = log.read_text(errors="replace").rpartition("received SIGTERM")[2]
        assert "handlers still running" not in shutdown, shutdown[-3000:]
