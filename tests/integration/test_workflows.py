"""Workflows (issue 44): routines of several steps a person runs by name, by a timer or
by an event, driven step by step on the kernel's database. Through a real kernel, a
channel that records what it is sent and asked, and a scripted model."""

from __future__ import annotations

import asyncio
import json
import time

from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.harness import running_kernel, wait_for

# a channel that records replies, notices and questions, and answers questions on demand
ASKING_CHANNEL = ext_code(
    """
    sent = None
    asked = None
    def _log(self):
        if self.sent is None:
            self.sent, self.asked = [], []
        return self.sent
    async def send_to_user(self, user_id, message):
        self._log().append(("reply", user_id, message))
    async def send_message(self, message):
        self._log().append(("notify", None, message))
    async def ask_user(self, user_id, request):
        self._log()
        self.asked.append((user_id, request))
    async def close_request(self, user_id, request_id, outcome):
        pass
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    async def answer(self, request_id, value, user_id="u1"):
        await self.ctx.answer_request(request_id, value, user_id)
    """
)
CHANNEL_MANIFEST = {"permissions": {"user_messages": True}}

# tools that leave a trace in a file (so a rerun would show) and one that always fails
CHORES = ext_code(
    header="""
    from pathlib import Path
    from agents import function_tool
    """,
    body="""
    def get_tools(self):
        trace = Path(self.ctx.get_config("trace"))

        @function_tool
        def record(text: str) -> str:
            "Write a line down."
            with trace.open("a") as out:
                out.write(text + "\\n")
            return f"recorded {text}"

        @function_tool
        def boom() -> str:
            "Always fails."
            raise RuntimeError("the boiler is out")

        return [record, boom]
    """,
)
MORNING = {
    "name": "morning",
    "description": "write down, summarise, tell",
    "steps": [
        {"id": "first", "tool": "record", "args": {"text": "one {{input}}"}},
        {"id": "summary", "agent": "Summarise: {{first}}"},
        {"id": "tell", "notify": "Morning: {{summary}}"},
    ],
}
ASKING = {
    "name": "filing",
    "steps": [
        {"id": "ok", "ask": "File the letter?"},
        {
            "id": "file",
            "tool": "record",
            "args": {"text": "filed"},
            "when": {"step": "ok", "equals": "yes"},
        },
        {"id": "done", "notify": "filing: {{file}}"},
    ],
}
FAILING = {"name": "broken", "steps": [{"id": "heat", "tool": "boom"}]}


def household(ext_root, make_ext, settings_file, tmp_path, declared, **sections):
    make_ext("capture", ASKING_CHANNEL, CHANNEL_MANIFEST)
    make_ext(
        "chores",
        CHORES,
        {"workflows": declared, "side_effects": False},
    )
    return settings_file(
        channels={"default": "capture"},
        extensions={"chores": {"trace": str(tmp_path / "trace.txt")}},
        workflows={"poll_s": 0.2, "retry_delay_s": 0.05, **sections.pop("workflows", {})},
        **sections,
    )


def texts(kernel) -> list[str]:
    return [m for _, _, m in kernel.loader.instance("capture").sent or []]


async def say(kernel, text: str, user_id: str = "u1") -> str:
    count = len(texts(kernel))
    await kernel.loader.instance("capture").say(text, user_id)
    await wait_for(lambda: len(texts(kernel)) > count, timeout=30)
    return texts(kernel)[count]


async def finished(kernel, run_id: str):
    """The run once it ended (polled: it ends in the executor's own task)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = await kernel.workflows.store.run(run_id)
        if run is not None and run.status in ("succeeded", "failed"):
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish: {run}")


def trace(tmp_path) -> list[str]:
    path = tmp_path / "trace.txt"
    return path.read_text().splitlines() if path.exists() else []


async def test_a_run_does_each_step_once_and_tells_the_person(
    ext_root, make_ext, settings_file, tmp_path
) -> None:
    model = ScriptedModel([[assistant_message("all quiet")]])
    path = household(ext_root, make_ext, settings_file, tmp_path, [MORNING])
    async with running_kernel(path, model=model) as k:
        started = await say(k, "/run morning today")
        assert started.startswith("Started morning (run morning@")
        run_id = started.split("(run ")[1].split(")")[0]
        run = await finished(k, run_id)
        assert run.status == "succeeded", run.error
        await wait_for(lambda: "Morning: all quiet" in texts(k))
        assert trace(tmp_path) == ["one today"]
        assert "Summarise: recorded one today" in str(model.calls[0].input)
        listed = await say(k, "/workflows")
        assert "- morning: on /run; last run: succeeded" in listed
        shown = await say(k, "/workflow show morning")
        assert "first: done" in shown and "summary: done" in shown and "tell: done" in shown


async def test_a_failing_step_is_retried_then_ends_the_run_with_its_reason(
    ext_root, make_ext, settings_file, tmp_path
) -> None:
    path = household(
        ext_root, make_ext, settings_file, tmp_path, [FAILING], workflows={"step_retries": 1}
    )
    async with running_kernel(path, model=ScriptedModel([])) as k:
        started = await say(k, "/run broken")
        run_id = started.split("(run ")[1].split(")")[0]
        run = await finished(k, run_id)
        assert run.status == "failed"
        assert run.error is not None and run.error.startswith("step heat: error: tool boom failed")
        assert "RuntimeError: the boiler is out" in run.error
        steps = await k.workflows.store.steps(run_id)
        assert steps["heat"].attempts == 2  # one try and one retry
        await wait_for(lambda: any("Workflow broken" in t and "failed" in t for t in texts(k)))


async def test_an_approval_step_waits_across_a_restart_and_goes_on_after_yes(
    ext_root, make_ext, settings_file, tmp_path
) -> None:
    path = household(ext_root, make_ext, settings_file, tmp_path, [ASKING])
    async with running_kernel(path, model=ScriptedModel([])) as k:
        started = await say(k, "/run filing")
        run_id = started.split("(run ")[1].split(")")[0]
        channel = k.loader.instance("capture")
        await wait_for(lambda: channel.asked)
        assert channel.asked[0][1].prompt == "filing: File the letter?"
        assert (await k.workflows.store.run(run_id)).status == "asking"
    assert trace(tmp_path) == []
    async with running_kernel(path, model=ScriptedModel([])) as k:
        channel = k.loader.instance("capture")
        await wait_for(lambda: channel.asked)  # asked again after the restart
        await channel.answer(channel.asked[0][1].id, "yes")
        run = await finished(k, run_id)
        assert run.status == "succeeded", run.error
        await wait_for(lambda: "filing: recorded filed" in texts(k))
    assert trace(tmp_path) == ["filed"]


async def test_a_no_skips_the_conditional_step(ext_root, make_ext, settings_file, tmp_path):
    path = household(ext_root, make_ext, settings_file, tmp_path, [ASKING])
    async with running_kernel(path, model=ScriptedModel([])) as k:
        started = await say(k, "/run filing")
        run_id = started.split("(run ")[1].split(")")[0]
        channel = k.loader.instance("capture")
        await wait_for(lambda: channel.asked)
        await channel.answer(channel.asked[0][1].id, "no")
        assert (await finished(k, run_id)).status == "succeeded"
        assert (await k.workflows.store.steps(run_id))["file"].status == "skipped"
    assert trace(tmp_path) == []


async def test_a_routine_written_from_a_chat_message_fires_on_its_timer(
    ext_root, make_ext, settings_file, tmp_path
) -> None:
    routine = {
        "name": "plants",
        "trigger": {"cron": "0 9 * * *"},
        "steps": [{"id": "tell", "notify": "water the plants"}],
    }
    model = ScriptedModel(
        [
            [function_call("save_workflow", {"workflow_json": json.dumps(routine)}, call_id="w1")],
            [assistant_message("Saved: every day at 9 I will remind you.")],
        ]
    )
    path = household(ext_root, make_ext, settings_file, tmp_path, [], policy={"profile": "safe"})
    async with running_kernel(path, model=model) as k:
        await k.loader.instance("capture").say("every day at 9 tell me to water the plants")
        # under `safe` saving a routine is asked first, and the question shows it
        channel = k.loader.instance("capture")
        await wait_for(lambda: channel.asked, timeout=30)
        question = channel.asked[0][1]
        assert "save_workflow" in question.prompt and "water the plants" in question.prompt
        await channel.answer(question.id, question.options[0].value if question.options else "yes")
        await wait_for(lambda: "Saved: every day at 9 I will remind you." in texts(k), timeout=30)
        row = await k.workflows.store.workflow("plants")
        assert row is not None and row.source == "user" and row.user_id == "u1"
        assert time.localtime(row.next_at).tm_hour == 9
        # the timer is due: it fires once, on the person's channel
        db = await k.workflows.store.ready()
        await db.execute("UPDATE hearth_workflows SET next_at = ? WHERE id = 'plants'", time.time())
        k.workflows.executor.wake()
        sent = k.loader.instance("capture").sent
        await wait_for(lambda: ("reply", "u1", "water the plants") in sent, timeout=30)
        runs = await k.workflows.store.runs(workflow_id="plants")
        assert len(runs) == 1 and runs[0].trigger == "cron"
        assert (await k.workflows.store.workflow("plants")).next_at > time.time()


async def test_a_member_cannot_see_run_or_cancel_the_owners_workflows(
    ext_root, make_ext, settings_file, tmp_path
) -> None:
    people = {
        "alice": {"role": "owner", "identities": ["capture:u1"]},
        "bob": {"role": "member", "identities": ["capture:u2"]},
    }
    path = household(ext_root, make_ext, settings_file, tmp_path, [ASKING], people=people)
    async with running_kernel(path, model=ScriptedModel([])) as k:
        started = await say(k, "/run filing")
        run_id = started.split("(run ")[1].split(")")[0]
        assert (await say(k, "/run filing", "u2")).startswith("You have no workflow 'filing'")
        assert await say(k, "/workflows", "u2") == "You have no workflows yet."
        assert (await say(k, f"/workflow cancel {run_id}", "u2")).startswith("You have no workflow")
        assert (await say(k, f"/workflow show {run_id}", "u2")).startswith("You have no workflow")
        assert (await say(k, "/workflow pause filing", "u2")).startswith("You have no workflow")
        assert (await k.workflows.store.run(run_id)).status == "asking"
        assert (await say(k, f"/workflow cancel {run_id}")) == f"Cancelled {run_id}."


async def test_an_event_starts_a_run_once_per_event(ext_root, make_ext, settings_file, tmp_path):
    on_event = {
        "name": "inbox",
        "trigger": {"event": "webhook.received"},
        "steps": [{"id": "keep", "tool": "record", "args": {"text": "{{input}}"}}],
    }
    path = household(ext_root, make_ext, settings_file, tmp_path, [on_event])
    async with running_kernel(path, model=ScriptedModel([])) as k:
        await k.bus.publish(
            "webhook.received", "webhook", {"subject": "hello"}, idempotency_key="w1"
        )
        await k.bus.publish(
            "webhook.received", "webhook", {"subject": "hello"}, idempotency_key="w1"
        )
        await wait_for(lambda: trace(tmp_path), timeout=30)
        runs = await k.workflows.store.runs(workflow_id="inbox")
        assert len(runs) == 1 and (await finished(k, runs[0].id)).status == "succeeded"
    assert trace(tmp_path) == ['{"subject": "hello"}']


async def test_a_background_task_is_a_run_listed_with_its_result(
    ext_root, make_ext, settings_file, tmp_path
) -> None:
    make_ext(
        "asker",
        ext_code("""
        async def go(self):
            await self.ctx.request_agent_background("count the spoons", correlation_id="spoons")
        """),
        {"permissions": {"agent": True}},
    )
    path = household(ext_root, make_ext, settings_file, tmp_path, [])
    async with running_kernel(path, model=ScriptedModel([[assistant_message("12 spoons")]])) as k:
        await k.loader.instance("asker").go()
        run = await finished(k, "task-spoons")
        assert run.status == "succeeded" and run.result == "12 spoons"
        listed = await say(k, "/workflows")
        assert "- task-spoons: succeeded — 12 spoons" in listed
