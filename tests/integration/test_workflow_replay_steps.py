"""Replaying a workflow run whose steps run side by side, retry, wait and are skipped
(ADR 0091): each agent step of a parallel group gets its own recorded answers, a
retried tool step its recorded failure then its result, the wait ends at once, and
the replay is identical; a background task replays with its recorded prompt."""

from __future__ import annotations

import asyncio
import time

from agents.testing import ScriptedModel, assistant_message

from conftest import ext_code
from core.cli.replay_runs import replay_run
from core.config import load_settings
from core.replay.runs import load_run
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

FLAKY = ext_code(
    header="from pathlib import Path\nfrom agents import function_tool",
    body="""
    def get_tools(self):
        count = Path(self.ctx.get_config("count"))

        @function_tool
        def flaky() -> str:
            "Fails the first time."
            tries = int(count.read_text()) + 1 if count.exists() else 1
            count.write_text(str(tries))
            if tries == 1:
                raise RuntimeError("not yet")
            return "ok"

        return [flaky]
    """,
)
ROUTINE = {
    "name": "routine",
    "steps": [
        {"id": "both", "parallel": [{"id": "a", "agent": "Say A"}, {"id": "b", "agent": "Say B"}]},
        {"id": "flaky", "tool": "flaky"},
        {"id": "pause", "wait": "1s"},
        {"id": "skip", "notify": "never", "when": {"step": "flaky", "equals": "nope"}},
        {"id": "tell", "notify": "{{a}} {{b}} {{flaky}}"},
    ],
}


async def finished(kernel, run_id: str):
    """The run once it ended (polled: it ends in the executor's own task)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = await kernel.workflows.store.run(run_id)
        if run is not None and run.status in ("succeeded", "failed"):
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


async def test_parallel_retried_waiting_and_skipped_steps_replay_identically(
    make_ext, settings_file, tmp_path
) -> None:
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("flakes", FLAKY, {"workflows": [ROUTINE], "side_effects": True})
    path = settings_file(
        channels={"default": "capture"},
        extensions={"flakes": {"count": str(tmp_path / "count.txt")}},
        workflows={"poll_s": 0.2, "retry_delay_s": 0.05},
    )
    model = ScriptedModel(
        [[assistant_message("alpha")], [assistant_message("beta")], [assistant_message("done")]]
    )
    async with running_kernel(path, model=model) as kernel:
        channel = kernel.loader.instance("capture")
        await channel.say("/run routine")
        await wait_for(lambda: any("Started routine" in t for _, _, t in channel._log()))
        started = next(t for _, _, t in channel._log() if "Started routine" in t)
        run = await finished(kernel, started.split("(run ")[1].split(")")[0])
        assert run.status == "succeeded", run.error
        background = await kernel.workflows.background("Say done", "test", "bg1")
        assert (await finished(kernel, background.id)).result == "done"
    settings = load_settings(path)
    journal = settings.data_dir / "events.db"

    trace = await load_run(journal, f"workflow:{run.id}")
    assert {s.text for s in trace.turns} == {"a", "b", "both", "flaky", "pause", "skip", "tell"}
    flaky = next(s for s in trace.turns if s.text == "flaky")
    assert [f.payload.get("status") for f in flaky.frames if f.topic == "replay.step"] == [
        "retry",
        "done",
    ]
    report = await replay_run(trace, settings)
    assert report.identical, report.divergence and report.divergence.diff
    assert report.turns == 7 and not report.notes
    assert (tmp_path / "count.txt").read_text() == "2"  # side-effecting: stood in for

    task = await replay_run(await load_run(journal, f"workflow:{background.id}"), settings)
    assert task.identical and task.turns == 1, task.divergence
