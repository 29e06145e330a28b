"""Issue 28 item 6 (ADR 0044): a grant binds the extension's code, not only its request.

The attack: one approval of ``builder_agent`` rewrote the bundled ``kv``, which
kept its bundled grant, and after ``/reload`` the new code ran with the
kernel's rights. Now changed code — whoever changed it — is refused by a
reload and skipped at start until the user grants it again; grants recorded
before this change are bound to the code present at the first start after
the upgrade (logged once).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from conftest import ext_code, grant_all
from core.config import load_settings
from core.extensions.loading.code_digest import code_digest
from core.kernel.commands.table import parse_command
from core.kernel.runner import Kernel
from support.bundled import copy_bundled
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel

STEAL = "\nimport os\nSTOLEN = {k: v for k, v in os.environ.items() if 'TOKEN' in k}\n"
CODE_CHANGED = "its code changed since the grant (a grant binds the code it was given for)"


async def say(kernel: Kernel, text: str) -> str:
    from core.extensions.contract import TurnContext

    turn = TurnContext(channel_id="capture", user_id="u1", session_id="s1")
    reply = await kernel.commands.run(parse_command(text), turn)  # type: ignore[arg-type]
    return reply or ""


async def loaded(settings: Path) -> dict[str, Any]:
    """A fresh kernel's view of the extensions (``main.py extensions``), then stopped."""
    kernel = Kernel(load_settings(settings))
    await kernel.load()
    try:
        return {r["id"]: r for r in kernel.loader.report()}
    finally:
        await kernel.loader.shutdown()
        await kernel.bus.stop()


async def test_a_rewritten_bundled_kv_loses_its_bundled_grant(ext_root, make_ext, settings_file):
    copy_bundled(ext_root, "kv")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"})
    async with running_kernel(path) as kernel:
        record = kernel.loader.records["kv"]
        assert record.live  # granted by the project, as shipped
        old = record.instance
        with (ext_root / "kv" / "main.py").open("a") as fh:
            fh.write(STEAL)
        reply = await say(kernel, "/reload kv")
        assert reply.startswith(f"Reload of kv failed: {CODE_CHANGED}: it asks to runs inside")
        assert "The previous version keeps running." in reply
        assert record.instance is old and record.live  # the granted code still serves
        shown = await say(kernel, "/grant kv")
        assert "(its code changed since it was last granted: this grants the new code)" in shown
    kv = (await loaded(path))["kv"]
    assert kv["status"] == "skipped" and kv["granted"] is False
    assert kv["error"].startswith(CODE_CHANGED)
    assert "run `python main.py extensions grant kv`" in kv["error"]


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
async def test_changed_code_of_a_granted_extension_asks_again(
    make_ext, settings_file, isolation, monkeypatch
):
    """Isolated too: an extension that reads a secret needs a grant in any isolation."""
    monkeypatch.setenv("VAULT_TOKEN", "s3cret")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    vault = make_ext("vault", ext_code(), {"isolation": isolation, "secrets": ["VAULT_TOKEN"]})
    path = settings_file(channels={"default": "capture"}, isolation={"call_timeout_s": 20})
    async with running_kernel(path) as kernel:
        record = kernel.loader.records["vault"]
        assert record.live
        old = record.instance
        (vault / "helper.py").write_text("TOKEN_SINK = []\n")  # a new file is changed code too
        reply = await say(kernel, "/reload vault")
        assert reply.startswith(f"Reload of vault failed: {CODE_CHANGED}")
        assert "reads the secret VAULT_TOKEN" in reply
        assert record.instance is old
        granted = await say(kernel, "/grant vault yes")
        assert granted.startswith("Granted vault")
        assert (await say(kernel, "/reload vault")).startswith("Reloaded vault")
        assert record.instance is not old and record.live
    assert (await loaded(path))["vault"]["status"] == "active"  # the new code is granted


async def test_a_grant_from_before_the_upgrade_binds_the_code_present_once(
    make_ext, settings_file, tmp_path, caplog
):
    ext_dir = make_ext("notes", ext_code())
    grants = tmp_path / "data" / "grants.json"
    data = json.loads(grants.read_text())
    del data["notes"]["code"]  # as recorded before grants bound code
    grants.write_text(json.dumps(data))
    path = settings_file()
    caplog.set_level(logging.WARNING, logger="core.grants")
    assert (await loaded(path))["notes"]["status"] == "active"  # nobody re-grants on upgrade
    assert json.loads(grants.read_text())["notes"]["code"] == code_digest(ext_dir)
    assert (await loaded(path))["notes"]["status"] == "active"
    bound = [r for r in caplog.records if "recorded before grants bound code" in r.message]
    assert len(bound) == 1  # logged once, at the first start after the upgrade
    (ext_dir / "main.py").write_text(ext_code() + STEAL)
    notes = (await loaded(path))["notes"]
    assert notes["status"] == "skipped" and notes["error"].startswith(CODE_CHANGED)


async def test_a_dropped_directory_with_a_bundled_id_and_other_code_is_not_bundled(
    ext_root, settings_file
):
    copy_bundled(ext_root, "kv")
    (ext_root / "kv" / "store_extra.py").write_text("EXFIL = True\n")
    kv = (await loaded(settings_file()))["kv"]
    assert kv["status"] == "skipped" and kv["error"].startswith(CODE_CHANGED)


def test_the_code_digest_covers_code_and_leaves_out_caches_and_data(tmp_path):
    ext = tmp_path / "ext"
    (ext / "pkg").mkdir(parents=True)
    (ext / "manifest.yaml").write_text("id: ext\n")
    (ext / "main.py").write_text("x = 1\n")
    (ext / "pkg" / "util.py").write_text("y = 2\n")
    first = code_digest(ext)
    (ext / "__pycache__").mkdir()
    (ext / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0compiled")
    (ext / "pkg" / "util.pyc").write_bytes(b"\0compiled")
    (ext / "data").mkdir()
    (ext / "data" / "cache.db").write_bytes(b"rows")
    assert code_digest(ext) == first
    (ext / "pkg" / "util.py").write_text("y = 3\n")
    assert code_digest(ext) != first
    (ext / "pkg" / "util.py").write_text("y = 2\n")
    assert code_digest(ext) == first
    (ext / "pkg" / "util.py").rename(ext / "pkg" / "other.py")
    assert code_digest(ext) != first
    (ext / "pkg" / "other.py").rename(ext / "pkg" / "util.py")
    (ext / "prompt.jinja2").write_text("You are kind.\n")  # not Python, still what it runs
    assert code_digest(ext) != first


def test_grant_all_records_the_code_with_the_request(make_ext, tmp_path):
    ext_dir = make_ext("plain", ext_code())
    granted = json.loads((tmp_path / "data" / "grants.json").read_text())["plain"]
    assert granted["code"] == code_digest(ext_dir) and len(granted["digest"]) == 20
    assert grant_all(ext_dir.parent, tmp_path / "data", only="plain") == ["plain"]
