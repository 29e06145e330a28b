"""``/setup EXTENSION`` in a chat: the extension's questions asked on the
channel, a secret answer applied and kept in ``.env`` but in no history."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys

from test_setup_wizard import WEATHER, WEATHER_MANIFEST

from conftest import PROJECT_ROOT
from support.bundled import copy_bundled

SECRET = "wx-chat-secret-123"


def test_setup_in_chat_applies_answers_and_keeps_the_secret_out_of_history(
    make_ext, settings_file, ext_root, tmp_path
):
    make_ext("weather", WEATHER, WEATHER_MANIFEST)
    copy_bundled(ext_root, "cli_channel")
    env_file = tmp_path / "secrets.env"

    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file())],
        input=f"/setup\n/setup weather\n{SECRET}\nParis\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HEARTH_ENV_FILE": str(env_file)},
    )
    out = result.stdout
    assert "Extensions with a setup: weather" in out, out
    assert "weather: Weather API key" in out and "weather: Which city" in out
    assert "Set up. weather: weather for Paris" in out
    assert SECRET not in out and SECRET not in result.stderr
    data = tmp_path / "data"
    assert (data / "extensions" / "weather" / "setup.json").read_text() == (
        '{"WEATHER_API_KEY": "(a key)", "city": "Paris"}'
    )
    assert f"WEATHER_API_KEY='{SECRET}'" in env_file.read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    # the conversation's history and the journaled question frames never hold it
    for path in data.glob("sessions.db*"):  # with its WAL
        assert SECRET.encode() not in path.read_bytes(), path
    with sqlite3.connect(data / "events.db") as db:
        frames = db.execute("SELECT payload FROM events WHERE topic LIKE 'hook.%'").fetchall()
    assert frames and not any(SECRET in payload for (payload,) in frames)
    assert any("(hidden)" in payload for (payload,) in frames)


async def test_setup_on_telegram_deletes_the_secret_answer_from_the_chat(
    make_ext, settings_file, ext_root, tmp_path, monkeypatch
):
    from support.fake_telegram import FakeTelegram
    from support.harness import running_kernel, wait_for
    from support.telegram_support import ALICE, install_extension, write_settings

    make_ext("weather", WEATHER, WEATHER_MANIFEST)
    install_extension(ext_root)
    env_file = tmp_path / "secrets.env"
    monkeypatch.setenv("HEARTH_ENV_FILE", str(env_file))
    with FakeTelegram() as tg:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", tg.token)
        async with running_kernel(write_settings(settings_file, tg)):
            tg.send_update("/setup weather", user_id=ALICE)
            await wait_for(lambda: any("Weather API key" in t for t in tg.chat_texts(ALICE)))
            assert "deleted once it is read" in tg.chat_texts(ALICE)[-1]
            secret_update = tg.send_update(SECRET, user_id=ALICE)
            await wait_for(lambda: any("Which city" in t for t in tg.chat_texts(ALICE)))
            tg.send_update("Paris", user_id=ALICE)
            await wait_for(
                lambda: any("Set up. weather: weather for Paris" in t for t in tg.chat_texts(ALICE))
            )
            deleted = tg.calls_of("deleteMessage")
            assert [int(c.params["message_id"]) for c in deleted] == [secret_update]
            assert not any(SECRET in t for t in tg.chat_texts(ALICE))
        assert f"WEATHER_API_KEY='{SECRET}'" in env_file.read_text()
        for path in (tmp_path / "data").glob("sessions.db*"):
            assert SECRET.encode() not in path.read_bytes(), path
