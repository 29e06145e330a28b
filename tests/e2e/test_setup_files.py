"""The writers behind ``main.py setup``: the project's commented settings file
keeps everything but the changed keys; ``.env`` keeps other lines, mode 0600."""

from __future__ import annotations

import difflib
import shutil
import stat

import pytest
import yaml
from dotenv import dotenv_values

from conftest import PROJECT_ROOT
from core.config import SettingsError
from core.runtime import SecretNameError, save_secrets
from core.setup import write_changes


def test_only_the_changed_keys_of_the_commented_settings_file_change(tmp_path):
    path = tmp_path / "settings.yaml"
    shutil.copy(PROJECT_ROOT / "settings.yaml", path)
    original = path.read_text().splitlines()
    changed = write_changes(
        path,
        {
            ("models", "default"): {"provider": "local", "model": "llama3"},
            ("models", "providers", "local", "type"): "openai_compatible",
            ("models", "providers", "local", "base_url"): "http://127.0.0.1:11434/v1",
            ("timezone",): "Europe/Berlin",
            ("extensions", "telegram_channel", "allowed_user_ids"): [42, 7],
            ("paths", "data"): "sandbox/data",  # the value it has: not a change
        },
    )
    assert changed == [
        "models.default",
        "models.providers.local.type",
        "models.providers.local.base_url",
        "timezone",
        "extensions.telegram_channel.allowed_user_ids",
    ]
    now = path.read_text().splitlines()
    diff = list(difflib.ndiff(original, now))
    removed = [line[2:].split("#")[0].strip() for line in diff if line.startswith("- ")]
    added = [line[2:].split("#")[0].strip() for line in diff if line.startswith("+ ")]
    assert removed == [
        "timezone: local",
        "default: {provider: openai, model: gpt-5-mini}",
        "allowed_user_ids: []",
    ]
    assert added == [
        "timezone: Europe/Berlin",
        "default: {provider: local, model: llama3}",
        "local:",
        "type: openai_compatible",
        "base_url: http://127.0.0.1:11434/v1",
        "allowed_user_ids: [42, 7]",
    ]
    kept_comments = [line for line in diff if line.startswith("+ ") and "#" in line]
    assert len(kept_comments) == 3  # each changed line keeps its comment
    assert "history_max_tokens: null" in path.read_text()
    assert write_changes(path, {("timezone",): "Europe/Berlin"}) == []


def test_a_change_that_would_not_load_is_refused_and_nothing_written(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("# mine\ntimezone: UTC\n")
    with pytest.raises(SettingsError, match=r"settings.yaml: models.default"):
        write_changes(path, {("models", "default"): {"provider": "x"}})
    assert path.read_text() == "# mine\ntimezone: UTC\n"


def test_secrets_replace_their_lines_keep_the_rest_and_are_private(tmp_path):
    env = tmp_path / ".env"
    env.write_text("# comment\nA=1\nTOKEN=old\nexport B='two'\nTOKEN=older\n")
    env.chmod(0o644)
    save_secrets({"TOKEN": 'n\'ew "v"', "NEW_ONE": "x y"}, env)
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    lines = env.read_text().splitlines()
    assert lines[:2] == ["# comment", "A=1"] and lines.count("export B='two'") == 1
    assert dotenv_values(env) == {"A": "1", "TOKEN": 'n\'ew "v"', "B": "two", "NEW_ONE": "x y"}
    with pytest.raises(SecretNameError, match="not a valid environment variable name"):
        save_secrets({"BAD NAME": "v"}, env)
    with pytest.raises(SecretNameError, match="line break"):
        save_secrets({"OK": "a\nb"}, env)


def test_the_written_settings_file_still_reads_as_yaml(tmp_path):
    path = tmp_path / "fresh.yaml"
    assert write_changes(path, {("timezone",): "UTC"}) == ["timezone"]
    assert yaml.safe_load(path.read_text()) == {"timezone": "UTC"}
