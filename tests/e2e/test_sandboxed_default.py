"""Sandboxed by default and the author's loop (issue 43, ADR 0086).

An extension that is not bundled runs in a plugin host when its manifest does
not say; in-process is an explicit choice the user grants, and the refusal says
which command grants it. ``main.py new-extension`` writes an isolated skeleton
that asks for nothing, so edit → ``/reload`` serves the new code with no grant;
one that asks for more is refused after an edit with the command to run.
``doctor`` warns about in-process code that opens the network undeclared.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
import yaml
from agents.testing import ScriptedModel, assistant_message, function_call
from test_doctor import doctor
from test_extension_reload import say

from conftest import PROJECT_ROOT, ext_code
from core.cli.doctor_network import network_uses, undeclared_network_lines
from core.cli.scaffold import run_new_extension
from core.config import Settings, load_settings
from core.extensions.isolation.kernel.confinement import probe
from core.extensions.isolation.kernel.factory import IsolatedExtension
from core.extensions.loading.isolation_choice import isolation_of
from core.extensions.loading.manifest import Manifest
from support.bundled import copy_bundled, tool_output
from support.fake_openai import FakeOpenAIServer, models_section
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel

needs_bwrap = pytest.mark.skipif(
    not probe().available, reason="an isolated extension without network needs bubblewrap"
)

HELLO = ext_code(
    header="""
    from agents import function_tool
    """,
    body="""
    def get_tools(self):
        @function_tool
        def where() -> str:
            "Say which process answers."
            import os
            return f"pid {os.getpid()}"

        return [where]
    """,
)


# the tests' channel, driven through its instance: in the kernel, as its manifest says
IN_KERNEL_CAPTURE = {**CAPTURE_MANIFEST, "isolation": "inprocess"}


def hearth_defaults(path: Path) -> Path:
    """The fixture's settings without its test-local ``isolation`` section: Hearth's
    own default decides where an extension runs (conftest ``TEST_ISOLATION``)."""
    data = yaml.safe_load(path.read_text())
    data.pop("isolation", None)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_ext(ext_root: Path, ext_id: str, code: str, manifest: str = "") -> Path:
    """An extension as a user installs it: files only, no grant."""
    ext_dir = ext_root / ext_id
    ext_dir.mkdir()
    (ext_dir / "main.py").write_text(code)
    (ext_dir / "manifest.yaml").write_text(
        f"id: {ext_id}\nname: {ext_id}\nentrypoint: main:Ext\n{manifest}"
    )
    return ext_dir


def test_hearths_default_is_process_in_the_code_and_the_shipped_settings():
    assert Settings().isolation.default == "process"
    shipped = yaml.safe_load((PROJECT_ROOT / "settings.yaml").read_text())
    assert shipped["isolation"]["default"] == "process"


def test_where_an_extension_runs_when_its_manifest_does_not_say():
    def manifest(ext_id: str, **fields: object) -> Manifest:
        return Manifest.model_validate({"id": ext_id, "name": ext_id, **fields})

    code = {"entrypoint": "main:Ext"}
    assert isolation_of(manifest("community", **code), "process") == "process"
    assert isolation_of(manifest("community", **code), "inprocess") == "inprocess"
    assert isolation_of(manifest("kv", **code), "process") == "inprocess"  # bundled
    chosen = manifest("kv", isolation="process", **code)
    assert isolation_of(chosen, "inprocess") == "process"  # the manifest decides
    # a declarative agent has no code of its own: the kernel's agent runs its manifest
    assert isolation_of(manifest("helper", agent={"instructions": "Help."}), "process") == (
        "inprocess"
    )


@needs_bwrap
async def test_an_unbundled_extension_without_isolation_runs_in_a_plugin_host(
    ext_root, make_ext, settings_file
):
    """No `isolation:` and no grant: it asks nothing beyond an isolated extension's
    defaults, so it loads — in its own process; a bundled one stays in the kernel."""
    make_ext("capture", CAPTURE_CHANNEL, IN_KERNEL_CAPTURE)
    write_ext(ext_root, "community", HELLO)
    copy_bundled(ext_root, "kv")
    model = ScriptedModel(
        [[function_call("where", {}, call_id="w1")], [assistant_message("answered")]]
    )
    path = hearth_defaults(settings_file(channels={"default": "capture"}))
    async with running_kernel(path, model=model) as k:
        record = k.loader.records["community"]
        assert record.live, record.error
        assert isinstance(record.instance, IsolatedExtension)
        assert record.instance.host_pid not in (None, os.getpid())
        assert await say(k, "which process?") == "answered"
        kv = k.loader.records["kv"]
        assert kv.live and not isinstance(kv.instance, IsolatedExtension)
    # the tool ran in the plugin host (a PID of its own namespace), not in the kernel
    assert tool_output(model, "w1").startswith("pid ")
    assert tool_output(model, "w1") != f"pid {os.getpid()}"


async def test_an_unbundled_in_process_extension_without_a_grant_is_refused_with_the_command(
    ext_root, make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, IN_KERNEL_CAPTURE)
    write_ext(ext_root, "trusted", HELLO, "isolation: inprocess\n")
    path = hearth_defaults(settings_file(channels={"default": "capture"}))
    async with running_kernel(path) as k:
        record = k.loader.records["trusted"]
        assert record.status == "skipped" and record.instance is None
        error = record.error or ""
        assert error.startswith("not granted: it asks to runs inside the kernel process")
        assert "not sandboxed" in error and "an explicit choice you grant" in error
        assert "run `python main.py extensions grant trusted`" in error
        assert "`/grant trusted yes`" in error and "then `/reload trusted`" in error
        # what the message says is what works, without a restart
        assert "Send `/reload trusted`" in await say(k, "/grant trusted yes")
        assert (await say(k, "/reload trusted")).startswith("Reloaded trusted")
        assert type(k.loader.records["trusted"].instance).__name__ == "Ext"


# ------------------------------------------------------------ the author's loop


def scaffold(settings: Path, name: str, *flags: str) -> Path:
    args = argparse.Namespace(
        name=name,
        tool="--tool" in flags,
        channel="--channel" in flags,
        isolated="--isolated" in flags,
        inprocess="--inprocess" in flags,
    )
    assert run_new_extension(load_settings(settings), args) == 0
    return load_settings(settings).extensions_dir / name


@needs_bwrap
async def test_scaffold_edit_reload_serves_the_new_code_without_a_grant(
    make_ext, settings_file, capsys
):
    make_ext("capture", CAPTURE_CHANNEL, IN_KERNEL_CAPTURE)
    path = hearth_defaults(settings_file(channels={"default": "capture"}))
    ext_dir = scaffold(path, "greeter")
    out = capsys.readouterr().out
    assert "granted" not in out and "after an edit: `/reload greeter`" in out
    assert "isolation: process" in (ext_dir / "manifest.yaml").read_text()
    model = ScriptedModel(
        [
            [function_call("greeter_hello", {"name": "Ada"}, call_id="h1")],
            [assistant_message("one")],
            [function_call("greeter_hello", {"name": "Ada"}, call_id="h2")],
            [assistant_message("two")],
        ]
    )
    async with running_kernel(path, model=model) as k:
        assert await say(k, "greet Ada") == "one"
        code = ext_dir / "main.py"
        code.write_text(
            code.read_text().replace('f"{greeting}, {name}!"', 'f"{greeting}, {name}!!"')
        )
        assert (await say(k, "/reload greeter")).startswith("Reloaded greeter")
        assert await say(k, "greet Ada again") == "two"
    assert tool_output(model, "h1") == "Hello, Ada!"
    assert tool_output(model, "h2") == "Hello, Ada!!"
    model.assert_complete()


@needs_bwrap
async def test_a_skeleton_asking_for_more_needs_the_grant_and_the_reload_says_which_command(
    make_ext, settings_file, capsys
):
    make_ext("capture", CAPTURE_CHANNEL, IN_KERNEL_CAPTURE)
    path = hearth_defaults(settings_file(channels={"default": "capture"}))
    ext_dir = scaffold(path, "relay", "--channel")
    out = capsys.readouterr().out
    assert "granted relay: speaks as you" in out
    assert "after an edit: `python main.py extensions grant relay --yes`" in out
    async with running_kernel(path) as k:
        assert k.loader.records["relay"].live
        code = ext_dir / "main.py"
        code.write_text(code.read_text() + "\n# edited\n")
        refused = await say(k, "/reload relay")
        assert refused.startswith("Reload of relay failed: its code changed since the grant")
        assert "run `python main.py extensions grant relay` (or send `/grant relay yes`)" in refused
        assert "then `/reload relay`" in refused and "previous version keeps running" in refused
        await say(k, "/grant relay yes")
        assert (await say(k, "/reload relay")).startswith("Reloaded relay")


# ------------------------------------------------------------ doctor

FETCHER = ext_code(
    header="""
    import urllib.request
    """,
    body="""
    async def fetch(self, url):
        import asyncio
        return await asyncio.open_connection("example.org", 80)
    """,
)


@needs_bwrap
def test_doctor_warns_about_in_process_code_that_opens_the_network_undeclared(
    make_ext, settings_file
):
    make_ext("fetcher", FETCHER, {"isolation": "inprocess"})
    make_ext("declared", FETCHER, {"isolation": "inprocess", "permissions": {"network": True}})
    make_ext("boxed", FETCHER, {"isolation": "process"})
    make_ext("quiet", ext_code(), {"isolation": "inprocess"})
    with FakeOpenAIServer() as srv:
        result = doctor(settings_file(models=models_section(srv.base_url)))
    warnings = [line for line in result.stdout.splitlines() if "opens the network" in line]
    assert len(warnings) == 1, result.stdout
    assert warnings[0].startswith("WARN extension fetcher: in-process code opens the network")
    assert "main.py:2 imports urllib.request" in warnings[0]
    assert "calls open_connection" in warnings[0] and "static scan" in warnings[0]
    assert "declare `permissions.network: true`" in warnings[0]
    assert result.returncode == 0, result.stdout  # a warning, not a failure


def test_the_bundled_extensions_declare_the_network_they_use(tmp_path):
    """A fresh install's doctor has nothing to warn about (they run in the kernel)."""
    settings = Settings(paths={"extensions": str(PROJECT_ROOT / "sandbox" / "extensions")})
    assert undeclared_network_lines(settings) == []


def test_the_scan_reads_imports_and_connection_calls_but_not_tests(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("import socket\n")
    (tmp_path / "client.py").write_text(
        "from http import client\nimport httpx.models\nfrom aiohttp import ClientSession\n"
        "x = loop.create_connection(None)\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")
    assert [str(use) for use in network_uses(tmp_path)] == [
        "client.py:1 imports http.client",
        "client.py:2 imports httpx.models",
        "client.py:3 imports aiohttp",
        "client.py:4 calls create_connection",
    ]
