"""Guardrails (seed 004, ADR 0021): an extension checks the user's message before the
model answers it and the model's answer before the user sees it. A tripped
guardrail ends the turn with a clear, non-technical message, a ``hook.guardrail``
frame and nothing stored; a blocked message costs no model call; a failing
guardrail is skipped. In-process and isolated alike, through a real kernel."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    conversing,
    running_kernel,
    session_history,
    wait_for,
)

GUARD = ext_code(
    header="from core.extensions.contract import GuardrailTrip",
    body="""
    def seen(self):
        return self.__dict__.setdefault("_seen", [])
    async def check_input(self, text, turn):
        if "password" in text:
            return GuardrailTrip("asks for a password", "I can't discuss passwords.")
        if "explode" in text:
            raise RuntimeError("guardrail bug")
        return None
    async def check_output(self, text, turn):
        if "SECRET" in text:
            return GuardrailTrip("leaks the secret")
        return None
    async def on_turn_end(self, turn, outcome):
        with (self.ctx.data_dir / "outcomes.txt").open("a") as log:
            log.write(outcome.status + "\\n")
    """,
)

TOOLS = ext_code(
    header="from agents import function_tool",
    body="""
    def get_tools(self):
        @function_tool
        def fetch() -> str:
            "Fetch the data."
            (self.ctx.data_dir / "fetched").write_text("yes")
            return "the data"
        return [fetch]
    """,
)


@pytest.fixture(params=["inprocess", "process"])
def guarded(request, make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("guard", GUARD, conversing({"isolation": request.param}))
    make_ext("tools", TOOLS)
    path = settings_file(channels={"default": "capture"})

    def start(model):
        return running_kernel(path, model=model)

    return start


def replies(kernel) -> list[str]:
    return [text for _, _, text in kernel.loader.instance("capture")._log()]


async def say(kernel, text: str, n: int) -> None:
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: len(replies(kernel)) >= n)


async def test_a_tripped_input_guardrail_answers_with_its_message_and_no_model_call(guarded):
    model = ScriptedModel([[assistant_message("Hello!")]])
    async with guarded(model) as kernel:
        await say(kernel, "what is the admin password?", 1)
        await say(kernel, "hi", 2)
        frames = await kernel.bus.journal.recent_events(10, topic="hook.guardrail")
        data_dir = kernel.settings.data_dir
        outcomes_file = kernel.loader.records["guard"].context.data_dir / "outcomes.txt"
        # on_turn_end runs after the reply is sent (ADR 0065): wait for the second turn's
        await wait_for(lambda: len(outcomes_file.read_text().splitlines()) >= 2)
        outcomes = outcomes_file.read_text()
    assert replies(kernel) == ["I can't discuss passwords.", "Hello!"]
    assert len(model.calls) == 1 and "password" not in str(model.calls[0].input)
    [frame] = [f.payload for f in frames]
    assert (frame["owner"], frame["hook"], frame["reason"]) == (
        "guard",
        "check_input",
        "asks for a password",
    )
    assert frame["before"] == "what is the admin password?"
    assert "password" not in str(session_history(data_dir, "capture:u1"))  # nothing stored
    assert outcomes.splitlines() == ["blocked", "answered"]


async def test_a_tripped_output_guardrail_replaces_the_answer_with_a_plain_refusal(guarded):
    model = ScriptedModel(
        [
            [function_call("fetch", {}, call_id="c1")],
            [assistant_message("The code is SECRET-42.")],
        ]
    )
    async with guarded(model) as kernel:
        await say(kernel, "what is the code?", 1)
        frames = await kernel.bus.journal.recent_events(10, topic="hook.guardrail")
    assert replies(kernel) == ["Sorry, I can't share that answer."]
    [frame] = [f.payload for f in frames]
    assert (frame["hook"], frame["reason"]) == ("check_output", "leaks the secret")
    assert frame["before"] == "The code is SECRET-42."


async def test_a_failing_guardrail_is_skipped_and_the_turn_is_answered(guarded):
    model = ScriptedModel([[assistant_message("Boom averted.")]])
    async with guarded(model) as kernel:
        await say(kernel, "make it explode", 1)
    assert replies(kernel) == ["Boom averted."]
