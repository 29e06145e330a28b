"""Setting up the e-mail channel and checking it, against Dovecot and aiosmtpd:
``main.py setup``'s questions check the password live (an IMAP login and an
SMTP login) and ask again when it is refused; ``doctor`` shows the mailbox
and servers, fails a refused password with the server's words, and reads
"not set up" for a channel nobody set up."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT
from support.email_support import (
    BOT,
    PASSWORD,
    SOURCE_DIR,
    Dovecot,
    SmtpSink,
    free_port,
    install_extension,
    mail,
    servers_missing,
    write_settings,
)
from support.fake_openai import FakeOpenAIServer, models_section

pytestmark = pytest.mark.skipif(servers_missing() is not None, reason=str(servers_missing()))


@pytest.fixture
def dovecot():
    server = Dovecot().start()
    yield server
    server.stop()


@pytest.fixture
def smtp():
    sink = SmtpSink().start()
    yield sink
    sink.stop()


def test_doctor_checks_the_login_live(dovecot, smtp, ext_root, settings_file):
    install_extension(ext_root)
    with FakeOpenAIServer() as model:
        settings = write_settings(
            settings_file,
            dovecot,
            smtp,
            ["alice@family.test"],
            sections={"models": models_section(model.base_url)},
        )
        good = _doctor(settings, PASSWORD)
        refused = _doctor(settings, "wrong")
    servers = f"on 127.0.0.1:{dovecot.port} (IDLE), sends through 127.0.0.1:{smtp.port}"
    assert f"email_channel: {BOT}: reads INBOX {servers}" in good.stdout, good.stdout
    assert "serving 1 sender(s)" in good.stdout
    assert "doctor: no problems found" in good.stdout
    assert refused.returncode == 1
    assert "FAIL extension email_channel" in refused.stdout
    assert f"the IMAP server 127.0.0.1 refused the login of {BOT}" in refused.stdout
    assert "the SMTP server 127.0.0.1 refused the login (535" in refused.stdout, refused.stdout


def test_doctor_reads_not_set_up_when_nobody_set_it_up(ext_root, settings_file):
    install_extension(ext_root)
    with FakeOpenAIServer() as model:
        settings = settings_file(models=models_section(model.base_url))
        done = _doctor(settings, None)
    assert "off  extension email_channel: not set up (EMAIL_PASSWORD is not set" in done.stdout, (
        done.stdout
    )
    assert "FAIL extension email_channel" not in done.stdout


async def test_setup_checks_the_password_live(dovecot, smtp):
    module = _module("setup")
    config = _module("config").parse_config(lambda key, default: default)
    flow = module.EmailSetup("EMAIL_PASSWORD", None, config)
    answers = {
        "address": BOT,
        "imap_host": "127.0.0.1",
        "imap_security": "none",
        "imap_port": str(dovecot.port),
        "smtp_host": "127.0.0.1",
        "smtp_security": "none",
        "smtp_port": str(smtp.port),
        "username": "",
    }
    for name, value in answers.items():
        assert flow.schema(running=False)[-1]["name"] == name
        await flow.apply(name, value)
    assert flow.schema(running=False)[-1]["name"] == "EMAIL_PASSWORD"
    with pytest.raises(ValueError, match=f"refused the login of {BOT}"):
        await flow.apply("EMAIL_PASSWORD", "wrong")
    dovecot.deliver(mail("Alice <Alice@Family.test>", "hi"))
    dovecot.deliver(mail("bob@family.test", "hello"))
    dovecot.deliver(mail("Alice <alice@family.test>", "again"))
    await flow.apply("EMAIL_PASSWORD", PASSWORD)
    # who wrote lately is offered, newest first, each once: Enter takes them
    offered = flow.schema(running=False)[-1]
    assert offered["name"] == "allowed_senders"
    assert json.loads(offered["default"]) == ["alice@family.test", "bob@family.test"]
    assert "who wrote lately: alice@family.test, bob@family.test" in offered["prompt"]
    with pytest.raises(ValueError, match="not an e-mail address"):
        await flow.apply("allowed_senders", '["alice"]')
    await flow.apply("allowed_senders", '["Alice@Family.test", "bob@family.test"]')
    assert [f["name"] for f in flow.schema(running=False)][-2:] == [
        "EMAIL_PASSWORD",
        "allowed_senders",
    ]
    done, summary = await flow.complete(running=False)
    assert done and summary.startswith(f"{BOT} answers alice@family.test, bob@family.test")


async def test_setup_names_a_server_it_cannot_reach(dovecot):
    module = _module("setup")
    config = _module("config").parse_config(
        {
            "address": BOT,
            "imap_host": "127.0.0.1",
            "imap_port": dovecot.port,
            "imap_security": "none",
            "smtp_host": "127.0.0.1",
            "smtp_port": free_port(),  # nobody listens there
            "smtp_security": "none",
        }.get
    )
    refused, unreachable = await module.check_login(config, PASSWORD)
    assert refused == []
    assert [u.split(":")[0] for u in unreachable] == ["cannot reach the SMTP server 127.0.0.1"]


def _module(name: str):  # type: ignore[no-untyped-def]
    """One module of the extension, loaded as its package's (relative imports work)."""
    package = "email_channel_under_test"
    if package not in sys.modules:
        parent = types.ModuleType(package)
        parent.__path__ = [str(SOURCE_DIR)]
        sys.modules[package] = parent
    return importlib.import_module(f"{package}.{name}")


def _doctor(settings: Path, password: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EMAIL_PASSWORD"}
    if password is not None:
        env["EMAIL_PASSWORD"] = password
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "doctor", "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
