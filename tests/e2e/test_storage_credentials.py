"""Issue 28 item 12: the PostgreSQL password never shows, and hooks get no storage credentials.

A DSN may carry its password in the URL's user part, as ``?password=`` or as a
libpq ``password=`` word; ``doctor``, ``events``, errors and logs showed the
last two in clear, and command hooks inherited the whole DSN from the
kernel's environment.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT
from core.config import load_settings
from core.extensions.contract import TurnContext
from core.extensions.loading.capabilities import Capability
from core.kernel.reload.registrations import before_extension_code
from core.kernel.runner import Kernel
from core.runtime import REDACTOR
from core.storage import dsn_passwords, redact_dsn

PASSWORD = "hunter2-Secret"


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://bob:hunter2-Secret@db/h", "postgresql://bob:***@db/h"),
        ("postgresql://bob:hunter2%2DSecret@db/h", "postgresql://bob:***@db/h"),
        (
            "postgresql://bob@db/h?sslmode=require&password=hunter2-Secret",
            "postgresql://bob@db/h?sslmode=require&password=***",
        ),
        (
            "postgres://db/h?password=hunter2-Secret&user=bob",
            "postgres://db/h?password=***&user=bob",
        ),
        (
            "host=db user=bob password=hunter2-Secret dbname=h",
            "host=db user=bob password=*** dbname=h",
        ),
        ("host=db password = 'hunter2-Secret x' user=bob", "host=db password = *** user=bob"),
        ("host=db PASSWORD=hunter2-Secret", "host=db PASSWORD=***"),
    ],
)
def test_every_form_of_the_password_is_redacted(dsn: str, shown: str):
    assert redact_dsn(dsn) == shown
    assert PASSWORD in " ".join(dsn_passwords(dsn))
    assert "hunter2" not in redact_dsn(f"error: could not use {dsn!r}")


def main_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_doctor_and_events_never_print_a_query_password(settings_file, postgres_dsn):
    reachable = f"{postgres_dsn}&password={PASSWORD}"
    missing = reachable.replace("/hearth_test_", "/no_such_db_", 1)  # pg_helpers' names
    doctor_settings = settings_file(storage={"backend": "postgres", "postgres_dsn": reachable})
    doctor = main_py("doctor", "--settings", str(doctor_settings))
    assert "storage: PostgreSQL" in doctor.stdout, doctor.stdout
    assert "password=***" in doctor.stdout
    events_settings = settings_file(storage={"backend": "postgres", "postgres_dsn": missing})
    events = main_py("events", "--json", "--settings", str(events_settings))
    assert events.returncode != 0
    assert "password=***" in events.stderr, events.stderr
    for result in (doctor, events):
        assert PASSWORD not in result.stdout + result.stderr


def test_a_log_line_echoing_the_dsn_hides_the_password(settings_file, caplog):
    dsn = f"host=127.0.0.1 user=root password={PASSWORD}"
    settings = load_settings(settings_file(storage={"postgres_dsn": dsn}))
    before_extension_code([], settings, {})
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "driver said: %s", (dsn,), None)
    REDACTOR.filter(record)
    assert PASSWORD not in record.getMessage()


async def test_a_command_hook_gets_no_storage_credentials(
    settings_file, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A hook command that dumps its environment: the DSN (from the environment or
    another variable holding it) and libpq's variables are not in it."""
    dsn = "postgresql://root@127.0.0.1:5432/hearth"  # no password: still a credential
    monkeypatch.setenv("HEARTH__STORAGE__POSTGRES_DSN", f"{dsn}?password={PASSWORD}")
    monkeypatch.setenv("DATABASE_URL", f"{dsn}?password={PASSWORD}")
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("PGSERVICE", "hearth")
    monkeypatch.setenv("HOOK_TEST_PLAIN", "visible")
    dump = tmp_path / "dump.py"
    dump.write_text(
        "import json, os, sys\nsys.stdin.read()\n"
        f"json.dump(dict(os.environ), open({str(tmp_path / 'env.json')!r}, 'w'))\n"
    )
    command = [sys.executable, str(dump)]
    path = settings_file(hooks={"commands": [{"hook": "on_turn_start", "command": command}]})
    kernel = Kernel(load_settings(path))
    assert kernel.settings.storage.postgres_dsn  # the kernel itself has it
    [entry] = kernel.hook_registry.at(Capability.TURN_START)

    await entry.target.on_turn_start(TurnContext(channel_id="c", user_id="u", turn_id="t"))

    env = json.loads((tmp_path / "env.json").read_text())
    assert env["HOOK_TEST_PLAIN"] == "visible"
    leaked = {k: v for k, v in env.items() if PASSWORD in v or dsn in v or k.startswith("PG")}
    assert leaked == {}
