"""The Slack channel (issue 48) through a whole kernel, over real HTTP and a real
websocket to a fake of Slack's Web API and Socket Mode (tests/support/fake_slack.py):
a DM answered and a mention answered in its thread, an approval answered in place
by a button, a stranger given a pairing code and nothing else, a reminder
delivered to the DM of who set it, a reply streamed by edits through a rate
limit, the setup and doctor (crash safety: test_slack_crash.py)."""

from __future__ import annotations

import asyncio
import importlib
import itertools
import sys
import types
from typing import Any

import pytest

pytest.importorskip("slack_bolt", reason="the slack group is not installed (make install)")

from agents.testing import ScriptedModel, assistant_message, function_call
from test_doctor import doctor

from conftest import PROJECT_ROOT
from support.fake_openai import FakeOpenAIServer, models_section
from support.fake_slack import FakeSlack, Posted
from support.harness import running_kernel, wait_for
from support.rocket_ext import ROCKETS
from support.slack_support import ALICE, BOB, EXTENSION_ID, GENERAL, MALLORY, slack_settings
from support.telegram_support import install_extension, slow_stream


@pytest.fixture
def slack(monkeypatch):
    with FakeSlack() as server:
        monkeypatch.setenv("SLACK_BOT_TOKEN", server.bot_token)
        monkeypatch.setenv("SLACK_APP_TOKEN", server.app_token)
        yield server


def replies(*texts: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(t)] for t in texts])


def question(slack: FakeSlack, user: str) -> Posted | None:
    found = [m for m in slack.dm_messages(user) if m.buttons]
    return found[0] if found else None


async def test_a_dm_and_a_mention_are_answered_where_they_were_written_through_a_rate_limit(
    slack, ext_root, settings_file
):
    install_extension(ext_root, EXTENSION_ID)
    model = replies("Hello Alice!", "Hi channel")
    slack.fail_next("chat.postMessage", 1)  # rate limited: Slack says retry after 1 s
    async with running_kernel(slack_settings(settings_file, slack), model=model) as kernel:
        event_id = slack.dm("hi there", user=ALICE)
        await wait_for(lambda: slack.dm_texts(ALICE) == ["Hello Alice!"], timeout=30)
        refused, sent = slack.calls_of("chat.postMessage")
        assert sent.at - refused.at >= 1.0  # Retry-After honoured, then sent once
        slack.mention("what's up?", user=BOB, channel=GENERAL, thread_ts="1699999999.000100")
        await wait_for(lambda: slack.messages(GENERAL), timeout=30)
        await wait_for(lambda: slack.acked(event_id))
        slack.redeliver(event_id)  # Slack's retry of the same event: journaled once
        await wait_for(lambda: slack.acked(event_id))
        events = await kernel.bus.journal.recent_events(10, topic="user.message")
    in_thread = slack.messages(GENERAL)[0]
    assert (in_thread.text, in_thread.thread_ts) == ("Hi channel", "1699999999.000100")
    assert [e.payload["text"] for e in reversed(events)] == ["hi there", "what's up?"]
    assert [e.payload["user_id"] for e in reversed(events)] == [
        ALICE,
        f"{GENERAL}/1699999999.000100",
    ]
    assert "hi there" in str(model.calls[0].input)
    assert slack.dm_texts(ALICE) == ["Hello Alice!"]  # the redelivery was not answered again
    model.assert_complete()


async def test_a_stranger_gets_a_pairing_code_and_nothing_else_until_paired(
    slack, ext_root, settings_file
):
    install_extension(ext_root, EXTENSION_ID)
    model = replies("welcome, friend")
    async with running_kernel(slack_settings(settings_file, slack), model=model) as kernel:
        slack.dm("let me in", user=MALLORY)
        slack.dm("please", user=MALLORY)
        slack.mention("hey bot", user=MALLORY, channel=GENERAL)
        await wait_for(lambda: slack.dm_texts(MALLORY), timeout=30)
        [offer] = slack.dm_texts(MALLORY)
        assert offer.startswith("Hearth does not know you yet. Ask its owner to send /pair ")
        code = offer.split("/pair ")[1].split()[0]
        await wait_for(lambda: all(slack.acked(e["envelope_id"]) for e in slack.sent()))
        assert await kernel.bus.journal.recent_events(10, topic="user.message") == []
        assert model.calls == () and slack.messages(GENERAL) == []

        slack.dm(f"/pair {code}", user=ALICE)
        await wait_for(lambda: len(slack.dm_texts(MALLORY)) == 2, timeout=30)
        assert slack.dm_texts(MALLORY)[1] == "You are in: Hearth answers you now."
        slack.dm("thanks!", user=MALLORY)
        await wait_for(lambda: "welcome, friend" in slack.dm_texts(MALLORY), timeout=30)
    assert "let me in" not in str(model.calls[0].input)


async def test_an_approval_is_answered_in_place_by_its_button(
    slack, ext_root, settings_file, make_ext
):
    install_extension(ext_root, EXTENSION_ID)
    make_ext("rockets", ROCKETS)
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    settings = slack_settings(settings_file, slack, policy={"profile": "safe"})
    async with running_kernel(settings, model=model) as kernel:
        slack.dm("launch at the moon", user=ALICE)
        asked = await wait_for(lambda: question(slack, ALICE), timeout=30)
        assert asked.text == 'Allow launch(target="moon")?'
        assert [label for label, _, _ in asked.buttons] == ["Allow once", "Always allow", "Deny"]
        slack.press(asked, "Deny", user=BOB)  # not the owner of the question: nothing happens
        await wait_for(lambda: slack.responses, timeout=30)
        assert slack.responses[0]["text"] == "Only the person who asked can answer this."
        assert slack.responses[0]["response_type"] == "ephemeral"
        slack.press(asked, "Allow once", user=ALICE)
        await wait_for(lambda: "Launched at the moon." in slack.dm_texts(ALICE), timeout=30)
        assert kernel.loader.instance("rockets").log() == ["moon"]
        await wait_for(lambda: not asked.buttons)  # answered in place: the buttons are gone
    assert asked.text == 'Allow launch(target="moon")?\nAllowed once: launch(target="moon")'


async def test_in_a_thread_only_the_member_who_asked_answers_the_approval(
    slack, ext_root, settings_file, make_ext
):
    install_extension(ext_root, EXTENSION_ID)
    make_ext("rockets", ROCKETS)
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "mars"}, call_id="c1")],
            [assistant_message("Mars it is.")],
        ]
    )
    thread = "1699999999.000200"
    settings = slack_settings(settings_file, slack, policy={"profile": "safe"})
    async with running_kernel(settings, model=model) as kernel:
        slack.mention("launch at mars", user=ALICE, channel=GENERAL, thread_ts=thread)
        asked = await wait_for(lambda: [m for m in slack.messages(GENERAL) if m.buttons], 30)
        assert asked[0].thread_ts == thread  # asked where the request was made
        slack.press(asked[0], "Allow once", user=BOB)  # another member: refused
        await wait_for(lambda: slack.responses, timeout=30)
        assert kernel.loader.instance("rockets").log() == []
        slack.press(asked[0], "Allow once", user=ALICE)
        await wait_for(lambda: "Mars it is." in [m.text for m in slack.messages(GENERAL)], 30)
    assert kernel.loader.instance("rockets").log() == ["mars"]
    assert slack.responses[0]["text"] == "Only the person who asked can answer this."
    assert all(m.thread_ts == thread for m in slack.messages(GENERAL))


async def test_each_reminder_reaches_the_dm_of_who_set_it(slack, ext_root, settings_file):
    install_extension(ext_root, EXTENSION_ID)
    install_extension(ext_root, "scheduler")
    async with running_kernel(slack_settings(settings_file, slack), model=replies()):
        slack.dm("/remind 2s alice tea", user=ALICE)
        slack.dm("/remind 2s bob stretch", user=BOB)

        def reminded(user: str, what: str) -> bool:
            return any(what in t and "/remind" not in t for t in slack.dm_texts(user)[1:])

        await wait_for(lambda: reminded(ALICE, "alice tea") and reminded(BOB, "bob stretch"), 40)
    assert not any("bob stretch" in t for t in slack.dm_texts(ALICE))
    assert not any("alice tea" in t for t in slack.dm_texts(BOB))


async def test_a_reply_streams_by_edits_and_waits_out_a_rate_limit(slack, ext_root, settings_file):
    install_extension(ext_root, EXTENSION_ID)
    parts = ["The ", "answer ", "grows ", "word ", "by ", "word."]
    slack.fail_next("chat.update", 1)  # Slack says: retry after 1 s
    model = ScriptedModel([slow_stream(parts, 0.15)])
    async with running_kernel(slack_settings(settings_file, slack), model=model):
        slack.dm("tell me", user=ALICE)
        await wait_for(lambda: slack.dm_texts(ALICE) == ["The answer grows word by word."], 30)
    [reply] = slack.dm_messages(ALICE)
    updates = slack.calls_of("chat.update")
    assert reply.edits and len(updates) >= 2  # previewed, then edited to the whole text
    gaps = [b.at - a.at for a, b in itertools.pairwise(updates)]
    assert all(gap >= 0.19 for gap in gaps), gaps  # at most one edit per edit_interval_s
    assert len(slack.calls_of("chat.postMessage")) == 1


# ------------------------------------------------------------ setup and doctor


def _extension_module(name: str) -> Any:
    """A module of the extension, imported as the loader does (a package of its own)."""
    package = "slack_channel_under_test"
    if package not in sys.modules:
        module = types.ModuleType(package)
        module.__path__ = [str(PROJECT_ROOT / "sandbox" / "extensions" / EXTENSION_ID)]
        sys.modules[package] = module
    return importlib.import_module(f"{package}.{name}")


async def test_setup_checks_both_tokens_live_and_offers_whoever_writes_first(slack):
    setup_module = _extension_module("setup")
    setup = setup_module.SlackSetup(
        ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"), (None, None), slack.base_url, []
    )
    assert [f["name"] for f in setup.schema(False)] == ["SLACK_BOT_TOKEN"]
    with pytest.raises(ValueError, match=r"Slack refused the bot token \(auth.test\)"):
        await setup.apply("SLACK_BOT_TOKEN", "xoxb-not-it")
    await setup.apply("SLACK_BOT_TOKEN", slack.bot_token)
    assert [f["name"] for f in setup.schema(False)][-1] == "SLACK_APP_TOKEN"
    with pytest.raises(ValueError, match=r"apps.connections.open"):
        await setup.apply("SLACK_APP_TOKEN", "xapp-not-it")
    await setup.apply("SLACK_APP_TOKEN", slack.app_token)
    discover = setup.schema(False)[-2]
    assert discover["name"] == "discover" and "@hearth" in discover["prompt"]

    listening = asyncio.create_task(setup.apply("discover", "yes"))
    await wait_for(lambda: slack.connections, timeout=30)
    slack.dm("hello?", user=ALICE)
    await asyncio.wait_for(listening, 30)
    assert [f["name"] for f in setup.schema(False)][-2:] == [f"allow_{ALICE}", "allowed_user_ids"]
    await setup.apply(f"allow_{ALICE}", "yes")
    assert setup.schema(False)[-1]["default"] == f'["{ALICE}"]'
    with pytest.raises(ValueError, match="not Slack member ids: 4242"):
        await setup.apply("allowed_user_ids", "[4242]")
    assert await setup.complete(False, None) == (
        True,
        f"the bot @hearth serves {ALICE}; start Hearth to use it",
    )
    assert slack.acked(slack.sent()[-1]["envelope_id"])  # the running channel never sees it


def test_doctor_shows_the_bot_and_whom_it_serves(slack, ext_root, settings_file):
    install_extension(ext_root, EXTENSION_ID)
    with FakeOpenAIServer() as model:
        settings = slack_settings(settings_file, slack, models=models_section(model.base_url))
        checked = doctor(settings)
    assert "ok   extension slack_channel: active" in checked.stdout, checked.stdout
    assert "slack_channel: bot @hearth in Hearth Test; 2 user(s), 1 channel(s)" in checked.stdout
    assert "secret SLACK_APP_TOKEN (slack_channel): set" in checked.stdout


async def test_a_long_reply_is_split_and_markdown_becomes_mrkdwn(slack, ext_root, settings_file):
    install_extension(ext_root, EXTENSION_ID)
    paragraphs = [f"Paragraph {i}:" + " lorem ipsum" * 60 for i in range(12)]
    long = "\n\n".join(paragraphs)
    model = replies(long, "**Tea** is `ready` & <!channel> [here](https://example.org)")
    async with running_kernel(slack_settings(settings_file, slack), model=model):
        slack.dm("tell me a lot", user=ALICE)
        await wait_for(lambda: len(slack.dm_texts(ALICE)) >= 3, timeout=30)
        slack.dm("tea?", user=ALICE)
        await wait_for(lambda: len(slack.dm_texts(ALICE)) == 4, timeout=30)
    *pieces, tea = slack.dm_texts(ALICE)
    assert len(pieces) == 3 and all(len(p) <= 3900 for p in pieces)
    assert all(p.startswith("Paragraph") for p in pieces)  # cut at paragraph breaks
    assert "\n\n".join(pieces) == long
    assert tea == "*Tea* is `ready` &amp; &lt;!channel&gt; <https://example.org|here>"


def test_without_people_the_first_allowed_slack_id_is_the_owner_and_the_rest_members():
    from core.kernel.conversations import Household

    household = Household.of(
        {}, {EXTENSION_ID: {"allowed_user_ids": [ALICE, BOB]}, "telegram_channel": {}}
    )
    assert household.person(EXTENSION_ID, ALICE, ALICE).is_owner
    bob = household.person(EXTENSION_ID, f"{GENERAL}/1699999999.000100", BOB)
    assert (bob.name, bob.role) == (f"slack:{BOB}", "member")  # in a thread: the sender counts
    stranger = household.person(EXTENSION_ID, MALLORY, MALLORY)
    assert (stranger.name, stranger.role) == (f"slack:{MALLORY}", "member")


def test_a_reminder_an_mcp_client_sets_for_a_slack_member_fires_in_their_dm():
    from core.config import PersonSettings
    from core.kernel.conversations import Household
    from core.kernel.mcp_desk import McpDesk

    people = {
        "ada": PersonSettings(role="owner", identities=["cli:local"]),
        "bob": PersonSettings(role="member", identities=[f"slack:{BOB}"]),
    }
    desk = McpDesk(None, Household(people, []), list, list, people)  # type: ignore[arg-type]
    assert desk.home("claude", "bob", owner=False) == (EXTENSION_ID, BOB)


async def test_a_refused_app_token_makes_the_channel_unhealthy_and_says_which(
    slack, ext_root, settings_file, monkeypatch, caplog
):
    install_extension(ext_root, EXTENSION_ID)
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-revoked")
    async with running_kernel(slack_settings(settings_file, slack), model=replies()) as kernel:
        await wait_for(lambda: slack.calls_of("apps.connections.open"), timeout=30)
        channel = kernel.loader.instance(EXTENSION_ID)
        await wait_for(lambda: not channel.health_check(), timeout=30)
        lines = await channel.status_lines()
    assert "Slack rejected SLACK_APP_TOKEN (apps.connections.open: invalid_auth)" in lines[-1]
    assert slack.connections == 0


async def test_a_question_without_options_is_answered_by_the_next_dm(
    slack, ext_root, settings_file, make_ext
):
    from test_ui_requests import ASKER

    from support.harness import CONVERSING

    install_extension(ext_root, EXTENSION_ID)
    make_ext("asker", ASKER, CONVERSING)
    model = ScriptedModel(
        [
            [function_call("ask_things", {"kind": "input"}, call_id="c1")],
            [assistant_message("Paris, noted.")],
        ]
    )
    async with running_kernel(slack_settings(settings_file, slack), model=model) as kernel:
        slack.dm("plan my trip", user=ALICE)
        await wait_for(lambda: slack.dm_texts(ALICE), timeout=30)
        assert slack.dm_texts(ALICE) == ["asker asks: Which city?\n(Reply with your answer.)"]
        slack.dm("Paris", user=ALICE)
        await wait_for(lambda: "Paris, noted." in slack.dm_texts(ALICE), timeout=30)
        events = await kernel.bus.journal.recent_events(10, topic="user.message")
    assert [e.payload["text"] for e in events] == ["plan my trip"]  # an answer, not a message
    assert "answer: Paris" in str(model.calls[1].input)
