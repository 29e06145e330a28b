"""``main.py setup``: the wizard in a pseudo-terminal against the fake model
server and the fake Bot API, then ``main.py doctor`` on what it wrote; the
scripted form; and the one-line hint of ``make run`` with no model."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import yaml
from test_cli_repl import Terminal
from test_doctor import doctor

from conftest import PROJECT_ROOT, ext_code
from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer
from support.fake_telegram import TOKEN, FakeTelegram

LOCAL_KEY = "sk-local-very-secret"
WEATHER_KEY = "wx-key-very-secret"

WEATHER = ext_code(
    """
    def get_setup_schema(self):
        return [
            {"name": "WEATHER_API_KEY", "description": "Weather API key", "secret": True},
            {"name": "city", "prompt": "Which city", "default": "Berlin"},
        ]

    async def apply_config(self, name, value):
        import json
        path = self.ctx.data_dir / "setup.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data[name] = "(a key)" if name == "WEATHER_API_KEY" else value
        path.write_text(json.dumps(data))

    async def on_setup_complete(self):
        import json
        data = json.loads((self.ctx.data_dir / "setup.json").read_text())
        return True, f"weather for {data['city']}"
    """
)
WEATHER_MANIFEST = {"secrets": [{"name": "WEATHER_API_KEY", "optional": True}]}


def test_the_wizard_writes_settings_and_env_that_doctor_accepts(
    make_ext, settings_file, ext_root, tmp_path, monkeypatch
):
    make_ext("weather", WEATHER, WEATHER_MANIFEST)
    copy_bundled(ext_root, "telegram_channel")
    env_file = tmp_path / "secrets.env"
    env_file.write_text("# kept by the user\nOTHER_SECRET='stays'\n")
    monkeypatch.setenv("HEARTH_ENV_FILE", str(env_file))
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    with FakeOpenAIServer() as srv, FakeTelegram() as tg:
        settings = settings_file(
            extensions={"telegram_channel": {"api_base_url": tg.base_url}}, timezone="local"
        )
        settings.write_text("# my own comment\n" + settings.read_text())
        base_text = settings.read_text()
        term = Terminal([str(PROJECT_ROOT / "main.py"), "setup", "--settings", str(settings)])
        term.expect("Which provider:")
        term.send("2\r")
        term.expect("Server address")
        term.send(srv.base_url + "\r")
        term.expect("API key, if the server wants one")
        term.send(LOCAL_KEY + "\r")
        term.expect("Which model [fake-model]:")
        term.send("\r")
        term.expect("Prices of fake-model per 1M tokens")
        term.send("0.5 x 2\r")  # not three numbers: asked again
        term.expect("Three numbers, none negative")
        term.send("0.5 0.05 2\r")
        term.expect("Timezone for reminders")
        term.send("\x15Europe/Berlin\r")  # Ctrl-U clears the line first
        # the Telegram channel asks its own questions (its SetupProvider)
        term.expect("Set up telegram_channel [Y/n]:")
        term.send("\r")
        term.expect("Bot token from @BotFather (hidden):")
        term.send("not-a-token\r")
        term.expect("Telegram refused the token (getMe)")  # refused: asked again
        term.send(TOKEN + "\r")
        term.expect("Send /start to @hearth_test_bot")
        tg.send_update("/start", user_id=4242, username="ada")
        term.send("\r")
        term.expect("Ada (@ada), id 4242 wrote. Allow them [yes]:")
        term.send("\r")
        term.expect("Telegram user ids to serve (a list) [[4242]]:")
        term.send("\r")
        term.expect("set extensions.telegram_channel.allowed_user_ids")
        term.expect("ok: telegram_channel: the bot @hearth_test_bot serves 4242")
        term.expect("Set up weather [Y/n]:")
        term.send("\r")
        term.expect("Weather API key:")
        term.send(WEATHER_KEY + "\r")
        term.expect("Which city [Berlin]:")
        term.send("Paris\r")
        term.expect("ok: weather: weather for Paris")
        assert term.wait() == 0
        assert LOCAL_KEY.encode() not in term.output and TOKEN.encode() not in term.output
        assert WEATHER_KEY.encode() not in term.output and b"Traceback" not in term.output

        assert settings.read_text() == base_text  # the base file is never written
        text = settings.with_name("settings.local.yaml").read_text()
        assert text.startswith("# Your settings: what you (or `main.py setup`) changed")
        written = yaml.safe_load(text)
        assert written["models"]["default"] == {"provider": "local", "model": "fake-model"}
        price = {"input": 0.5, "cached_input": 0.05, "output": 2.0}
        assert written["models"]["prices"] == {"fake-model": price}
        local = written["models"]["providers"]["local"]
        assert local["base_url"] == srv.base_url and local["api_key_env"] == "LOCAL_MODEL_API_KEY"
        assert written["extensions"]["telegram_channel"]["allowed_user_ids"] == [4242]
        assert written["timezone"] == "Europe/Berlin"
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
        env_text = env_file.read_text()
        assert "# kept by the user" in env_text and "OTHER_SECRET='stays'" in env_text
        for line in (
            f"LOCAL_MODEL_API_KEY='{LOCAL_KEY}'",
            f"TELEGRAM_BOT_TOKEN='{TOKEN}'",
            f"WEATHER_API_KEY='{WEATHER_KEY}'",
        ):
            assert line in env_text
        assert LOCAL_KEY not in text and TOKEN not in text

        checked = doctor(settings)
        assert checked.returncode == 0, checked.stdout
        assert "secret TELEGRAM_BOT_TOKEN (telegram_channel): set" in checked.stdout
        assert "secret WEATHER_API_KEY (weather): set" in checked.stdout


def hearth(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def test_the_scripted_form_checks_the_model_and_writes_only_its_keys(settings_file, tmp_path):
    settings = settings_file()
    before = settings.read_text()
    local = settings.with_name("settings.local.yaml")
    env = {"HEARTH_ENV_FILE": str(tmp_path / "none.env")}
    with FakeOpenAIServer() as srv:
        refused = hearth(
            "setup",
            "--provider",
            "openai_compatible",
            "--base-url",
            srv.base_url,
            "--model",
            "no-such-model",
            "--settings",
            str(settings),
            env=env,
        )
        assert refused.returncode == 1 and "fake-model" in refused.stderr
        assert not local.exists()  # nothing written
        done = hearth(
            "setup",
            "--provider",
            "openai_compatible",
            "--base-url",
            srv.base_url,
            "--model",
            "fake-model-mini",
            "--settings",
            str(settings),
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert settings.read_text() == before
        provider = {"type": "openai_compatible", "base_url": srv.base_url}
        default = {"provider": "local", "model": "fake-model-mini"}
        models = {"default": default, "providers": {"local": provider}}
        assert yaml.safe_load(local.read_text()) == {"models": models}  # only its keys
        again = hearth(
            "setup",
            "--provider",
            "openai_compatible",
            "--base-url",
            srv.base_url,
            "--model",
            "fake-model-mini",
            "--settings",
            str(settings),
            env=env,
        )
        assert again.returncode == 0 and "nothing changed" in again.stdout
        assert doctor(settings, env).returncode == 0
    unreachable = hearth(
        "setup",
        "--provider",
        "openai_compatible",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--settings",
        str(settings),
        env=env,
    )
    assert unreachable.returncode == 1 and "nothing written" in unreachable.stderr
    no_key = hearth(
        "setup",
        "--provider",
        "openai",
        "--model",
        "gpt-5-mini",
        "--settings",
        str(settings),
        env={**env, "OPENAI_API_KEY": ""},
    )
    assert no_key.returncode == 1 and "OPENAI_API_KEY is not set" in no_key.stderr


def test_without_a_terminal_the_wizard_says_how_to_script_it(settings_file):
    result = hearth("setup", "--settings", str(settings_file()))
    assert result.returncode == 2 and "--provider" in result.stderr


def test_run_with_no_model_says_in_one_line_how_to_set_one_up(settings_file, ext_root):
    copy_bundled(ext_root, "cli_channel")  # stdin is empty: it reads the end and stops Hearth
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file())],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    hints = [line for line in result.stderr.splitlines() if "make setup" in line]
    assert len(hints) == 1 and "no model configured" in hints[0]
