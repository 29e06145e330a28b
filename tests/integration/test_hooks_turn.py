"""Hooks shape a whole turn through a running kernel (SPEC §9, docs/hooks.md).

Each test loads small hook extensions with a real loader, sends a message
through a capture channel and checks what the model was given (the scripted
model records every call), what the user got, what the history holds and
which frames the journal has.
"""

from __future__ import annotations

import logging
from typing import Any

from agents.testing import ScriptedModel, assistant_message
from test_reply_outbox import STREAM_CHANNEL

from conftest import ext_code
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    CONVERSING,
    conversing,
    running_kernel,
    session_history,
    wait_for,
)

HEADER = "from core.extensions.contract import Annotated, Command, ShortCircuit, TurnOutcome"


def replies(kernel: Any) -> list[str]:
    return [m for kind, _, m in (kernel.loader.instance("capture").sent or []) if kind == "reply"]


async def say(kernel: Any, text: str) -> str:
    before = len(replies(kernel))
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: len(replies(kernel)) > before)
    return replies(kernel)[-1]


def user_texts(model: ScriptedModel, call: int = -1) -> list[str]:
    items = model.calls[call].input
    return [i["content"] for i in items if isinstance(i, dict) and i.get("role") == "user"]


async def frames(kernel: Any, kind: str) -> list[dict[str, Any]]:
    records = await kernel.bus.journal.recent_events(50, topic=f"hook.{kind}")
    return [dict(r.payload) for r in reversed(records)]


def setup(make_ext, settings_file, *extensions: tuple[str, str, dict[str, Any]], **settings: Any):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    for ext_id, body, manifest in extensions:
        make_ext(ext_id, ext_code(body, HEADER), conversing(manifest))
    return settings_file(channels={"default": "capture"}, **settings)


async def test_input_hooks_chain_in_priority_order_and_the_history_keeps_their_result(
    make_ext, settings_file
):
    path = setup(
        make_ext,
        settings_file,
        (
            "redact",
            """
            async def on_input_messages(self, messages, turn):
                return [{**m, "content": m["content"].replace("4111", "[card]")} for m in messages]
            """,
            {"priority": 90},
        ),
        (
            "shout",
            """
            async def on_input_messages(self, messages, turn):
                return [{**m, "content": m["content"].upper()} for m in messages]
            """,
            {"priority": 10},
        ),
    )
    model = ScriptedModel([[assistant_message("Noted.")]])
    async with running_kernel(path, model=model) as kernel:
        assert await say(kernel, "my card is 4111") == "Noted."
        stored = session_history(kernel.data_dir, "capture:u1")
        rewrites = await frames(kernel, "input")
    assert user_texts(model) == ["MY CARD IS [CARD]"]
    assert stored[0] == {"role": "user", "content": "MY CARD IS [CARD]"}
    assert [(f["owner"], f["after"][0]["content"]) for f in rewrites] == [
        ("redact", "my card is [card]"),
        ("shout", "MY CARD IS [CARD]"),
    ]
    assert rewrites[0]["before"] == [{"role": "user", "content": "my card is 4111"}]
    assert rewrites[0]["turn_id"] and rewrites[0]["session_id"] == "capture:u1"


async def test_a_short_circuit_answers_without_the_model_and_is_remembered(make_ext, settings_file):
    path = setup(
        make_ext,
        settings_file,
        (
            "faq",
            """
            async def on_input_messages(self, messages, turn):
                if "opening hours" in messages[-1]["content"]:
                    return ShortCircuit("We are open 9 to 5.")
                return None
            """,
            {},
        ),
        (
            "later",
            """
            calls = 0
            async def on_input_messages(self, messages, turn):
                type(self).calls += 1
            """,
            {"priority": 10},
        ),
    )
    model = ScriptedModel([[assistant_message("You asked about opening hours.")]])
    async with running_kernel(path, model=model) as kernel:
        assert await say(kernel, "what are your opening hours?") == "We are open 9 to 5."
        assert model.calls == ()  # no model call for the short circuit
        assert kernel.loader.instance("later").calls == 0  # the chain stopped
        assert await say(kernel, "and what did I ask?") == "You asked about opening hours."
        short = await frames(kernel, "short_circuit")
    assert user_texts(model) == ["what are your opening hours?", "and what did I ask?"]
    assert {"role": "assistant", "content": "We are open 9 to 5."} in model.calls[0].input
    assert [(f["owner"], f["after"]) for f in short] == [("faq", "We are open 9 to 5.")]


async def test_output_hooks_render_tags_then_rewrite_and_the_journal_keeps_the_original(
    make_ext, settings_file
):
    path = setup(
        make_ext,
        settings_file,
        (
            "weather",
            """
            tag_patterns = ["weather", "ui:*"]
            async def on_tag(self, tag, attrs, inner, turn):
                if tag == "weather":
                    return f"{attrs['city']}: sunny"
                return f"[{tag[3:]}: {inner}]"
            """,
            {},
        ),
        (
            "footer",
            """
            async def on_llm_output(self, output, turn):
                return Annotated(output + " (checked)", {"words": len(output.split())})
            """,
            {},
        ),
    )
    answer = 'Today <weather city="Lisbon"></weather>. <ui:box>Take <b>a hat</b></ui:box>'
    model = ScriptedModel([[assistant_message(answer)]])
    async with running_kernel(path, model=model) as kernel:
        reply = await say(kernel, "weather?")
        stored = session_history(kernel.data_dir, "capture:u1")
        output = await frames(kernel, "output")
        tags = await frames(kernel, "tag")
    assert reply == "Today Lisbon: sunny. [box: Take <b>a hat</b>] (checked)"
    assert stored[1]["content"][0]["text"] == answer  # the model's own words stay its history
    assert output[0]["before"] == "Today Lisbon: sunny. [box: Take <b>a hat</b>]"
    assert output[0]["annotations"] == {"words": 7}
    assert [(t["tag"], t["before"]) for t in tags] == [
        ("weather", ""),
        ("ui:box", "Take <b>a hat</b>"),
    ]


async def test_plain_text_hooks_see_both_directions(make_ext, settings_file):
    path = setup(
        make_ext,
        settings_file,
        (
            "units",
            """
            async def on_plain_text(self, text, direction, turn):
                if direction == "in":
                    return text.replace("km", "kilometres")
                return text.replace("kilometres", "km")
            """,
            {},
        ),
    )
    model = ScriptedModel([[assistant_message("That is 5 kilometres.")]])
    async with running_kernel(path, model=model) as kernel:
        assert await say(kernel, "how far is 5 km?") == "That is 5 km."
        directions = [f["direction"] for f in await frames(kernel, "plain_text")]
    assert user_texts(model) == ["how far is 5 kilometres?"]
    assert directions == ["in", "out"]


async def test_lifecycle_hooks_see_turns_and_sessions(make_ext, settings_file):
    path = setup(
        make_ext,
        settings_file,
        (
            "watcher",
            """
            seen = []
            async def on_turn_start(self, turn):
                self.seen.append(("start", turn.session_id, turn.turn_id is not None))
            async def on_turn_end(self, turn, outcome):
                self.seen.append(("end", outcome.status, outcome.reply, outcome.duration_ms >= 0))
            async def on_session_start(self, turn):
                self.seen.append(("session", turn.session_id))
            async def on_session_end(self, turn, reason):
                self.seen.append(("session end", turn.session_id, reason))
            """,
            {},
        ),
    )
    model = ScriptedModel([[assistant_message("One.")], [assistant_message("Two.")]])
    async with running_kernel(path, model=model) as kernel:
        await say(kernel, "first")
        await say(kernel, "/new")
        await say(kernel, "second")
        seen = kernel.loader.instance("watcher").seen
    assert seen == [
        ("start", "capture:u1", True),
        ("session", "capture:u1"),
        ("end", "answered", "One.", True),
        ("session end", "capture:u1", "new"),
        ("start", "capture:u1#1", True),
        ("session", "capture:u1#1"),
        ("end", "answered", "Two.", True),
    ]


async def test_prompt_additions_apply_by_position_and_condition(make_ext, settings_file):
    additions = [
        {"position": "system_prefix", "content": "PREFIX-A"},
        {"position": "system_suffix", "content": "SUFFIX-A"},
        {"position": "user_prefix", "content": "(be brief)", "condition": {"tag_present": "q"}},
        {
            "position": "user_suffix",
            "content": "(metric)",
            "condition": {"context_match": r"\bkm\b"},
        },
    ]
    path = setup(
        make_ext,
        settings_file,
        ("b_ext", "", {"prompt_additions": [{"position": "system_prefix", "content": "PREFIX-B"}]}),
        ("a_ext", "", {"prompt_additions": additions}),
    )
    model = ScriptedModel([[assistant_message("ok")], [assistant_message("ok")]])
    async with running_kernel(path, model=model) as kernel:
        await say(kernel, "<q>how far</q> is it in km?")
        await say(kernel, "thanks")
        stored = session_history(kernel.data_dir, "capture:u1")
    first = model.calls[0]
    instructions = first.system_instructions or ""
    assert instructions.startswith("PREFIX-A\n\nPREFIX-B\n\n")  # by extension id
    assert instructions.rstrip().endswith("SUFFIX-A")
    assert user_texts(model, 0) == ["(be brief)\n\n<q>how far</q> is it in km?\n\n(metric)"]
    assert user_texts(model, 1)[-1] == "thanks"  # conditions fail: nothing added
    assert stored[0] == {"role": "user", "content": "<q>how far</q> is it in km?"}


async def test_tool_guidance_is_in_the_instructions_and_unknown_names_are_warned(
    make_ext, settings_file, caplog
):
    config = {"preferred_tools": ["current_time"], "avoided_tools": ["no_such_tool"]}
    path = setup(make_ext, settings_file, ("guide", "", {"tool_config": config}))
    model = ScriptedModel([[assistant_message("ok")]])
    with caplog.at_level(logging.WARNING):
        async with running_kernel(path, model=model) as kernel:
            await say(kernel, "hi")
    instructions = model.calls[0].system_instructions or ""
    assert "Tool guidance (advice, not rules):" in instructions
    assert (
        "- (guide) prefer current_time; avoid no_such_tool unless nothing else fits."
        in instructions
    )
    assert "extension guide: tool_config names unknown tool 'no_such_tool'" in caplog.text


async def test_failing_and_slow_hooks_are_skipped_and_the_user_gets_the_answer(
    make_ext, settings_file, caplog
):
    path = setup(
        make_ext,
        settings_file,
        (
            "broken",
            """
            async def on_input_messages(self, messages, turn):
                raise RuntimeError("boom")
            async def on_llm_output(self, output, turn):
                import asyncio
                await asyncio.sleep(30)
            async def on_turn_end(self, turn, outcome):
                return 42
            """,
            {},
        ),
        hooks={"timeout_s": 0.3},
    )
    model = ScriptedModel([[assistant_message("Fine.")]])
    with caplog.at_level(logging.ERROR):
        async with running_kernel(path, model=model) as kernel:
            assert await say(kernel, "hello") == "Fine."
    assert user_texts(model) == ["hello"]
    assert "hook on_input_messages of broken failed: RuntimeError: boom" in caplog.text
    assert "hook on_llm_output of broken took longer than 0.3 s (hooks.timeout_s)" in caplog.text


async def test_an_extension_without_hooks_adds_no_hook_entries(make_ext, settings_file):
    path = setup(make_ext, settings_file, ("plain", "", {}))
    async with running_kernel(path, model=ScriptedModel([])) as kernel:
        assert kernel.hook_registry.owners() == []
        assert not kernel.hooks.shapes_output()


async def test_a_streaming_channel_never_sees_text_an_output_hook_would_change(
    make_ext, settings_file
):
    make_ext("stream", STREAM_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "secret",
        ext_code(
            """
            tag_patterns = ["secret"]
            async def on_tag(self, tag, attrs, inner, turn):
                return "[hidden]"
            """
        ),
        CONVERSING,
    )
    path = settings_file(channels={"default": "stream"})
    model = ScriptedModel([[assistant_message("The code is <secret>1234</secret>.")]])
    async with running_kernel(path, model=model) as kernel:
        channel = kernel.loader.instance("stream")
        await channel.say("code?")
        await wait_for(lambda: any(e[0] == "end" for e in channel.events or []))
    assert not any(
        kind == "chunk" and "1234" in text for kind, *rest in channel.events for text in rest
    )
    assert channel.events[-1] == ("end", "The code is [hidden].")


ROUTER = """
async def route_model(self, messages, turn):
    if "hard" in messages[-1]["content"]:
        return ModelRoute("big-model", "a hard question")
    return None
"""


async def test_routing_is_advisory_unless_settings_let_the_extension_decide(
    make_ext, settings_file, caplog
):
    from support.fake_openai import FakeOpenAIServer

    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "router", ext_code(ROUTER, "from core.extensions.contract import ModelRoute"), CONVERSING
    )
    with FakeOpenAIServer() as server, caplog.at_level(logging.INFO):
        server.script("small answer", "big answer")
        models = {
            "default": {"provider": "local", "model": "small-model"},
            "providers": {
                "local": {"type": "openai_compatible", "base_url": server.base_url, "api_key": "x"}
            },
        }
        advisory = settings_file(channels={"default": "capture"}, models=models)
        async with running_kernel(advisory) as kernel:
            assert await say(kernel, "a hard one") == "small answer"
        deciding = settings_file(
            channels={"default": "capture"},
            models=models,
            hooks={"authoritative_routing": ["router"]},
        )
        async with running_kernel(deciding) as kernel:
            assert await say(kernel, "a hard one") == "big answer"
            routing = await frames(kernel, "routing")
        sent_models = [request["model"] for request in server.requests]
    assert sent_models == ["small-model", "big-model"]
    assert "router proposes model big-model (a hard question); advisory" in caplog.text
    assert [(f["after"], f["mode"]) for f in routing][-1] == ("big-model", "authoritative")


def test_bad_hook_manifest_keys_name_the_file_and_the_field(make_ext):
    from core.extensions.loading.manifest import ManifestError, load_manifest

    ext_dir = make_ext(
        "sloppy",
        "",
        {
            "priority": 101,
            "prompt_additions": [
                {"position": "system_middle", "content": "x"},
                {"position": "user_prefix", "content": "x", "condition": {"context_match": "("}},
                {"position": "user_prefix", "content": "x", "condition": {}},
            ],
            "tool_config": {"preferred": ["recall"]},
        },
    )
    try:
        load_manifest(ext_dir)
    except ManifestError as exc:
        message = str(exc)
    else:
        raise AssertionError("the manifest loaded")
    assert message.startswith(f"{ext_dir / 'manifest.yaml'}: ")
    assert "priority: Input should be less than or equal to 100 (got 101)" in message
    assert "prompt_additions.0.position: Input should be 'system_prefix'" in message
    assert (
        "prompt_additions.1.condition.context_match: not a valid regular expression '('" in message
    )
    assert "prompt_additions.2.condition: needs exactly one of tag_present, state_value" in message
    assert "tool_config.preferred: unknown key" in message


async def test_a_command_hook_in_settings_denies_a_tool_in_a_real_turn(
    make_ext, settings_file, tmp_path
):
    import sys

    from agents.testing import function_call

    guard = tmp_path / "guard.py"
    guard.write_text(
        "import json, sys\n"
        "call = json.load(sys.stdin)\n"
        "if call['tool_name'] == 'request_restart':\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'not from chat'}))\n"
    )
    path = setup(
        make_ext,
        settings_file,
        hooks={"commands": [{"hook": "before_tool_call", "command": [sys.executable, str(guard)]}]},
    )
    model = ScriptedModel(
        [
            [function_call("request_restart", {"reason": "x"}, call_id="r1")],
            [assistant_message("I will not restart.")],
        ]
    )
    async with running_kernel(path, model=model) as kernel:
        assert await say(kernel, "restart please") == "I will not restart."
        assert kernel.restart_requested is None
    outputs = [i for i in model.calls[1].input if i.get("type") == "function_call_output"]
    assert outputs[-1]["output"] == "denied by command:guard: not from chat"


async def test_a_state_value_condition_follows_the_extensions_session_state(
    make_ext, settings_file
):
    driving = {
        "position": "user_prefix",
        "content": "(The user is driving; keep it short.)",
        "condition": {"state_value": {"key": "driving", "equals": True}},
    }
    path = setup(
        make_ext,
        settings_file,
        (
            "car",
            """
            def get_commands(self):
                async def drive(args, turn):
                    await self.ctx.set_state("driving", args == "on")
                    return f"driving {args}"
                return [Command("drive", "driving mode on/off", drive)]
            async def on_turn_end(self, turn, outcome):
                self.seen = await self.ctx.get_state("driving")
            """,
            {"prompt_additions": [driving]},
        ),
    )
    model = ScriptedModel([[assistant_message("ok")] for _ in range(3)])
    async with running_kernel(path, model=model) as kernel:
        await say(kernel, "hello")
        await say(kernel, "/drive on")
        await say(kernel, "where to?")
        assert kernel.loader.instance("car").seen is True  # hooks see the turn's session state
        await say(kernel, "/drive off")
        await say(kernel, "thanks")
    assert [user_texts(model, n)[-1] for n in range(3)] == [
        "hello",
        "(The user is driving; keep it short.)\n\nwhere to?",
        "thanks",
    ]


async def test_a_quiet_conversation_expires_into_a_new_session(
    make_ext, settings_file, monkeypatch
):
    import time as clock

    path = setup(
        make_ext,
        settings_file,
        (
            "watcher",
            """
            seen = []
            async def on_session_start(self, turn):
                self.seen.append(("start", turn.session_id))
            async def on_session_end(self, turn, reason):
                self.seen.append(("end", turn.session_id, reason))
            """,
            {},
        ),
        turns={"session_idle_timeout_s": 3600},
    )
    model = ScriptedModel([[assistant_message("One.")], [assistant_message("Two.")]])
    async with running_kernel(path, model=model) as kernel:
        await say(kernel, "first")
        later = clock.time() + 3601
        monkeypatch.setattr("core.kernel.turns.router.time.time", lambda: later)
        await say(kernel, "second, a day later")
        seen = kernel.loader.instance("watcher").seen
    assert seen == [
        ("start", "capture:u1"),
        ("end", "capture:u1", "expired"),
        ("start", "capture:u1#1"),
    ]
    assert user_texts(model, 1) == ["second, a day later"]  # the old exchange is gone
