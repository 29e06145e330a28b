"""Files by e-mail (issues 45 and 48, ADR 0096) against real mail servers
(Dovecot, aiosmtpd): a tool's PNG is attached to the reply mail — one mail, the
text and the file — a picture attached to a mail reaches the model as an image
part, one over ``files.max_bytes`` is refused naming the limit."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message

from support.email_support import (
    Dovecot,
    SmtpSink,
    body,
    install_extension,
    mail,
    servers_missing,
    until,
    write_settings,
)
from support.files_kit import chart_code, chart_model, data_url, png, sent_picture
from support.harness import running_kernel

pytestmark = pytest.mark.skipif(servers_missing() is not None, reason=str(servers_missing()))

ALICE = "alice@family.test"


@pytest.fixture
def servers(monkeypatch, ext_root):
    monkeypatch.setenv("EMAIL_PASSWORD", "s3cret-pass")
    install_extension(ext_root)
    dovecot, smtp = Dovecot().start(), SmtpSink().start()
    yield dovecot, smtp
    smtp.stop()
    dovecot.stop()


async def test_a_tools_png_is_attached_to_the_reply_mail(servers, make_ext, settings_file):
    dovecot, smtp = servers
    make_ext("charts", chart_code())
    async with running_kernel(
        write_settings(settings_file, dovecot, smtp, [ALICE]), model=chart_model()
    ):
        dovecot.deliver(mail(ALICE, "draw the chart", subject="Sales"))
        (reply,) = await until(lambda: smtp.to(ALICE))
    assert reply["Subject"] == "Re: Sales"
    text = reply.get_body(preferencelist=("plain",))
    assert text is not None and body(text).splitlines() == [
        "here it is",
        "",
        "[attached] chart.png — the chart",
    ]
    [chart] = list(reply.iter_attachments())
    assert chart.get_filename() == "chart.png" and chart.get_content_type() == "image/png"
    assert chart.get_payload(decode=True) == png()


async def test_an_attached_picture_reaches_the_model_as_an_image_part(servers, settings_file):
    dovecot, smtp = servers
    model = ScriptedModel([[assistant_message("a red square")]])
    async with running_kernel(write_settings(settings_file, dovecot, smtp, [ALICE]), model=model):
        sent = mail(ALICE, "what is this?", subject="A picture")
        sent.add_attachment(png(), maintype="image", subtype="png", filename="square.png")
        dovecot.deliver(sent)
        (reply,) = await until(lambda: smtp.to(ALICE))
    assert body(reply) == "a red square"
    text, image = sent_picture(model)
    assert text.startswith("what is this?")
    assert image["image_url"] == data_url(png(), "image/png")


async def test_an_oversized_attachment_is_refused_naming_the_limit(servers, settings_file):
    dovecot, smtp = servers
    model = ScriptedModel([])
    settings = write_settings(
        settings_file, dovecot, smtp, [ALICE], sections={"files": {"max_bytes": 1000}}
    )
    async with running_kernel(settings, model=model):
        sent = mail(ALICE, "", subject="")
        sent.add_attachment(b"x" * 5000, maintype="text", subtype="csv", filename="big.csv")
        dovecot.deliver(sent)
        (refusal,) = await until(lambda: smtp.to(ALICE))
    assert body(refusal) == (
        "I could not take big.csv is 5 KB; files larger than 1 KB are not accepted "
        "(files.max_bytes)"
    )
    assert not model.calls
