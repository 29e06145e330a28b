"""SIGKILL the kernel while a turn falls over to its second model (ADR 0061): the
first model's step ran a tool, then the first model failed, and the kernel dies
while the second is asked. After a restart the message is answered once, the
tool is not run again (its recorded output is given to the model), the history
holds the exchange once and the turn's usage is counted once. Real kernel
processes, two scripted model servers, on both storage backends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from test_kernel_crash import FILE_CHANNEL
from test_model_fallback_e2e import chain_section

from conftest import PROJECT_ROOT, ext_code
from support.fake_openai import Failure, FakeOpenAIServer, Hang, ToolCall
from support.harness import CAPTURE_MANIFEST, count_mentions
from support.kernel_process import kill, start_kernel, wait_until
from support.storage_backends import stored_history

ROCKETS = ext_code(
    """
    def get_tools(self):
        log = self.ctx.get_config("log")

        @function_tool
        async def launch(target: str) -> str:
            "Launch a rocket at a target."
            with open(log, "a") as f:
                f.write(target + "\\n")
                f.flush()
                os.fsync(f.fileno())
            return f"launched at {target}"

        return [launch]
    """,
    header="import os\nfrom agents import function_tool\n",
)


def test_sigkill_during_a_fallback_loses_nothing_and_repeats_no_tool(
    make_ext, settings_file, tmp_path, storage_backend
):
    out, log = tmp_path / "replies.txt", tmp_path / "launches.txt"
    make_ext("filechan", FILE_CHANNEL, {"config": {"out": str(out)}, **CAPTURE_MANIFEST})
    make_ext("rockets", ROCKETS, {"config": {"log": str(log)}})
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        launch = ToolCall("launch", {"target": "moon"}, call_id="c1")
        # before the kill: the tool step, then a failure; after: the same again
        first.script(launch, Failure(500, "crashed"), launch, Failure(500, "crashed"))
        second.script(Hang(60), "Launched at the moon.")
        section = chain_section(first.base_url, second.base_url)
        section["providers"]["second"]["timeout_s"] = 120
        settings = settings_file(
            channels={"default": "filechan"}, models=section, storage=storage_backend
        )
        kernel = start_kernel(settings)
        try:
            second.wait_for_requests(1, timeout_s=90)  # the chain fell over; the second hangs
        finally:
            kill(kernel)
        assert not out.exists()
        assert log.read_text() == "moon\n"  # the tool ran before the kill

        again = start_kernel(settings)
        try:
            wait_until(lambda: out.exists() and out.read_text())
            time.sleep(0.5)  # anything sent twice would arrive now
        finally:
            again.send_signal(signal.SIGTERM)
            _, stderr = again.communicate(timeout=30)
        assert again.returncode == 0, stderr
        resumed = second.requests[-1]["messages"]
    assert out.read_text() == "Launched at the moon.\n"  # one reply
    assert log.read_text() == "moon\n"  # the tool did not run again
    tool_results = [m for m in resumed if m["role"] == "tool"]
    assert [m["content"] for m in tool_results] == ["launched at moon"]
    items = stored_history(storage_backend, tmp_path / "data", "filechan:u1")
    assert count_mentions(items, "what is up?") == 1
    assert count_mentions(items, "Launched at the moon.") == 1
    report = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "main.py"),
            "usage",
            "--json",
            "--settings",
            str(settings),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    rows = {row["model"]: row for row in json.loads(report.stdout)["rows"]}
    assert set(rows) == {"first/fake-model", "second/fake-model"}  # the answered run, once
    assert rows["second/fake-model"]["input_tokens"] == max(1, len(json.dumps(resumed)) // 4)
