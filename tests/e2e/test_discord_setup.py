"""``main.py setup`` configures the Discord channel (its own ``SetupProvider``): the
token checked live against a fake Discord (a refused one asked again), the
allow-list filled from who writes a DM to the bot; then ``main.py doctor``
reports the channel set up, with the bot and whom it serves."""

from __future__ import annotations

import yaml
from test_cli_repl import Terminal
from test_doctor import doctor

from conftest import PROJECT_ROOT
from support.bundled import copy_bundled
from support.fake_discord import TOKEN, FakeDiscord
from support.fake_openai import FakeOpenAIServer

WRITER = 4242


def test_setup_checks_the_token_and_allows_who_writes_then_doctor_is_content(
    settings_file, ext_root, tmp_path, monkeypatch
):
    copy_bundled(ext_root, "discord_channel")
    env_file = tmp_path / "secrets.env"
    monkeypatch.setenv("HEARTH_ENV_FILE", str(env_file))
    monkeypatch.delenv("DISCORD_BOT_TOKEN", raising=False)
    with FakeOpenAIServer() as srv, FakeDiscord() as dc:
        settings = settings_file(
            extensions={"discord_channel": {"api_base_url": dc.base_url}}, timezone="local"
        )
        term = Terminal([str(PROJECT_ROOT / "main.py"), "setup", "--settings", str(settings)])
        term.expect("Which provider:")
        term.send("2\r")
        term.expect("Server address")
        term.send(srv.base_url + "\r")
        term.expect("API key, if the server wants one")
        term.send("\r")
        term.expect("Which model [fake-model]:")
        term.send("\r")
        term.expect("Prices of fake-model per 1M tokens")
        term.send("0 0 0\r")
        term.expect("Timezone for reminders")
        term.send("\x15Europe/Berlin\r")
        term.expect("Set up discord_channel [Y/n]:")
        term.send("\r")
        term.expect("Discord bot token (developer portal, Bot tab) (hidden):")
        term.send("not-a-token\r")
        term.expect("Discord refused the token (GET /users/@me: 401")  # asked again
        term.send(TOKEN + "\r")
        term.expect("Have them write a DM to hearth-bot")
        term.send("\r")
        dc.wait_until(dc.is_connected, timeout_s=60)  # the setup's own gateway connection
        dc.send_dm("hello", user_id=WRITER)
        term.expect(f"user{WRITER}, id {WRITER} wrote. Allow them [yes]:")
        term.send("\r")
        term.expect("Discord user ids to serve (a list)")
        term.send("\r")
        term.expect(f"ok: discord_channel: the bot hearth-bot serves {WRITER}")
        assert term.wait() == 0
        assert TOKEN.encode() not in term.output and b"Traceback" not in term.output
        assert dc.dm_texts(WRITER) == []  # the setup answers nobody

        written = yaml.safe_load(settings.with_name("settings.local.yaml").read_text())
        assert [int(i) for i in written["extensions"]["discord_channel"]["allowed_user_ids"]] == [
            WRITER
        ]
        assert f"DISCORD_BOT_TOKEN='{TOKEN}'" in env_file.read_text()

        checked = doctor(settings)
        assert "extension discord_channel: active" in checked.stdout, checked.stdout
        assert "discord_channel: the bot hearth-bot" in checked.stdout
        assert "1 user(s), 0 channel(s) served" in checked.stdout
        assert "secret DISCORD_BOT_TOKEN (discord_channel): set" in checked.stdout
        assert checked.returncode == 0, checked.stdout
