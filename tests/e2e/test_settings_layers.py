"""The user's settings apart from the defaults (ADR 0045): ``setup`` writes the
git-ignored ``settings.local.yaml`` and never the tracked ``settings.yaml``, so
a pulled change of a default is seen while the user's choices still win;
``doctor`` names the file or variable that set each key that is not the default."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_doctor import doctor

from conftest import PROJECT_ROOT
from core.config import SettingsError, load_settings, non_defaults
from core.setup import SetupPlan


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the shipped, commented ``settings.yaml`` (the tracked base file)."""
    path = tmp_path / "settings.yaml"
    shutil.copy(PROJECT_ROOT / "settings.yaml", path)
    return path


def run_setup(base: Path, plan: SetupPlan) -> list[str]:
    """What ``main.py setup`` does with its answers: the local layer over the base."""
    settings = load_settings(base)
    target = settings.local_settings_file
    below = tuple(layer for layer in settings.layers if layer.path.resolve() != target)
    return plan.write(target, base.parent / ".env", below)


def test_setup_writes_the_local_layer_and_leaves_settings_yaml_byte_identical(project):
    shipped = project.read_bytes()
    plan = SetupPlan()
    plan.use_timezone("Europe/Berlin")
    plan.use_model("openai", "gpt-5-mini", base_url=None, api_key_env=None)  # the default
    lines = run_setup(project, plan)
    local = project.with_name("settings.local.yaml")
    assert lines == [f"{local}: set timezone"]  # what settings.yaml already says is not copied
    assert project.read_bytes() == shipped
    text = local.read_text()
    assert text.startswith("# Your settings:") and text.rstrip().endswith("timezone: Europe/Berlin")
    assert load_settings(project).timezone == "Europe/Berlin"
    assert "settings.local.yaml" in (PROJECT_ROOT / ".gitignore").read_text().splitlines()


def test_a_pulled_change_of_a_default_is_seen_while_the_users_key_still_wins(project):
    plan = SetupPlan()
    plan.use_timezone("Europe/Berlin")
    run_setup(project, plan)
    pulled = project.read_text()
    for old, new in (("timezone: local", "timezone: UTC"), ("timeout_s: 120", "timeout_s: 90")):
        assert old in pulled
        pulled = pulled.replace(old, new, 1)
    project.write_text(pulled)  # as `git pull` would: no conflict, the file was never edited
    settings = load_settings(project)
    assert settings.turns.timeout_s == 90  # the new default
    assert settings.timezone == "Europe/Berlin"  # the user's choice


def test_doctor_names_the_layer_of_every_key_that_is_not_the_default(project, monkeypatch):
    local = project.with_name("settings.local.yaml")
    local.write_text("timezone: Europe/Berlin\nturns: {timeout_s: 60, concurrency: 8}\n")
    monkeypatch.setenv("HEARTH__TURNS__CONCURRENCY", "4")
    monkeypatch.setenv("HEARTH__LOGGING__LEVEL", "DEBUG")
    monkeypatch.setattr("core.config.settings.DEFAULT_SETTINGS_FILE", project)  # the tracked one
    found = dict(non_defaults(load_settings(project)))
    assert found == {
        "timezone": str(local),
        "turns.timeout_s": str(local),
        "turns.concurrency": "HEARTH__TURNS__CONCURRENCY",
        "logging.level": "HEARTH__LOGGING__LEVEL",
    }  # the shipped file's own keys (extensions.http_api.listen, ...) are defaults


def test_main_py_doctor_prints_where_each_changed_key_was_set(settings_file):
    base = settings_file(timezone="UTC")  # a --settings file: its keys are the user's
    local = base.with_name("settings.local.yaml")
    local.write_text("turns: {timeout_s: 60}\n")
    out = doctor(base).stdout
    assert f"settings: {base} + {local}" in out
    assert f"setting timezone: set in {base}" in out
    assert f"setting turns.timeout_s: set in {local}" in out


def test_a_settings_file_reads_its_own_local_layer(tmp_path):
    base = tmp_path / "prod.yaml"
    base.write_text("timezone: UTC\nlogging: {level: WARNING}\n")
    (tmp_path / "prod.local.yaml").write_text("timezone: Asia/Tokyo\n")
    (tmp_path / "settings.local.yaml").write_text("timezone: Europe/Paris\n")  # not prod's
    settings = load_settings(base)
    assert (settings.timezone, settings.logging.level) == ("Asia/Tokyo", "WARNING")
    assert settings.local_settings_file == tmp_path / "prod.local.yaml"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("turns: {timeout_s: -1}\n", r"settings\.local\.yaml: turns\.timeout_s: .*greater than 0"),
        ("turns: {timeout: 5}\n", r"settings\.local\.yaml: turns\.timeout: Extra inputs"),
        ("turns: [oops\n", r"settings\.local\.yaml: not valid YAML"),
        ("- a list\n", r"settings\.local\.yaml: top level must be a mapping"),
    ],
)
def test_a_malformed_local_layer_is_an_error_naming_the_file_and_the_field(project, text, message):
    project.with_name("settings.local.yaml").write_text(text)
    with pytest.raises(SettingsError, match=message) as raised:
        load_settings(project)
    assert f"{project}:" not in str(raised.value)  # the base file is not to blame


def test_an_extension_setting_from_the_environment_reads_like_its_yaml_line(tmp_path, monkeypatch):
    """A number for an extension set in the environment is a number, as in settings.yaml:
    the HTTP API takes ``REPLY_TIMEOUT_S=4`` instead of refusing ``'4'`` (issue 30)."""
    from sandbox.extensions.http_api.config import parse_config

    path = tmp_path / "settings.yaml"
    path.write_text("extensions: {http_api: {listen: '127.0.0.1:0'}}\n")
    env = {
        "REPLY_TIMEOUT_S": "4",
        "BODY_TIMEOUT_S": "0.5",
        "DEFAULT_CONVERSATION": "ops",
        "FLAG": "true",
        "ITEMS": "[1, two]",
        "MOTTO": "Hi: there #1",
        "ZIP": "012a",
    }
    for key, value in env.items():
        monkeypatch.setenv(f"HEARTH__EXTENSIONS__HTTP_API__{key}", value)
    values = load_settings(path).extensions["http_api"]
    assert values["reply_timeout_s"] == 4 and values["body_timeout_s"] == 0.5
    assert values["flag"] is True and values["items"] == [1, "two"]
    # text stays text, whatever YAML would make of it unquoted
    assert values["motto"] == "Hi: there #1" and values["zip"] == "012a"
    assert values["default_conversation"] == "ops"
    config = parse_config(lambda key, default: values.get(key, default))
    assert config.reply_timeout_s == 4.0 and config.body_timeout_s == 0.5
