"""``main.py doctor``: says what is wrong and exits non-zero on a problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import PROJECT_ROOT, ext_code
from support.fake_openai import FakeOpenAIServer, models_section


def doctor(settings: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "doctor", "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=120,  # a deadline against a hang only: test workers share the cores
        env={**os.environ, **(env or {})},
    )


def test_healthy_installation_passes(make_ext, settings_file):
    make_ext("needs_token", ext_code(), {"secrets": ["DEMO_TOKEN"]})
    with FakeOpenAIServer() as srv:
        result = doctor(settings_file(models=models_section(srv.base_url)), {"DEMO_TOKEN": "t0k3n"})
    assert result.returncode == 0, result.stdout
    assert "provider local" in result.stdout and "fake-model" in result.stdout
    assert "secret DEMO_TOKEN (needs_token): set" in result.stdout
    assert "doctor: no problems found" in result.stdout


def test_problems_are_named_and_exit_non_zero(make_ext, settings_file):
    make_ext("needs_token", ext_code(), {"secrets": ["DEMO_TOKEN_MISSING"]})
    make_ext("broken", ext_code(), {"entrpoint": "typo"})
    result = doctor(settings_file(models=models_section("http://127.0.0.1:9/v1")))
    assert result.returncode == 1
    out = result.stdout
    assert "FAIL provider local" in out
    assert "FAIL extension broken: error" in out and "entrpoint: unknown key" in out
    assert "FAIL secret DEMO_TOKEN_MISSING (needs_token): not set" in out


def test_doctor_checks_postgres_connection_and_schema(settings_file, postgres_dsn):
    storage = {"backend": "postgres", "postgres_dsn": postgres_dsn}
    with FakeOpenAIServer() as srv:
        fresh = doctor(settings_file(models=models_section(srv.base_url), storage=storage))
        assert fresh.returncode == 0, fresh.stdout
        assert "ok   storage: PostgreSQL" in fresh.stdout
        assert "schema journal: version 0, migrated to version 1 at the next start" in fresh.stdout
        # the stores' components (ADR 0035); sessions' ids were escaped in 2 (ADR 0048) and
        # the ledger says when a reply was sent in 3 (ADR 0072),
        # state's second holds each node's extensions (ADR 0039)
        for store, newest in (("sessions", 4), ("state", 2), ("schedules", 1)):
            assert f"schema {store}: version 0, migrated to version {newest}" in fresh.stdout

        import asyncio

        from core.events.pg_journal import PostgresJournal

        asyncio.run(PostgresJournal(postgres_dsn).counts())  # migrates, as a kernel start would
        migrated = doctor(settings_file(models=models_section(srv.base_url), storage=storage))
    assert "schema journal: version 1 (current)" in migrated.stdout


def test_doctor_names_an_unreachable_postgres(settings_file):
    storage = {"backend": "postgres", "postgres_dsn": "postgresql://h:pw@127.0.0.1:1/hearth"}
    with FakeOpenAIServer() as srv:
        result = doctor(settings_file(models=models_section(srv.base_url), storage=storage))
    assert result.returncode == 1
    assert (
        "FAIL storage: storage.postgres_dsn postgresql://h:***@127.0.0.1:1/hearth" in result.stdout
    )
    assert "pw@" not in result.stdout


def test_an_unused_provider_is_a_warning_not_a_failure(settings_file):
    """After ``setup`` with a local server the shipped ``openai`` provider has no key:
    no model names it, so doctor warns and still passes (issue 30)."""
    with FakeOpenAIServer() as srv:
        models = models_section(srv.base_url)
        models["providers"]["openai"] = {"type": "openai"}  # no OPENAI_API_KEY here
        result = doctor(settings_file(models=models), {"OPENAI_API_KEY": ""})
    out = result.stdout
    assert result.returncode == 0, out
    assert "WARN provider openai (no model uses it):" in out
    assert "FAIL provider" not in out and "doctor: no problems found" in out


def test_a_provider_named_only_by_an_agent_still_fails_when_unreachable(settings_file):
    models = models_section("http://127.0.0.1:9/v1")
    models["providers"]["spare"] = dict(models["providers"]["local"])
    models["agents"] = {"researcher": {"provider": "spare", "model": "fake-model"}}
    result = doctor(settings_file(models=models))
    assert result.returncode == 1
    assert "FAIL provider spare" in result.stdout and "FAIL provider local" in result.stdout


def test_a_channel_never_set_up_is_not_a_failure(make_ext, settings_file):
    """A fresh install without Telegram's token: its channel reads "not set up" and
    does not count as a problem; the same channel made the default one does."""
    manifest = {"secrets": ["CHAT_TOKEN_UNSET"], "permissions": {"user_messages": True}}
    make_ext("chat_channel", ext_code(), manifest)
    with FakeOpenAIServer() as srv:
        models = models_section(srv.base_url)
        result = doctor(settings_file(models=models))
        assert result.returncode == 0, result.stdout
        assert "off  extension chat_channel: not set up (CHAT_TOKEN_UNSET is not set" in (
            result.stdout
        )
        assert "FAIL" not in result.stdout and "doctor: no problems found" in result.stdout

        chosen = doctor(settings_file(models=models, channels={"default": "chat_channel"}))
    assert chosen.returncode == 1
    assert "FAIL secret CHAT_TOKEN_UNSET (chat_channel): not set" in chosen.stdout
