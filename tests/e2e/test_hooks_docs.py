"""The example extension in docs/hooks.md works as the page says it does.

The manifest and code are taken from the page itself, so the example a
plugin author copies is the one tested: end to end through ``main.py`` and
the real ``openai`` client against the fake model server (a denied tool
call, a rendered tag), and isolated through a running kernel.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from agents.testing import ScriptedModel, assistant_message, function_call
from test_cli_e2e import CLI_EXT, run_main

from conftest import PROJECT_ROOT, grant_all
from core.extensions.isolation.kernel.confinement import probe
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

DOC = PROJECT_ROOT / "docs" / "hooks.md"
DENIAL = "denied by focus: restarts need the user at the keyboard"


def write_example(ext_root: Path, **manifest_changes: object) -> Path:
    """``<ext_root>/focus/`` from the two code blocks under "A complete example"."""
    section = DOC.read_text(encoding="utf-8").split("## A complete example", 1)[1]
    manifest_text = re.search(r"```yaml\n(.*?)```", section, re.S)
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert manifest_text and code, "docs/hooks.md lost its example"
    manifest = {**yaml.safe_load(manifest_text.group(1)), **manifest_changes}
    ext_dir = ext_root / "focus"
    ext_dir.mkdir()
    (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (ext_dir / "main.py").write_text(code.group(1))
    return ext_dir


def test_the_example_denies_a_tool_and_renders_a_tag_through_main_py(settings_file, ext_root):
    write_example(ext_root)
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    with FakeOpenAIServer() as server:
        server.script(
            ToolCall("request_restart", {"reason": "model wants a fresh start"}),
            "I left it running. <shout>save your work</shout>",
            "Noted.",
        )
        path = settings_file(models=models_section(server.base_url))
        grant_all(ext_root, Path(yaml.safe_load(path.read_text())["paths"]["data"]))
        result = run_main(path, "restart yourself\nping\n")
        requests = server.requests
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["I left it running. SAVE YOUR WORK", "pong"]
    tool_result = requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"] == DENIAL
    assert "Answer in at most three sentences." in requests[0]["messages"][0]["content"]
    assert len(requests) == 2  # "ping" was answered by the hook, not the model
    assert not (path.parent / "data" / "restart_requested").exists()


@pytest.mark.skipif(not probe().available, reason=probe().detail)
async def test_the_example_works_the_same_isolated(make_ext, settings_file, ext_root):
    write_example(ext_root, isolation="process")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"})
    grant_all(ext_root, path.parent / "data")
    model = ScriptedModel(
        [
            [function_call("request_restart", {"reason": "fresh start"}, call_id="r1")],
            [assistant_message("  Kept running. <shout>careful</shout>  ")],
        ]
    )
    async with running_kernel(path, model=model) as kernel:
        capture = kernel.loader.instance("capture")
        await capture.say("restart")
        await capture.say("ping")
        await wait_for(lambda: len(capture.sent or []) >= 2)
        assert kernel.restart_requested is None
    assert [m for _, _, m in capture.sent] == ["Kept running. CAREFUL", "pong"]
    outputs = [i for i in model.calls[1].input if i.get("type") == "function_call_output"]
    assert outputs[-1]["output"] == DENIAL
