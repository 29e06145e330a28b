"""The e-mail channel against real mail servers: Dovecot for IMAP (IDLE), started
per test on a free port with its own configuration, and aiosmtpd for SMTP. A
person writes to the bot by putting a mail in its inbox (IMAP APPEND, as a
delivery would) and reads what the bot sent from the SMTP server. A message
answered in its thread, a reply in the thread continuing the conversation
and a new subject starting one, HTML mail read as text, a stranger given a
pairing code and nothing else, an approval answered in place by a reply
mail, a reminder delivered to the right person; the model is scripted."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.email_support import (
    Dovecot,
    SmtpSink,
    body,
    html_only,
    install_extension,
    mail,
    servers_missing,
    until,
    write_settings,
)
from support.harness import conversing, running_kernel
from support.rocket_ext import ROCKETS

pytestmark = pytest.mark.skipif(servers_missing() is not None, reason=str(servers_missing()))

ALICE = "alice@family.test"
BOB = "bob@family.test"
MALLORY = "mallory@elsewhere.test"


@pytest.fixture
def dovecot():
    server = Dovecot().start()
    yield server
    server.stop()


@pytest.fixture
def smtp():
    sink = SmtpSink().start()
    yield sink
    sink.stop()


@pytest.fixture
def channel(monkeypatch, ext_root):
    monkeypatch.setenv("EMAIL_PASSWORD", "s3cret-pass")
    install_extension(ext_root)


def reply_model(*texts: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(t)] for t in texts])


async def test_a_message_is_answered_in_its_thread(dovecot, smtp, channel, settings_file):
    model = reply_model("Hello Alice!")
    async with running_kernel(write_settings(settings_file, dovecot, smtp, [ALICE]), model=model):
        sent = mail(ALICE, "hi there", subject="Dinner")
        dovecot.deliver(sent)
        (answer,) = await until(lambda: smtp.to(ALICE))
    assert body(answer) == "Hello Alice!"
    assert answer["Subject"] == "Re: Dinner"
    assert answer["In-Reply-To"] == sent["Message-ID"]
    assert answer["References"] == sent["Message-ID"]
    assert answer["From"] == "hearth@home.test"
    assert "hi there" in str(model.calls[0].input)
    assert smtp.logins  # the server offered AUTH: the bot logged in
    model.assert_complete()


async def test_a_reply_in_the_thread_continues_it_and_a_new_subject_starts_another(
    dovecot, smtp, channel, settings_file
):
    model = reply_model("Noted, Ada.", "You are Ada.", "Who are you?")
    settings = write_settings(settings_file, dovecot, smtp, [ALICE])
    async with running_kernel(settings, model=model) as kernel:
        first = mail(ALICE, "my name is Ada", subject="About me")
        dovecot.deliver(first)
        (noted,) = await until(lambda: smtp.to(ALICE))
        second = mail(ALICE, "what is my name?", reply_to=noted)
        dovecot.deliver(second)
        answered = await until(lambda: smtp.to(ALICE)[1:])
        dovecot.deliver(mail(ALICE, "what is my name?", subject="Something else"))
        await until(lambda: smtp.to(ALICE)[2:])
        events = await kernel.bus.journal.recent_events(10, topic="user.message")
    assert "my name is Ada" in str(model.calls[1].input)  # the thread's history
    assert "my name is Ada" not in str(model.calls[2].input)  # a new conversation
    assert answered[0]["Subject"] == "Re: About me"
    assert answered[0]["In-Reply-To"] == second["Message-ID"]
    refs = answered[0]["References"].split()
    assert refs == [first["Message-ID"], noted["Message-ID"], second["Message-ID"]]
    threads = {e.payload["user_id"] for e in events}
    assert len(threads) == 2 and all(t.startswith(f"{ALICE}#") for t in threads)
    assert [e.payload["sender_id"] for e in events] == [ALICE] * 3
    assert "On Sunday" not in str(model.calls[1].input)  # the quote is cut off


async def test_html_mail_is_read_as_text(dovecot, smtp, channel, settings_file):
    model = reply_model("Got it.")
    html = (
        "<html><head><style>p {color: red}</style></head><body>"
        "<p>Shopping <b>list</b>:</p><ul><li>eggs &amp; milk</li><li>bread</li></ul>"
        '<p>See <a href="https://example.org/recipe">the recipe</a></p>'
        "<script>alert(1)</script></body></html>"
    )
    async with running_kernel(write_settings(settings_file, dovecot, smtp, [ALICE]), model=model):
        dovecot.deliver(html_only(ALICE, html))
        await until(lambda: smtp.to(ALICE))
    said = [i for i in model.calls[0].input if isinstance(i, dict) and i.get("role") == "user"]
    text = str(said[-1]["content"])
    assert "Shopping list:\n\n- eggs & milk\n- bread\n\nSee the recipe" in text, text
    assert "the recipe (https://example.org/recipe)" in text
    assert "<" not in text.replace("<context", "") and "alert" not in text and "color" not in text


async def test_a_stranger_gets_a_pairing_code_and_nothing_else(
    dovecot, smtp, channel, settings_file
):
    model = reply_model("for alice")
    settings = write_settings(settings_file, dovecot, smtp, [ALICE])
    async with running_kernel(settings, model=model) as kernel:
        asked = mail(MALLORY, "let me in", subject="Hi Hearth")
        dovecot.deliver(asked)
        dovecot.deliver(mail(MALLORY, "please"))
        bounce = {"Auto-Submitted": "auto-replied"}
        dovecot.deliver(mail("robot@elsewhere.test", "I am away", headers=bounce))
        dovecot.deliver(mail(ALICE, "hello"))
        (own,) = await until(lambda: smtp.to(ALICE))
        (told,) = await until(lambda: smtp.to(MALLORY))
        events = await kernel.bus.journal.recent_events(50, topic="user.message")
        assert [e.payload["text"] for e in events] == ["hello"]
        assert body(told).startswith("Hearth does not know you yet.")
        assert told["Auto-Submitted"] == "auto-replied"
        assert told["In-Reply-To"] == asked["Message-ID"]
        code = body(told).split("/pair ")[1].split()[0]
        dovecot.deliver(mail(ALICE, f"/pair {code}", subject="pairing"))
        welcomed = await until(lambda: smtp.to(MALLORY)[1:])
        assert body(welcomed[0]) == "You are in: Hearth answers you now."
        assert welcomed[0]["Subject"] == "Re: Hi Hearth"
    assert smtp.to("robot@elsewhere.test") == []
    assert len(model.calls) == 1 and "let me in" not in str(model.calls[0].input)
    assert body(own) == "for alice"


async def test_an_approval_is_answered_in_place_by_a_reply_mail(
    dovecot, smtp, channel, settings_file, make_ext
):
    make_ext("rockets", ROCKETS)
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    settings = write_settings(
        settings_file, dovecot, smtp, [ALICE], sections={"policy": {"profile": "safe"}}
    )
    async with running_kernel(settings, model=model) as kernel:
        asked = mail(ALICE, "launch at the moon", subject="Rockets")
        dovecot.deliver(asked)
        (question,) = await until(lambda: smtp.to(ALICE))
        assert body(question).splitlines() == [
            'Allow launch(target="moon")?',
            "",
            "1. Allow once",
            "2. Always allow",
            "3. Deny",
            "",
            "(Reply to this mail with the number, the words, or yes / no.)",
        ]
        assert question["Subject"] == "Re: Rockets"
        assert question["In-Reply-To"] == asked["Message-ID"]
        assert kernel.loader.instance("rockets").log() == []
        dovecot.deliver(mail(ALICE, "Yes", reply_to=question))
        answered = await until(lambda: smtp.to(ALICE)[1:])
        assert kernel.loader.instance("rockets").log() == ["moon"]
    assert [body(m) for m in answered] == ["Launched at the moon."]
    assert answered[0]["Subject"] == "Re: Rockets"


async def test_a_reminder_reaches_the_person_who_set_it(
    dovecot, smtp, channel, settings_file, ext_root
):
    install_extension(ext_root, "scheduler")
    model = reply_model()
    settings = write_settings(settings_file, dovecot, smtp, [ALICE, BOB])
    async with running_kernel(settings, model=model):
        asked = mail(BOB, "/remind 2s stretch your legs", subject="later")
        dovecot.deliver(asked)
        mails = await until(lambda: smtp.to(BOB)[1:] and smtp.to(BOB), timeout=30)
    confirmation, reminder = (body(m) for m in mails)
    assert confirmation.startswith("Reminder #1 set for ")
    assert reminder == "⏰ Reminder: stretch your legs"
    assert all(m["Subject"] == "Re: later" for m in mails)
    assert mails[1]["References"].split()[0] == asked["Message-ID"]  # in Bob's thread
    assert smtp.to(ALICE) == []
    assert model.calls == ()


async def test_a_message_for_a_member_by_address_starts_a_thread_with_them(
    dovecot, smtp, channel, settings_file
):
    """What a reminder set over MCP for a member named ``email:bob@...`` in
    ``people:`` does: the kernel addresses Bob by his address (``McpDesk.home``),
    and the channel writes him a new mail; his reply continues that thread."""
    from core.config import PersonSettings
    from core.kernel.conversations import Household
    from core.kernel.mcp_desk import McpDesk

    people = {
        "ada": PersonSettings(role="owner", identities=["cli:local"]),
        "bob": PersonSettings(role="member", identities=[f"email:{BOB}"]),
    }
    desk = McpDesk(None, Household(people, []), list, list, people)  # type: ignore[arg-type]
    assert desk.home("claude", "bob", owner=False) == ("email_channel", BOB)
    model = reply_model("Well done.")
    # polled, not IDLE: the fallback for servers without it
    settings = write_settings(
        settings_file, dovecot, smtp, [ALICE, BOB], idle=False, poll_interval_s=1
    )
    async with running_kernel(settings, model=model) as kernel:
        channel = kernel.loader.instance("email_channel")
        await channel.send_to_user(BOB, "⏰ Reminder: water the plants")
        with pytest.raises(ValueError, match="not an address this channel serves"):
            await channel.send_to_user(MALLORY, "not for strangers")
        (reminder,) = smtp.to(BOB)
        assert reminder["Subject"] == "⏰ Reminder: water the plants"
        assert reminder["In-Reply-To"] is None
        dovecot.deliver(mail(BOB, "done!", reply_to=reminder))
        (_, answer) = await until(lambda: smtp.to(BOB)[1:] and smtp.to(BOB), timeout=30)
        events = await kernel.bus.journal.recent_events(10, topic="user.message")
    assert answer["Subject"] == "Re: ⏰ Reminder: water the plants"
    assert answer["References"].split()[0] == reminder["Message-ID"]
    assert events[0].payload["user_id"].startswith(f"{BOB}#")
    assert smtp.to(ALICE) == [] and smtp.to(MALLORY) == []


async def test_the_inbox_reconnects_when_the_server_drops_it(dovecot, smtp, channel, settings_file):
    model = reply_model("First.", "Second.")
    async with running_kernel(write_settings(settings_file, dovecot, smtp, [ALICE]), model=model):
        dovecot.deliver(mail(ALICE, "one"))
        await until(lambda: smtp.to(ALICE))
        dovecot.kick()  # the IDLE connection is closed by the server
        dovecot.deliver(mail(ALICE, "two", subject="Again"))
        answers = await until(lambda: smtp.to(ALICE)[1:] and smtp.to(ALICE), timeout=30)
    assert [body(m) for m in answers] == ["First.", "Second."]


ASKER = ext_code(
    header="""
    from agents import function_tool
    from core.extensions.sdk import side_effects
    """,
    body="""
    def get_tools(self):
        @function_tool
        async def ask_secret() -> str:
            "Ask the user for their API key."
            answer = await self.ctx.ui_request("secret", "Your API key?", timeout_s=30)
            return f"secret received: {answer == 'k3y-42'}"
        return [side_effects(ask_secret, False)]
    """,
)


async def test_a_secret_is_answered_by_a_reply_and_its_mail_deleted(
    dovecot, smtp, channel, settings_file, make_ext
):
    make_ext("asker", ASKER, conversing())
    model = ScriptedModel(
        [[function_call("ask_secret", {}, call_id="s1")], [assistant_message("Thanks.")]]
    )
    async with running_kernel(write_settings(settings_file, dovecot, smtp, [ALICE]), model=model):
        dovecot.deliver(mail(ALICE, "set my key", subject="Key"))
        (question,) = await until(lambda: smtp.to(ALICE))
        assert body(question).splitlines()[0] == "asker asks: Your API key?"
        dovecot.deliver(mail(ALICE, "k3y-42", reply_to=question))
        answered = await until(lambda: smtp.to(ALICE)[1:])
        # the mail holding the secret is gone: deleted once read, which may come after
        # the answer it carried has reached the turn and its reply went out
        await until(lambda: dovecot.inbox_count() == 1)
    assert body(answered[0]) == "Thanks."
    outputs = [i for i in model.calls[-1].input if isinstance(i, dict) and "output" in i]
    assert outputs[-1]["output"] == "secret received: True"
