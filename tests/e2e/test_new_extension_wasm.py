"""``main.py new-extension NAME --wasm`` (ADR 0085): the skeleton's own test passes, it
loads ``active`` with no grant step, and an edited module is served after a reload
with no grant step either (the plugin author's loop)."""

from __future__ import annotations

import json
import subprocess
import sys

from agents.testing import ScriptedModel
from test_new_extension import hearth

from conftest import PROJECT_ROOT
from core.extensions.sdk.testing import call_tool
from support.harness import running_kernel


def test_the_wasm_skeleton_passes_its_test_and_loads_active(settings_file, ext_root, tmp_path):
    settings = settings_file()
    made = hearth("new-extension", "my-wasm", "--wasm", "--settings", str(settings))
    assert made.returncode == 0, made.stderr
    assert "guest.wat" in made.stdout and "granted" not in made.stdout  # it asks nothing
    ext_dir = ext_root / "my-wasm"
    assert sorted(p.name for p in ext_dir.iterdir()) == ["guest.wat", "manifest.yaml", "tests"]

    tested = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider"),
            *("-c", str(PROJECT_ROOT / "pyproject.toml"), "--rootdir", str(PROJECT_ROOT)),
            str(ext_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert tested.returncode == 0 and "1 passed" in tested.stdout, tested.stdout

    report = hearth("extensions", "--json", "--settings", str(settings))
    entry = {e["id"]: e for e in json.loads(report.stdout)}["my-wasm"]
    assert (entry["status"], entry["capabilities"]) == ("active", ["ToolProvider"]), entry
    assert entry["tools"] == ["my_wasm_hello"] and entry["requested"] == []


async def test_an_edited_wasm_module_is_served_after_reload_without_a_grant(
    settings_file, ext_root
):
    settings = settings_file()
    assert hearth("new-extension", "greeter", "--wasm", "--settings", str(settings)).returncode == 0
    module = ext_root / "greeter" / "guest.wat"
    async with running_kernel(settings, model=ScriptedModel()) as kernel:
        ext = kernel.loader.instance("greeter")
        assert await call_tool(ext, "greeter_hello", {"name": "Ada"}) == "Hello from WebAssembly!"

        # same length, so the packed (ptr << 32 | len) in the skeleton stays right
        module.write_text(
            module.read_text().replace("Hello from WebAssembly!", "Howdy from WebAssembly!")
        )
        assert (await kernel.reloads.reload("greeter")).startswith("Reloaded greeter")
        ext = kernel.loader.instance("greeter")
        assert await call_tool(ext, "greeter_hello", {"name": "Ada"}) == "Howdy from WebAssembly!"
