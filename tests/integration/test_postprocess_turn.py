"""Post-processors in whole turns through a running kernel: the model gets the
clean text, results follow the answer as their targets say, everything is kept
with the turn and journaled, and delivery stays exactly once (ADR 0014, 0023)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call
from test_reply_outbox import FLAKY_CHANNEL, STREAM_CHANNEL

from conftest import ext_code
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, CONVERSING, running_kernel, wait_for

# the bundled post-processors (#json, #decision, …), as in a fresh install
pytestmark = pytest.mark.usefixtures("postprocessors")

HEADER = "from core.extensions.contract import PostProcessResult"

# an extension that *is* a post-processor, and fails
BOOM = ext_code(
    """
    name = "boom"
    output_target = "chat_append"
    def validate_param(self, param):
        return True, None
    async def execute(self, context, param):
        raise RuntimeError("exploded")
    """,
    HEADER,
)

# an extension offering two post-processors; the second reads the first's result
FAMILY = ext_code(
    """
    def get_post_processors(self):
        return [Shout(), Count()]
    """,
    HEADER
    + """
class Shout:
    name = "shout"
    output_target = "status_panel"
    def validate_param(self, param):
        return True, None
    async def execute(self, context, param):
        return PostProcessResult(self.name, context.answer_text.upper())

class Count:
    name = "count"
    output_target = "silent"
    description = "counts the words of the answer"
    def validate_param(self, param):
        return param in (None, "words"), "only words"
    async def execute(self, context, param):
        before = {k: v.content for k, v in context.previous_results.items()}
        return PostProcessResult(self.name, {"words": len(context.answer_text.split()),
                                             "before": before, "tools": list(context.tools_used)})
""",
)

ANSWER = "The web tier is down and CPU exceeded 95%. We recommend scaling out."


def sent(kernel: Any, ext_id: str = "capture") -> list[str]:
    return [m for kind, _, m in (kernel.loader.instance(ext_id).sent or []) if kind == "reply"]


async def say(kernel: Any, text: str, count: int = 1, ext_id: str = "capture") -> list[str]:
    before = len(sent(kernel, ext_id))
    await kernel.loader.instance(ext_id).say(text)
    await wait_for(lambda: len(sent(kernel, ext_id)) >= before + count)
    return sent(kernel, ext_id)[before:]


def user_texts(model: ScriptedModel) -> list[str]:
    items = model.calls[0].input
    return [i["content"] for i in items if isinstance(i, dict) and i.get("role") == "user"]


def followed_up(kernel: Any) -> list[tuple[str, str]]:
    """The ledger rows (reply, follow-up) that have a follow-up."""
    with sqlite3.connect(kernel.data_dir / "sessions.db") as conn:
        query = "SELECT reply, followup FROM hearth_turns WHERE followup IS NOT NULL"
        rows = conn.execute(query).fetchall()
    conn.close()
    return rows


async def test_a_turn_with_post_processors_end_to_end(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("boom", BOOM, CONVERSING)
    make_ext("family", FAMILY, CONVERSING)
    path = settings_file(channels={"default": "capture"})
    model = ScriptedModel(
        [
            [function_call("current_time", {}, call_id="t1")],
            [assistant_message(ANSWER)],
        ]
    )
    async with running_kernel(path, model=model) as kernel:
        for name in ("boom", "shout", "count"):  # an extension's are not activated by default
            assert await say(kernel, f"/ext activate {name}") == [f"Activated #{name} ({name})."]
        text = "How is #prod doing? #json:minimal #boom #shout #decision #count:words"
        answer, followup = await say(kernel, text, count=2)
        last = (await say(kernel, "/last count"))[0]
        by_topic = {
            topic: [
                dict(r.payload)
                for r in reversed(
                    await kernel.bus.journal.recent_events(50, topic=f"postprocess.{topic}")
                )
            ]
            for topic in ("started", "completed", "results")
        }
        recorded = followed_up(kernel)
        listing = (await say(kernel, "/ext"))[0]

    assert user_texts(model) == ["How is #prod doing?"]  # unknown #words stay text
    assert answer == ANSWER
    assert followup == (
        "#json\n```json\n"
        '{\n  "query": "How is #prod doing?",\n'
        '  "answer": "The web tier is down and CPU exceeded 95%. We recommend scaling out."\n}'
        "\n```\n\n"
        "▸ #boom failed: RuntimeError: exploded\n\n"
        "▸ #shout: THE WEB TIER IS DOWN AND CPU EXCEEDED 95%. WE RECOMMEND SCALING OUT."
    )  # silent #decision and #count are not shown
    assert recorded == [(ANSWER, followup)]  # the ledger holds what was sent
    assert '"words": 13' in last and '"tools": [\n    "current_time"\n  ]' in last
    assert '"shout": "THE WEB TIER' in last and '"boom": null' in last  # chained
    started = by_topic["started"]
    assert [(e["name"], e["param"]) for e in started] == [
        ("json", "minimal"),
        ("boom", None),
        ("shout", None),
        ("decision", None),
        ("count", "words"),
    ]
    completed = {e["name"]: e for e in by_topic["completed"]}
    assert completed["decision"]["result"]["content"]["branch_key"] == (
        "threshold_exceeded_critical"
    )
    assert completed["boom"]["success"] is False
    assert set(by_topic["results"][0]["results"]) == set(completed)
    assert {e["turn_id"] for e in started} == {by_topic["results"][0]["turn_id"]}
    assert "#shout → shout (status_panel)" in listing
    assert "count [Custom, from family] — counts the words of the answer" in listing


async def test_a_streamed_turn_shows_progress_and_sends_the_follow_up_after_the_end(
    make_ext, settings_file
):
    make_ext("stream", STREAM_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "stream"})
    model = ScriptedModel([[assistant_message("All quiet.")]])
    async with running_kernel(path, model=model) as kernel:
        channel = kernel.loader.instance("stream")
        await channel.say("Status? #json:minimal")
        await wait_for(lambda: any(kind == "send" for kind, _ in channel.events or []))
        log = list(channel.events)
    kinds = [kind for kind, _ in log]
    assert ("status", "using #json:minimal…") in log
    assert kinds.index("status") < kinds.index("end") < kinds.index("send")
    assert ("end", "All quiet.") in log
    assert log[-1] == (
        "send",
        '#json\n```json\n{\n  "query": "Status?",\n  "answer": "All quiet."\n}\n```',
    )


async def test_a_failed_follow_up_is_retried_alone(make_ext, settings_file):
    flaky = FLAKY_CHANNEL.replace("if self.attempts <= self.failures:", "if self.attempts == 2:")
    make_ext("flaky", flaky, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "flaky"}, events={"retry_base_s": 0.05})
    model = ScriptedModel([[assistant_message("Done.")]])
    async with running_kernel(path, model=model) as kernel:
        channel = kernel.loader.instance("flaky")
        await channel.say("Go #json:minimal")
        await wait_for(lambda: len(channel.sent or []) >= 2)
        replies = [m for _, _, m in channel.sent]
    assert replies[0] == "Done."  # sent once, before the follow-up failed
    assert replies[1].startswith("#json\n") and len(replies) == 2
    assert channel.attempts == 3  # answer, failed follow-up, follow-up again


FORGER = ext_code(
    """
    def get_commands(self):
        from core.extensions.contract import Command
        async def forge(args, turn):
            try:
                await self.ctx.emit("postprocess.completed", {"name": "alertcheck"})
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
            return "published"
        return [Command("forge", "publish a fake result", forge)]
    """
)


async def test_an_extension_cannot_forge_a_result_for_the_webhooks(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("forger", FORGER, {"permissions": {"emit": ["*"]}})
    async with running_kernel(settings_file(channels={"default": "capture"})) as kernel:
        reply = (await say(kernel, "/forge"))[0]
        forged = await kernel.bus.journal.recent_events(5, topic="postprocess.completed")
    assert reply.startswith("PermissionDeniedError") and "results are the kernel's own" in reply
    assert forged == []


async def test_a_fresh_install_has_the_four_active_with_no_grant_asked(
    make_ext, settings_file, ext_root
):
    """The bundled ``postprocessors`` extension loads on the project's grant alone (no
    grants.json entry for it) and every conversation starts with its four (ADR 0063)."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"})
    model = ScriptedModel([[assistant_message(ANSWER)]])
    async with running_kernel(path, model=model) as kernel:
        assert "postprocessors" not in (kernel.data_dir / "grants.json").read_text()
        assert kernel.wiring.is_wired("postprocessors")
        listing = (await say(kernel, "/ext"))[0]
        assert [line.strip() for line in listing.splitlines()[1:5]] == [
            "#json → json (chat_append)",
            "#decision → decision (silent)",
            "#extract → extract (silent)",
            "#classify → classify (silent)",
        ]
        assert "  classify [Automation, built-in] — the answer's category" in listing
        await say(kernel, "Status? #classify")
        assert (await say(kernel, "/last classify"))[0].startswith(
            "Results for “Status? #classify”:\n#classify (silent, ok, "
        )
        assert '"primary_category": "alert"' in sent(kernel)[-1]
