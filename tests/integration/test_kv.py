"""The bundled kv extension, loaded by a real kernel, driven by a scripted model."""

from __future__ import annotations

import json

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.bundled import copy_bundled, tool_output
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for


def replies(kernel):
    return kernel.loader.instance("capture")._log()


async def converse(kernel, text: str, n: int) -> None:
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: len(replies(kernel)) >= n)


@pytest.fixture
def kv_setup(ext_root, make_ext, settings_file):
    copy_bundled(ext_root, "kv")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    return settings_file(channels={"default": "capture"})


@pytest.fixture
def kv_on_backends(storage_backend, ext_root, make_ext, settings_file):
    """``kv_setup`` with ``storage.backend`` sqlite, then postgres (ADR 0035)."""
    copy_bundled(ext_root, "kv")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    return settings_file(channels={"default": "capture"}, storage=storage_backend)


async def test_tools_round_trip_and_errors_are_clear(kv_on_backends):
    kv_setup = kv_on_backends
    big = "x" * 70_000
    model = ScriptedModel(
        [
            [function_call("kv_set", {"key": "user.colour", "value": '"blue"'}, call_id="s1")],
            [function_call("kv_set", {"key": "user.pets", "value": '["Miso", 2]'}, call_id="s2")],
            [function_call("kv_get", {"key": "user.colour"}, call_id="g1")],
            [function_call("kv_list", {"prefix": "user."}, call_id="l1")],
            [function_call("kv_set", {"key": "big", "value": json.dumps(big)}, call_id="s3")],
            [function_call("kv_set", {"key": "bad", "value": "blue"}, call_id="s4")],
            [function_call("kv_delete", {"key": "user.colour"}, call_id="d1")],
            [function_call("kv_get", {"key": "user.colour"}, call_id="g2")],
            [assistant_message("Done.")],
        ]
    )
    async with running_kernel(kv_setup, model=model) as kernel:
        await converse(kernel, "play with the store", 1)
        kv = kernel.loader.instance("kv")
        assert await kv.get("user.pets") == ["Miso", 2]
        assert await kv.get("big") is None and await kv.get("bad") is None
    assert tool_output(model, "s1") == "stored 'user.colour'"
    assert tool_output(model, "g1") == '"blue"'
    assert tool_output(model, "l1") == "user.colour\nuser.pets"
    assert tool_output(model, "s3") == (
        "error: value too large: 70002 bytes > limit 65536 (config kv.max_value_bytes)"
    )
    assert tool_output(model, "s4").startswith("error: value is not valid JSON")
    assert tool_output(model, "d1") == "deleted 'user.colour'"
    assert tool_output(model, "g2") == "not found: no value is stored under key 'user.colour'"
    assert replies(kernel) == [("reply", "u1", "Done.")]
    model.assert_complete()


async def test_values_survive_a_kernel_restart(kv_on_backends):
    kv_setup = kv_on_backends
    first = ScriptedModel(
        [
            [function_call("kv_set", {"key": "trip", "value": '{"to": "Porto"}'}, call_id="s1")],
            [assistant_message("Saved.")],
        ]
    )
    async with running_kernel(kv_setup, model=first) as kernel:
        await converse(kernel, "remember my trip", 1)
    second = ScriptedModel(
        [[function_call("kv_get", {"key": "trip"}, call_id="g1")], [assistant_message("Porto.")]]
    )
    async with running_kernel(kv_setup, model=second) as kernel:
        await converse(kernel, "where am I going?", 1)
        on_postgres = kernel.settings.storage.backend == "postgres"
    assert json.loads(tool_output(second, "g1")) == {"to": "Porto"}
    sqlite_files = {p.name for p in (kv_setup.parent / "data").rglob("*") if p.is_file()}
    if on_postgres:  # kv, histories and extension state lived in PostgreSQL
        assert not sqlite_files & {"kv.sqlite3", "sessions.db", "state.db", "schedules.db"}
    else:
        assert {"kv.sqlite3", "sessions.db"} <= sqlite_files


NOTES = ext_code(
    """
    kv = None
    async def start(self):
        self.kv = self.ctx.get_extension("kv")
    def get_tools(self):
        from agents import function_tool
        @function_tool
        async def add_note(text: str) -> str:
            "Add a note."
            count = await self.kv.get("notes.count", default=0) + 1
            await self.kv.set("notes.count", count)
            await self.kv.set(f"notes.{count}", {"text": text})
            return f"note {count} saved; keys: {await self.kv.list('notes.')}"
        return [add_note]
    """
)
OUTSIDER = ext_code(
    """
    async def start(self):
        self.kv = self.ctx.get_extension("kv")
    """
)


async def test_python_api_reaches_dependents_only(kv_setup, make_ext):
    make_ext("notes", NOTES, {"depends_on": ["kv"]})
    make_ext("outsider", OUTSIDER)
    model = ScriptedModel(
        [
            [function_call("add_note", {"text": "buy tea"}, call_id="n1")],
            [function_call("add_note", {"text": "call mum"}, call_id="n2")],
            [assistant_message("Two notes.")],
        ]
    )
    async with running_kernel(kv_setup, model=model) as kernel:
        await converse(kernel, "note tea and mum", 1)
        kv = kernel.loader.instance("kv")
        assert kernel.loader.instance("outsider").kv is None
        assert kernel.loader.instance("notes").kv is kv
        assert await kv.get("notes.2") == {"text": "call mum"}
        assert await kv.delete("notes.1") is True
        assert await kv.delete("notes.1") is False
        assert await kv.list("notes.") == ["notes.2", "notes.count"]
        assert await kv.list("no*such[") == []
        with pytest.raises(ValueError, match="not JSON-serialisable"):
            await kv.set("notes.bad", {1, 2})
        with pytest.raises(ValueError, match="not JSON-serialisable"):
            await kv.set("notes.bad", float("nan"))
        with pytest.raises(ValueError, match=r"key too long: 300 bytes > limit 256"):
            await kv.set("k" * 300, 1)
    assert tool_output(model, "n2") == "note 2 saved; keys: ['notes.1', 'notes.2', 'notes.count']"


async def test_limits_come_from_settings_and_bad_config_is_reported(
    ext_root, make_ext, settings_file
):
    copy_bundled(ext_root, "kv")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(extensions={"kv": {"max_value_bytes": 20, "max_list_keys": 2}})
    model = ScriptedModel(
        [
            [function_call("kv_set", {"key": "a", "value": '"' + "y" * 30 + '"'}, call_id="s1")],
            [function_call("kv_list", {"prefix": ""}, call_id="l1")],
            [assistant_message("Too big.")],
        ]
    )
    async with running_kernel(path, model=model) as kernel:
        kv = kernel.loader.instance("kv")
        for key in ("a", "b", "c"):
            await kv.set(key, 1)
        await converse(kernel, "store a long string", 1)
    assert tool_output(model, "s1").endswith("32 bytes > limit 20 (config kv.max_value_bytes)")
    assert tool_output(model, "l1") == "a\nb\n… and 1 more (give a longer prefix)"

    bad = settings_file(extensions={"kv": {"max_value_bytes": "lots"}})
    async with running_kernel(bad) as kernel:
        record = kernel.loader.records["kv"]
    assert record.status.value == "error"
    assert "max_value_bytes" in (record.error or "")
