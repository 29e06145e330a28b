"""Loader: every bad-input case yields error/skipped with a one-line reason,
and every other extension still loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT, ext_code
from core.config import load_settings
from core.extensions.access.grants import IN_PROCESS_WORDS
from core.extensions.errors import SecretNotDeclaredError
from core.kernel.runner import Kernel

GOOD = ext_code(
    """
    def get_tools(self):
        from agents import function_tool

        @function_tool
        def ping() -> str:
            "Answer pong."
            return "pong"

        return [ping]
    """
)


async def load(settings_path: Path) -> Kernel:
    kernel = Kernel(load_settings(settings_path))
    await kernel.load()
    return kernel


def status(kernel: Kernel, ext_id: str) -> tuple[str, str | None]:
    record = kernel.loader.records[ext_id]
    return record.status.value, record.error


async def test_good_extension_is_active_with_its_tools(make_ext, settings_file):
    make_ext("good", GOOD)
    kernel = await load(settings_file())
    report = kernel.loader.report()
    assert report == [
        {
            "id": "good",
            "status": "active",
            "capabilities": ["ToolProvider"],
            "tools": ["ping"],
            "error": None,
            "requested": [IN_PROCESS_WORDS],
            "granted": True,
        }
    ]
    await kernel.loader.shutdown()


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ("id: bad\n  name: : x\n", "not valid YAML"),
        ({"name": ["not", "a", "string"]}, "name: Input should be a valid string"),
        ({"entrpoint": "main:Ext"}, "entrpoint: unknown key"),
        ({"id": "other"}, "id: 'other' does not match the directory name 'bad'"),
        ({"entrypoint": None}, "needs `entrypoint` (module:Class) or an `agent` section"),
        ({"entrypoint": "nomodule:Ext"}, "entrypoint module 'nomodule' not found"),
        ({"entrypoint": "main:Missing"}, "entrypoint class 'Missing' not found"),
        ({"schedules": [{"name": "x", "cron": "61 * * * *"}]}, "schedules.0.cron: invalid cron"),
        ({"events": {"subscribes": [{"topic": "a", "handler": "shout"}]}}, "handler"),
    ],
)
async def test_bad_manifest_is_an_error_naming_file_and_field(
    make_ext, settings_file, manifest, expected
):
    make_ext("good", GOOD)
    bad_dir = make_ext("bad", ext_code(), manifest)
    kernel = await load(settings_file())
    state, error = status(kernel, "bad")
    assert state == "error"
    assert expected in error
    if "import" not in error and "entrypoint" not in expected:
        assert str(bad_dir / "manifest.yaml") in error
    assert status(kernel, "good") == ("active", None)
    await kernel.loader.shutdown()


async def test_import_error_inside_extension_is_reported(make_ext, settings_file):
    make_ext("broken", "import not_a_real_module_xyz\n" + ext_code())
    make_ext("good", GOOD)
    kernel = await load(settings_file())
    state, error = status(kernel, "broken")
    assert state == "error"
    assert "ModuleNotFoundError" in error and "not_a_real_module_xyz" in error
    assert status(kernel, "good")[0] == "active"
    await kernel.loader.shutdown()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "async def initialize(self, context):\n    raise RuntimeError('no config')",
            "initialize failed: RuntimeError: no config",
        ),
        (
            "async def initialize(self, context):\n    import asyncio\n    await asyncio.sleep(60)",
            "initialize() timed out after 0.3 s",
        ),
        ("def initialize(self, context):\n    pass", "must be `async def`"),
    ],
)
async def test_initialize_failures(make_ext, settings_file, body, expected):
    make_ext("victim", ext_code(body))
    make_ext("good", GOOD)
    kernel = await load(settings_file(loader={"lifecycle_timeout_s": 0.3}))
    state, error = status(kernel, "victim")
    assert state == "error" and expected in error
    assert status(kernel, "good")[0] == "active"
    await kernel.loader.shutdown()


async def test_start_and_stop_failures_never_stop_the_kernel(make_ext, settings_file, tmp_path):
    log = tmp_path / "order.log"
    for name in ("a", "b"):
        make_ext(
            name,
            ext_code(
                f"""
                async def stop(self):
                    open({str(log)!r}, "a").write("stop {name}\\n")
                async def destroy(self):
                    open({str(log)!r}, "a").write("destroy {name}\\n")
                """
            ),
            {"depends_on": ["a"]} if name == "b" else None,
        )
    make_ext("bad_start", ext_code("async def start(self):\n    raise OSError('port busy')"))
    make_ext(
        "hang_stop",
        ext_code("async def stop(self):\n    import asyncio\n    await asyncio.sleep(60)"),
    )
    kernel = await load(settings_file(loader={"lifecycle_timeout_s": 0.3}))
    await kernel.loader.start_all()
    assert status(kernel, "bad_start") == ("error", "start failed: OSError: port busy")
    await kernel.loader.shutdown()
    assert status(kernel, "hang_stop") == ("error", "stop() timed out after 0.3 s")
    # reverse dependency order: b stops before a, stops before destroys
    assert log.read_text().split("\n")[:4] == ["stop b", "stop a", "destroy b", "destroy a"]


async def test_missing_dependency_and_cycle_skip_only_those_involved(make_ext, settings_file):
    make_ext("needs_ghost", ext_code(), {"depends_on": ["ghost"]})
    make_ext("cyc_a", ext_code(), {"depends_on": ["cyc_b"]})
    make_ext("cyc_b", ext_code(), {"depends_on": ["cyc_a"]})
    make_ext("on_cycle", ext_code(), {"depends_on": ["cyc_a"]})
    make_ext("good", GOOD)
    kernel = await load(settings_file())
    assert status(kernel, "needs_ghost") == ("skipped", "missing dependency: ghost")
    state, error = status(kernel, "cyc_a")
    assert state == "skipped" and "cyc_a -> cyc_b -> cyc_a" in error
    assert status(kernel, "cyc_b")[0] == "skipped"
    assert status(kernel, "on_cycle") == ("skipped", "dependency not loaded: cyc_a")
    assert status(kernel, "good")[0] == "active"


async def test_dependents_of_a_failed_extension_are_skipped(make_ext, settings_file):
    make_ext("base", ext_code("async def initialize(self, context):\n    raise ValueError('x')"))
    make_ext("child", ext_code(), {"depends_on": ["base"]})
    make_ext("grandchild", ext_code(), {"depends_on": ["child"]})
    make_ext("disabled_dep", ext_code(), {"enabled": False})
    make_ext("on_disabled", ext_code(), {"depends_on": ["disabled_dep"]})
    kernel = await load(settings_file())
    assert status(kernel, "child") == ("skipped", "dependency 'base' failed")
    assert status(kernel, "grandchild")[0] == "skipped"
    assert status(kernel, "disabled_dep") == ("disabled", None)
    assert status(kernel, "on_disabled") == ("skipped", "dependency 'disabled_dep' is disabled")


async def test_relative_imports_and_two_main_modules(make_ext, settings_file):
    for name, word in (("one", "uno"), ("two", "dos")):
        make_ext(
            name,
            ext_code("def word(self):\n    return WORD", header="from .words import WORD"),
            files={"words.py": f"WORD = {word!r}\n"},
        )
    kernel = await load(settings_file())
    assert kernel.loader.instance("one").word() == "uno"
    assert kernel.loader.instance("two").word() == "dos"


async def test_secrets_and_dependencies_are_scoped_to_the_manifest(
    make_ext, settings_file, monkeypatch
):
    monkeypatch.setenv("MY_TOKEN", "s3cr3t-value")
    monkeypatch.setenv("OTHER_TOKEN", "not-yours")
    make_ext("lib", ext_code())
    make_ext("stranger", ext_code())
    make_ext("user", ext_code(), {"secrets": ["MY_TOKEN"], "depends_on": ["lib"]})
    kernel = await load(settings_file())
    ctx = kernel.loader.records["user"].context
    assert ctx.get_secret("MY_TOKEN") == "s3cr3t-value"
    with pytest.raises(SecretNotDeclaredError, match="OTHER_TOKEN"):
        ctx.get_secret("OTHER_TOKEN")
    assert ctx.get_extension("lib") is kernel.loader.instance("lib")
    assert ctx.get_extension("stranger") is None


async def test_config_merges_settings_over_manifest(make_ext, settings_file, tmp_path):
    make_ext("conf", ext_code(), {"config": {"a": 1, "b": 2}})
    kernel = await load(settings_file(extensions={"conf": {"b": 20}}))
    ctx = kernel.loader.records["conf"].context
    assert (ctx.get_config("a"), ctx.get_config("b"), ctx.get_config("c", 3)) == (1, 20, 3)
    assert ctx.data_dir == tmp_path / "data" / "extensions" / "conf" and ctx.data_dir.is_dir()


def test_extensions_json_command(make_ext, settings_file):
    make_ext("good", GOOD)
    make_ext("bad", ext_code(), {"entrpoint": "x"})
    (make_ext("nomanifest_dir", ext_code()) / "manifest.yaml").write_text("- a list\n")
    out = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "main.py"),
            "extensions",
            "--json",
            "--settings",
            str(settings_file()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = {r["id"]: r for r in json.loads(out.stdout)}
    assert set(report) == {"good", "bad", "nomanifest_dir"}
    assert report["good"]["tools"] == ["ping"]
    assert report["bad"]["status"] == "error" and "entrpoint: unknown key" in report["bad"]["error"]
    assert "top level must be a mapping" in report["nomanifest_dir"]["error"]
    assert set(report["good"]) == {
        "id",
        "status",
        "capabilities",
        "tools",
        "error",
        "requested",
        "granted",
        "tool_stacks",
        "status_lines",  # what a StatusReporter says about itself ([] for the others)
    }
    assert report["good"]["granted"] is True


async def test_kernel_can_turn_an_extension_off_with_a_reason(make_ext, settings_file, tmp_path):
    marker = tmp_path / "initialized"
    make_ext(
        "cli_like",
        ext_code(f"async def initialize(self, context):\n    open({str(marker)!r}, 'w')"),
    )
    kernel = Kernel(
        load_settings(settings_file()),
        disabled_extensions={"cli_like": "not started under the supervisor"},
    )
    await kernel.load()
    assert status(kernel, "cli_like") == ("disabled", "not started under the supervisor")
    assert not marker.exists()  # its code never ran
