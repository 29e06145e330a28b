"""MessageRouter through a whole kernel: turns, commands, context, history,
concurrency, errors. The model is a ScriptedModel."""

from __future__ import annotations

import asyncio
import time

from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, CONVERSING, running_kernel, wait_for

CONTEXT_PROVIDER = ext_code(
    """
    context_priority = 50
    async def get_context(self, prompt, turn_context):
        return f"The user's cat is called Miso. (asked: {prompt})"
    """
)


def replies(kernel, channel="capture"):
    return kernel.loader.instance(channel)._log()


async def test_message_gets_model_reply_and_history_is_kept(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Hello!")], [assistant_message("Still here.")]])
    async with running_kernel(settings_file(channels={"default": "capture"}), model=model) as k:
        channel = k.loader.instance("capture")
        await channel.say("hi there")
        await wait_for(lambda: len(replies(k)) == 1)
        await channel.say("and again")
        await wait_for(lambda: len(replies(k)) == 2)
    assert replies(k) == [("reply", "u1", "Hello!"), ("reply", "u1", "Still here.")]
    second_input = str(model.calls[1].input)
    assert "hi there" in second_input and "Hello!" in second_input  # history came along
    model.assert_complete()


async def test_no_model_configured_gives_one_clear_line_and_commands_work(
    make_ext, settings_file, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(
        channels={"default": "capture"},
        models={"default": {"provider": "openai", "model": "gpt-5-mini"}},
    )
    async with running_kernel(path) as k:
        channel = k.loader.instance("capture")
        await channel.say("hello?")
        await wait_for(lambda: len(replies(k)) == 1)
        await channel.say("/help")
        await wait_for(lambda: len(replies(k)) == 2)
    no_model, help_text = replies(k)[0][2], replies(k)[1][2]
    assert "\n" not in no_model and "OPENAI_API_KEY" in no_model
    assert "/help" in help_text and "/new" in help_text and "/status" in help_text


async def test_commands_never_call_the_model(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "greeter",
        ext_code(
            """
            def get_commands(self):
                from core.extensions.contract import Command
                async def hello(args, turn):
                    import asyncio
                    await asyncio.sleep(0.3)  # slower than the kernel's own commands
                    return f"hello {args} from {turn.channel_id}"
                return [Command("hello", "say hello", hello)]
            """
        ),
    )
    model = ScriptedModel([])
    # replies come in the order the commands were typed, a slow one first
    async with running_kernel(settings_file(), model=model) as k:
        channel = k.loader.instance("capture")
        for text in ("/hello world", "/nosuch thing", "/status"):
            await channel.say(text)
        await wait_for(lambda: len(replies(k)) == 3)
    texts = [r[2] for r in replies(k)]
    assert texts[0] == "hello world from capture"
    assert texts[1] == "Unknown command /nosuch. Type /help to see the commands."
    assert "Uptime:" in texts[2] and "Extensions active" in texts[2] and "Events:" in texts[2]
    assert model.calls == ()


async def test_context_providers_go_into_the_turn_note_not_the_user_text(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("petfacts", CONTEXT_PROVIDER, CONVERSING)
    model = ScriptedModel([[assistant_message("Miso!")]])
    async with running_kernel(settings_file(), model=model) as k:
        await k.loader.instance("capture").say("what is my cat called?")
        await wait_for(lambda: replies(k))
    call = model.calls[0]
    assert "Miso" not in call.system_instructions  # the instructions stay the same bytes
    note, asked = call.input[-2], call.input[-1]
    assert asked == {"role": "user", "content": "what is my cat called?"}
    assert note["role"] == "system"
    text = note["content"]
    assert text.startswith("Now: ")
    assert "The user's cat is called Miso. (asked: what is my cat called?)" in text
    # the channel context (priority 0) comes before the provider (50), joined by ---
    assert text.index("Channel: ") < text.index("\n---\n") < text.index("Miso")


async def test_new_starts_a_fresh_session(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]])
    async with running_kernel(settings_file(), model=model) as k:
        channel = k.loader.instance("capture")
        await channel.say("remember banana")
        await wait_for(lambda: len(replies(k)) == 1)
        await channel.say("/new")
        await wait_for(lambda: len(replies(k)) == 2)
        await channel.say("what fruit?")
        await wait_for(lambda: len(replies(k)) == 3)
    assert "banana" not in str(model.calls[1].input)


async def test_tool_errors_reach_the_model_and_model_errors_become_an_apology(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "flaky",
        ext_code(
            """
            def get_tools(self):
                from agents import function_tool
                @function_tool
                def explode() -> str:
                    "Always fails."
                    raise RuntimeError("kaboom")
                return [explode]
            """
        ),
    )
    model = ScriptedModel(
        [
            [function_call("explode", {}, call_id="c1")],
            [assistant_message("The tool failed, sorry.")],
            RuntimeError("HTTP 500 from provider"),
            [assistant_message("back to normal")],
        ]
    )
    async with running_kernel(settings_file(), model=model) as k:
        channel = k.loader.instance("capture")
        await channel.say("use the tool")
        await wait_for(lambda: len(replies(k)) == 1)
        await channel.say("again")
        await wait_for(lambda: len(replies(k)) == 2)
        await channel.say("and now?")
        await wait_for(lambda: len(replies(k)) == 3)
    texts = [r[2] for r in replies(k)]
    assert texts[0] == "The tool failed, sorry."
    # the tool's failure was reported to the model as the tool's output
    assert "RuntimeError: kaboom" in str(model.calls[1].input)
    assert texts[1].startswith("Sorry, I could not get an answer") and "HTTP 500" in texts[1]
    assert texts[2] == "back to normal"


async def test_conversations_run_concurrently_but_each_stays_in_order(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)

    async def slow(call):
        text = str(call.input)
        await asyncio.sleep(0.5 if "slow" in text.split("'content': '")[-1] else 0.01)
        last = text.rsplit("'content': '", 1)[-1].split("'")[0]
        return [assistant_message(f"re: {last}")]

    model = ScriptedModel([ModelStep.respond(slow) for _ in range(4)])
    async with running_kernel(settings_file(), model=model) as k:
        channel = k.loader.instance("capture")
        start = time.monotonic()
        await channel.say("slow one", user_id="alice")
        await channel.say("quick two", user_id="alice")
        await channel.say("hello", user_id="bob")
        await wait_for(lambda: any(r[1] == "bob" for r in replies(k)))
        bob_time = time.monotonic() - start
        await wait_for(lambda: len(replies(k)) == 3)
    alice = [r[2] for r in replies(k) if r[1] == "alice"]
    assert alice == ["re: slow one", "re: quick two"]  # in order within a conversation
    assert bob_time < 0.4  # bob was not stuck behind alice's slow turn


async def test_a_slow_turn_delays_neither_commands_nor_notifications(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)

    async def slow(call):
        await asyncio.sleep(3)
        return [assistant_message("finally")]

    model = ScriptedModel([ModelStep.respond(slow)])
    async with running_kernel(settings_file(channels={"default": "capture"}), model=model) as k:
        channel = k.loader.instance("capture")
        await channel.say("think hard")
        await wait_for(lambda: model.calls)  # the slow turn is running
        start = time.monotonic()
        await channel.say("/help")  # same conversation
        await k.bus.publish("system.user.notify", "test", {"text": "tea is ready"})
        await wait_for(lambda: len(replies(k)) == 2, timeout=2)
        assert time.monotonic() - start < 1.0
        await wait_for(lambda: len(replies(k)) == 3, timeout=10)
    kinds = [r[0] for r in replies(k)]
    assert sorted(kinds[:2]) == ["notify", "reply"] and replies(k)[2][2] == "finally"
