"""Extension registration rules (seed 001, issue 16; ADR 0025).

Ids are letters, digits, ``-`` and ``_`` (a letter first, at most 64) and
unique ignoring case; an id of the old ``lower_snake_case`` form stays valid.
An extension whose directory is gone is unregistered at the next start: the
kernel logs it and forgets its state and its event subscriptions.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3

import pytest

from conftest import ext_code
from core.extensions.contract import TurnContext
from core.extensions.loading.manifest import ManifestError, load_manifest
from core.extensions.sdk.testing import serving
from core.kernel.commands.table import parse_command
from support.harness import running_kernel, wait_for

LISTENER = ext_code(
    """
    heard = None
    async def initialize(self, context):
        self.ctx = context
        self.heard = []
        context.subscribe_event(f"{context.extension_id}.ping", self.on_ping)
    async def on_ping(self, event):
        self.heard.append(event.payload["n"])
    async def ping(self, n):
        await self.ctx.emit(f"{self.ctx.extension_id}.ping", {"n": n})
    """
)

STATEFUL = ext_code(
    """
    def get_commands(self):
        from core.extensions.contract import Command

        async def keep(args, turn):
            await self.ctx.set_state("n", args)
            return f"kept {args}"

        return [Command("keep", "Keep a value.", keep)]
    """
)


@pytest.mark.parametrize("ext_id", ["kv", "lower_snake_2", "Weather-Now", "x", "a" + "b" * 63])
def test_valid_ids(make_ext, ext_id):
    assert load_manifest(make_ext(ext_id, ext_code())).id == ext_id


@pytest.mark.parametrize(
    ("ext_id", "why"),
    [
        ("2fast", "must start with a letter"),
        ("_hidden_", "must start with a letter"),
        ("dot.ted", "only letters, digits, - and _"),
        ("a" * 65, "at most 64 characters"),
        ("Events", "reserved for the kernel's own files"),
    ],
)
def test_invalid_ids_name_the_file_and_the_field(tmp_path, ext_id, why):
    ext_dir = tmp_path / ext_id
    ext_dir.mkdir()
    (ext_dir / "manifest.yaml").write_text(f"id: '{ext_id}'\nname: X\nentrypoint: main:Ext\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(ext_dir)
    assert str(ext_dir / "manifest.yaml") in str(caught.value)
    assert caught.value.message.startswith("id: ") and why in caught.value.message


async def test_ids_equal_ignoring_case_are_both_refused(make_ext, settings_file):
    make_ext("weather", ext_code())
    make_ext("Weather", ext_code())
    make_ext("other", ext_code())
    async with running_kernel(settings_file()) as kernel:
        records = kernel.loader.records
        for ext_id, other in (("weather", "Weather"), ("Weather", "weather")):
            assert records[ext_id].status.value == "error"
            assert f"id {ext_id!r} clashes with {other!r}" in (records[ext_id].error or "")
            assert kernel.loader.registrations["reject", ext_id] == 1
        assert records["other"].status.value == "active"
        assert kernel.loader.registrations["register", "other"] == 1


async def test_a_hyphenated_mixed_case_id_works_end_to_end(make_ext, settings_file, tmp_path):
    make_ext("Weather-Now", LISTENER)
    async with running_kernel(settings_file()) as kernel:
        ext = kernel.loader.instance("Weather-Now")
        await ext.ping(1)
        await wait_for(lambda: ext.heard == [1])
        with serving(TurnContext(session_id="s1")):
            await ext.ctx.set_state("k", "v")
        assert await kernel.state.read("Weather-Now", "s1", "k") == "v"
        assert ext.ctx.data_dir == tmp_path / "data" / "extensions" / "Weather-Now"


async def test_a_hyphenated_mixed_case_id_runs_isolated(make_ext, settings_file):
    make_ext("Weather-Now", STATEFUL, {"isolation": "process"})
    async with running_kernel(settings_file(isolation={"call_timeout_s": 10})) as kernel:
        record = kernel.loader.records["Weather-Now"]
        assert record.status.value == "active", record.error
        parsed = parse_command("/keep 5")
        assert parsed is not None
        reply = await kernel.commands.run(parsed, TurnContext(session_id="s1"))
        assert reply == "kept 5"
        assert await kernel.state.read("Weather-Now", "s1", "n") == "5"


async def test_an_uninstalled_extension_is_unregistered_and_cleaned_up(
    make_ext, ext_root, settings_file, tmp_path, caplog
):
    make_ext("alpha", LISTENER)
    make_ext("beta", LISTENER)
    path = settings_file()
    caplog.set_level(logging.INFO, logger="core.kernel.reload.registrations")
    async with running_kernel(path) as kernel:
        await kernel.loader.records["beta"].context.set_state("k", 1, scope="extension")
    assert "extension beta registered (new in this data dir)" in caplog.text
    assert subscribers(tmp_path, "beta/") == ["beta/beta.ping/Ext.on_ping"]
    caplog.clear()

    shutil.rmtree(ext_root / "beta")
    async with running_kernel(path) as kernel:
        assert await kernel.state.read("beta", None, "k") is None
        assert kernel.loader.registrations["unregister", "beta"] == 1
        assert kernel.loader.registrations["unregister", "alpha"] == 0
    lines = [r for r in caplog.records if "beta" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (
            logging.INFO,
            "extension beta is no longer installed: unregistered; forgot its state (1 keys) "
            "and 1 event subscriptions",
        )
    ]
    assert subscribers(tmp_path, "beta/") == []
    assert subscribers(tmp_path, "alpha/") == ["alpha/alpha.ping/Ext.on_ping"]
    assert "registered (new" not in caplog.text  # alpha was registered already


async def test_a_broken_manifest_does_not_unregister(make_ext, settings_file):
    make_ext("alpha", ext_code())
    path = settings_file()
    async with running_kernel(path) as kernel:
        await kernel.loader.records["alpha"].context.set_state("k", 1, scope="extension")
    make_ext("alpha", manifest="id: alpha\nname: [unclosed\n")
    async with running_kernel(path) as kernel:
        assert kernel.loader.records["alpha"].status.value == "error"
        assert await kernel.state.read("alpha", None, "k") == 1


def subscribers(tmp_path, prefix: str) -> list[str]:
    with sqlite3.connect(tmp_path / "data" / "events.db") as conn:
        rows = conn.execute("SELECT id FROM subscribers ORDER BY id").fetchall()
    conn.close()
    return [sid for (sid,) in rows if sid.startswith(prefix)]
