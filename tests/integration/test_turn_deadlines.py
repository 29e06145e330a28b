"""Deadlines on the chat path (issue 12 item 3): a hung context provider,
command handler or model call costs a bounded time and the user gets a clear
line; hung turns never stop other conversations from being answered."""

from __future__ import annotations

import asyncio
import time

from agents.testing import ModelStep, ScriptedModel, assistant_message

from conftest import ext_code
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    CONVERSING,
    model_read,
    running_kernel,
    wait_for,
)


def replies(kernel, channel="capture"):
    return kernel.loader.instance(channel)._log()


def provider(priority: int, delay: float | None, text: str) -> str:
    """A context provider that answers ``text`` after ``delay`` s (None: never)."""
    wait = "await asyncio.Event().wait()" if delay is None else f"await asyncio.sleep({delay})"
    return ext_code(
        f"""
        context_priority = {priority}
        async def get_context(self, prompt, turn_context):
            {wait}
            return {text!r}
        """,
        header="import asyncio",
    )


async def _hang(call):
    await asyncio.Event().wait()


async def test_hung_context_provider_does_not_delay_the_turn_past_its_limit(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("hangs", provider(5, None, "never seen"), CONVERSING)
    make_ext("slow_b", provider(30, 0.6, "second context"), CONVERSING)
    make_ext("slow_a", provider(20, 0.6, "first context"), CONVERSING)
    model = ScriptedModel([[assistant_message("answered")]])
    path = settings_file(turns={"context_timeout_s": 1.5})
    async with running_kernel(path, model=model) as k:
        start = time.monotonic()
        await k.loader.instance("capture").say("hello")
        await wait_for(lambda: replies(k), timeout=20)
        elapsed = time.monotonic() - start
    assert replies(k) == [("reply", "u1", "answered")]
    # one limit for all (concurrent), not 5 s + 0.6 s + 0.6 s one after another
    assert elapsed < 4.0, elapsed
    instructions = model_read(model.calls[0])  # the turn's note (ADR 0054)
    assert "never seen" not in instructions
    # results keep the priority order, whatever order they finished in
    assert instructions.index("first context") < instructions.index("second context")


async def test_hung_command_handler_gets_a_clear_timeout_answer(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "stuck",
        ext_code(
            """
            def get_commands(self):
                from core.extensions.contract import Command
                async def hang(args, turn):
                    await asyncio.Event().wait()
                return [Command("hang", "never returns", hang)]
            """,
            header="import asyncio",
        ),
    )
    path = settings_file(turns={"command_timeout_s": 0.5})
    async with running_kernel(path, model=ScriptedModel([])) as k:
        channel = k.loader.instance("capture")
        await channel.say("/hang")
        await wait_for(lambda: replies(k), timeout=15)
        await channel.say("/help")
        await wait_for(lambda: len(replies(k)) == 2, timeout=15)
    assert replies(k)[0][2] == (
        "/hang took too long (over 0.5 s) and was stopped. Please try again."
    )
    assert "/hang" in replies(k)[1][2]  # the conversation answers right after


async def test_hung_model_call_answers_with_the_timeout_line_and_the_chat_goes_on(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([ModelStep.respond(_hang), [assistant_message("fine now")]])
    path = settings_file(turns={"timeout_s": 1})
    async with running_kernel(path, model=model) as k:
        channel = k.loader.instance("capture")
        await channel.say("think forever")
        await wait_for(lambda: replies(k), timeout=15)
        await channel.say("are you there?")
        await wait_for(lambda: len(replies(k)) == 2, timeout=15)
    assert replies(k) == [
        ("reply", "u1", "That took too long (over 1 s) and was stopped. Please try again."),
        ("reply", "u1", "fine now"),
    ]
    # the stopped turn left nothing half-written in the history
    assert "think forever" not in str(model.calls[1].input)
    model.assert_complete()


async def test_more_hung_turns_than_workers_do_not_stop_a_new_conversation(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    hung_users = 40  # more than the router's 32 concurrent turns

    async def answer(call):
        if "hang" in str(call.input):
            await asyncio.Event().wait()
        return [assistant_message("hello newcomer")]

    model = ScriptedModel([ModelStep.respond(answer) for _ in range(hung_users + 1)])
    path = settings_file(turns={"timeout_s": 1.5})
    async with running_kernel(path, model=model) as k:
        channel = k.loader.instance("capture")
        for n in range(hung_users):
            await channel.say("hang please", user_id=f"stuck{n}")
        await channel.say("hi", user_id="newcomer")
        await wait_for(lambda: any(r[1] == "newcomer" for r in replies(k)), timeout=30)
        await wait_for(lambda: len(replies(k)) == hung_users + 1, timeout=30)
    newcomer = [r[2] for r in replies(k) if r[1] == "newcomer"]
    assert newcomer == ["hello newcomer"]
    stuck = {r[2] for r in replies(k) if r[1] != "newcomer"}
    assert stuck == {"That took too long (over 1.5 s) and was stopped. Please try again."}


async def test_history_over_its_budget_is_summarised_before_the_model_sees_it(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel(
        [
            [assistant_message("answer 0")],
            [assistant_message("answer 1")],
            [assistant_message("The user asked two questions.")],  # the compaction summary
            [assistant_message("answer 2")],
        ]
    )
    path = settings_file(turns={"history_max_items": 3})
    async with running_kernel(path, model=model) as k:
        channel = k.loader.instance("capture")
        for n, text in enumerate(("first question", "second question", "third question")):
            await channel.say(text)
            await wait_for(lambda n=n: len(replies(k)) == n + 1, timeout=15)
    assert "first question" in str(model.calls[2].input)  # what was summarised
    third = model.calls[3].input
    # 4 stored items over a budget of 3: the older turns became one summary item
    assert "first question" not in str(third) and "answer 0" not in str(third)
    assert third[0]["role"] == "user" and "The user asked two questions." in third[0]["content"]
    assert third[-1] == {"role": "user", "content": "third question"}
