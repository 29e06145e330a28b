"""Settings validation, env overrides, path resolution; log format and redaction."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT
from core.config import SettingsError, load_settings
from core.runtime import REDACTOR, configure_logging


def test_defaults_without_a_file_and_project_relative_paths():
    settings = load_settings()
    assert settings.data_dir == PROJECT_ROOT / "sandbox" / "data"
    assert settings.isolation.call_timeout_s == 30
    assert settings.channels.default == "cli_channel"


def test_partial_file_and_env_override(tmp_path, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text("events:\n  synchronous: full\n")
    monkeypatch.setenv("HEARTH__EVENTS__MAX_ATTEMPTS", "9")
    settings = load_settings(path)
    assert settings.events.synchronous == "full"  # from the file
    assert settings.events.max_attempts == 9  # from the environment
    assert settings.events.poll_interval_s == 1.0  # default


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("evnets:\n  synchronous: full\n", "evnets: Extra inputs are not permitted"),
        ("events:\n  synchronous: sometimes\n", "events.synchronous"),
        ("- just\n- a list\n", "top level must be a mapping"),
        ("paths: [\n", "not valid YAML"),
    ],
)
def test_bad_settings_name_file_and_key(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_bad_settings_exit_2_with_a_clear_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("timezone: [1]\nunknown_section: {}\n")
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "extensions", "--settings", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown_section" in result.stderr and str(path) in result.stderr


def test_secrets_are_redacted_and_json_format(capsys):
    configure_logging("INFO", "json")
    REDACTOR.add(["tok-123456-secret"])
    logging.getLogger("ext.demo").info("calling with token %s", "tok-123456-secret")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["logger"] == "ext.demo" and record["level"] == "INFO"
    assert "tok-123456-secret" not in line and "***" in record["message"]
    configure_logging("INFO", "text")


async def test_kernel_redacts_declared_secrets_and_model_keys(
    make_ext, settings_file, monkeypatch, capsys
):
    from conftest import ext_code
    from core.kernel.runner import Kernel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789")
    monkeypatch.setenv("PLUGIN_TOKEN", "plugin-secret-value")
    make_ext("needs", ext_code(), {"secrets": ["PLUGIN_TOKEN"]})
    configure_logging("INFO", "text")
    kernel = Kernel(load_settings(settings_file(models={"default": None})))
    await kernel.load()
    logging.getLogger("ext.needs").warning(
        "oops %s %s", "sk-live-0123456789", "plugin-secret-value"
    )
    err = capsys.readouterr().err
    assert "sk-live-0123456789" not in err and "plugin-secret-value" not in err
    assert "oops *** ***" in err
