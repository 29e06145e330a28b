"""The e-mail channel's parts without servers: a mail read (HTML as text, quotes
cut off, machines and forged senders told apart), threads kept as conversations
(a reply continues its thread, across a restart; another person's reply does
not), answers to a question (a number, a label, yes / no), the settings, and
the identity ``email:ADDRESS`` in the household."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from core.config import PersonSettings
from core.kernel.conversations import Household
from core.kernel.conversations.people import email_ids, identity_of
from sandbox.extensions.email_channel.config import ConfigError, parse_config
from sandbox.extensions.email_channel.questions import _APPROVAL, _CONFIRM, value_of
from sandbox.extensions.email_channel.reading import html_to_text, new_text, read_mail
from sandbox.extensions.email_channel.threads import MAX_REFERENCES, Threads, split_address


def _raw(text: str = "hello", **headers: str) -> bytes:
    message = EmailMessage()
    message["From"] = headers.pop("From", "Alice Example <Alice@Family.test>")
    message["Subject"] = headers.pop("Subject", "Hi")
    message["Message-ID"] = headers.pop("Message_ID", "<m1@family.test>")
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(text)
    return message.as_bytes()


def test_a_mail_is_read_as_who_which_thread_and_the_new_text():
    mail = read_mail(
        _raw(
            "Sounds good.\n\nOn Sat, 28 Nov 2026, Hearth wrote:\n> What time?\n> Noon?\n",
            In_Reply_To="<b2@home.test>",
            References="<m0@family.test> <b2@home.test>",
        ),
        uid=7,
    )
    assert mail.sender == "alice@family.test"
    assert mail.message_id == "<m1@family.test>"
    assert mail.parents == ("<b2@home.test>", "<m0@family.test>")
    assert mail.text == "Sounds good."
    assert not mail.automatic and not mail.forged


def test_quotes_signatures_and_forwarded_blocks_are_cut_off():
    assert new_text("> old\nnew line\n-- \nAlice\nphone") == "new line"
    assert new_text("top\n-----Original Message-----\nFrom: x") == "top"
    assert new_text("> only a quote") == "> only a quote"  # nothing new: kept as it is


@pytest.mark.parametrize(
    "headers",
    [
        {"Auto_Submitted": "auto-replied"},
        {"Precedence": "bulk"},
        {"List_Id": "<family.lists.test>"},
        {"From": "MAILER-DAEMON@family.test"},
    ],
)
def test_mail_sent_by_machines_is_automatic(headers):
    assert read_mail(_raw(**headers), uid=1).automatic


def test_a_failed_dmarc_check_marks_the_mail_forged():
    results = "mx.home.test; spf=fail smtp.mailfrom=evil.test; dmarc=fail header.from=family.test"
    assert read_mail(_raw(Authentication_Results=results), uid=1).forged


def test_html_becomes_readable_text():
    html = (
        "<div>Hi <i>there</i>,<br>two&nbsp;lines</div><table><tr><td>a</td><td>b</td></tr>"
        "</table><pre>  kept\n  as is</pre><a href='https://x.test/a'>https://x.test/a</a>"
    )
    # a link whose text is its address is not written twice; lines are trimmed
    assert html_to_text(html) == "Hi there,\ntwo lines\n\na b\n\nkept\nas is\n\nhttps://x.test/a"


def test_a_reply_continues_its_thread_across_a_restart(tmp_path):
    threads = Threads(tmp_path)
    first = threads.place("alice@family.test", "Dinner", "<m1@f>", ())
    threads.record(first, "<b1@h>")  # the bot's answer
    threads.save()
    again = Threads(tmp_path)
    again.load()
    reply = again.place("alice@family.test", "Re: Dinner", "<m2@f>", ("<b1@h>", "<m1@f>"))
    assert reply.key == first.key and reply.address == f"alice@family.test#{first.key}"
    assert reply.references() == ["<m1@f>", "<b1@h>", "<m2@f>"]
    assert reply.next_subject() == "Re: Dinner"
    other = again.place("bob@family.test", "Re: Dinner", "<m3@f>", ("<b1@h>",))
    assert other.key != first.key  # another person's reply is their own conversation
    new = again.place("alice@family.test", "Breakfast", "<m4@f>", ())
    assert new.key != first.key
    assert split_address(reply.address) == ("alice@family.test", first.key)
    assert split_address("Bob@Family.test") == ("bob@family.test", None)


def test_references_keep_the_root_and_the_latest(tmp_path):
    threads = Threads(tmp_path)
    thread = threads.place("a@f.test", "x", "<0@f>", ())
    for n in range(1, 40):
        threads.record(thread, f"<{n}@f>")
    refs = thread.references()
    assert len(refs) == MAX_REFERENCES and refs[0] == "<0@f>" and refs[-1] == "<39@f>"


@pytest.mark.parametrize(
    ("options", "text", "value"),
    [
        (_APPROVAL, "1", "once"),
        (_APPROVAL, "Always allow", "always"),
        (_APPROVAL, "yes.", "once"),
        (_APPROVAL, "No", "deny"),
        (_CONFIRM, "y", "yes"),
        (_CONFIRM, "no", "no"),
        (_APPROVAL, "maybe later", None),
        (_APPROVAL, "4", None),
    ],
)
def test_an_answer_names_an_option(options, text, value):
    assert value_of(options, text) == value


def test_settings_are_read_and_a_bad_value_is_named():
    config = parse_config(
        {"address": "Hearth@Home.test", "allowed_senders": "a@f.test, B@f.test"}.get
    )
    assert config.address == "hearth@home.test"
    assert config.allowed_senders == ("a@f.test", "b@f.test")
    assert (config.imap_port, config.smtp_port) == (993, 587)
    assert not config.complete
    with pytest.raises(ConfigError, match="allowed_senders: 'alice' is not an e-mail address"):
        parse_config({"allowed_senders": ["alice"]}.get)
    with pytest.raises(ConfigError, match="imap_security: 'starttls' is not one of ssl, none"):
        parse_config({"imap_security": "starttls"}.get)


def test_the_first_allowed_sender_is_the_owner_without_people():
    household = Household.of(
        {}, {"email_channel": {"allowed_senders": ["Alice@Family.test", "bob@family.test"]}}
    )
    assert household.person("email_channel", "alice@family.test#t1", "alice@family.test").is_owner
    bob = household.person("email_channel", "bob@family.test#t2", "bob@family.test")
    assert bob.role == "member" and bob.name == "email:bob@family.test"
    assert identity_of("email_channel", "carol@family.test#t3") == "email:carol@family.test"
    assert email_ids('["A@x.test", "b@y.test"]') == ["a@x.test", "b@y.test"]
    named = Household(
        {"ada": PersonSettings(role="owner", identities=["email:Ada@Family.test"])}, []
    )
    assert named.person("email_channel", "ada@family.test#t9", "ada@family.test").name == "ada"
