"""Files people send on Telegram (issue 45, ADR 0096), through the fake Bot API:
a photo reaches the model as an image part, a PDF as its text, a voice note as
its transcript; one over the limit is refused with the limit named."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
from agents.testing import ScriptedModel, assistant_message

from support.fake_openai import FakeOpenAIServer, models_section
from support.fake_telegram import FakeTelegram
from support.files_kit import pdf, png
from support.harness import running_kernel, wait_for
from support.telegram_support import ALICE, install_extension, write_settings


@pytest.fixture
def tg(monkeypatch) -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", server.token)
        yield server


@pytest.fixture(autouse=True)
def _extension(ext_root):
    install_extension(ext_root)


def reading(*texts: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(t)] for t in texts])


def user_content(model: ScriptedModel) -> list:
    """The content of the last user message of the model's first call."""
    users = [i for i in model.calls[0].input if isinstance(i, dict) and i.get("role") == "user"]
    return users[-1]["content"]


async def test_a_photo_reaches_the_model_as_an_image_part(tg, settings_file):
    model = reading("a red square")
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_file_update("photo", png(), user_id=ALICE, caption="what is this?")
        await wait_for(lambda: tg.chat_texts(ALICE) == ["a red square"])
    content = user_content(model)
    assert content[0]["type"] == "input_text" and content[0]["text"].startswith("what is this?")
    image = content[1]
    assert image["type"] == "input_image"
    assert image["image_url"] == "data:image/jpeg;base64," + base64.b64encode(png()).decode()


async def test_a_photo_in_a_group_is_kept_for_its_sender_and_reaches_the_model(tg, settings_file):
    """In a group the conversation's address is the chat, the file's person the sender."""
    group = -100123
    model = reading("a red square, in the group")
    settings = write_settings(settings_file, tg, allowed_group_chat_ids=[group])
    async with running_kernel(settings, model=model):
        tg.send_file_update("photo", png(), user_id=ALICE, caption="look", chat_id=group)
        await wait_for(lambda: tg.chat_texts(group) == ["a red square, in the group"])
    assert [part["type"] for part in user_content(model)] == ["input_text", "input_image"]


async def test_a_model_that_cannot_see_gets_a_one_line_note(tg, settings_file):
    model = reading("noted")
    settings = write_settings(settings_file, tg, sections={"files": {"vision": False}})
    async with running_kernel(settings, model=model):
        tg.send_file_update("photo", png(), user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["noted"])
    content = user_content(model)
    assert isinstance(content, str) and "cannot see images: files.vision is false" in content


async def test_a_pdfs_text_reaches_the_model(tg, settings_file):
    model = reading("read it")
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_file_update(
            "document",
            pdf("The meeting moved to Friday"),
            user_id=ALICE,
            file_name="minutes.pdf",
            mime_type="application/pdf",
        )
        await wait_for(lambda: tg.chat_texts(ALICE) == ["read it"])
    content = user_content(model)
    assert "[The user sent minutes.pdf:]" in content
    assert "The meeting moved to Friday" in content


async def test_a_long_document_is_cut_at_the_token_budget(tg, settings_file):
    model = reading("skimmed")
    settings = write_settings(settings_file, tg, sections={"files": {"text_budget_tokens": 100}})
    async with running_kernel(settings, model=model):
        tg.send_file_update(
            "document", b"word " * 1000, user_id=ALICE, file_name="long.txt", mime_type="text/plain"
        )
        await wait_for(lambda: tg.chat_texts(ALICE) == ["skimmed"])
    content = user_content(model)
    assert "(cut at 100 tokens)" in content and content.count("word") == 80


async def test_an_oversized_upload_is_refused_with_the_limit_named(tg, settings_file):
    model = reading()
    settings = write_settings(settings_file, tg, sections={"files": {"max_bytes": 1000}})
    async with running_kernel(settings, model=model):
        tg.send_file_update(
            "document", b"x" * 5000, user_id=ALICE, file_name="big.csv", mime_type="text/csv"
        )
        await wait_for(lambda: tg.chat_texts(ALICE))
    [refusal] = tg.chat_texts(ALICE)
    assert refusal == (
        "I could not take big.csv is 5 KB; files larger than 1 KB are not accepted "
        "(files.max_bytes)"
    )
    assert not model.calls  # never reached the model


async def test_a_voice_note_is_transcribed_by_the_providers_endpoint(tg, settings_file):
    with FakeOpenAIServer() as llm:
        llm.transcript = "remind me to call mum"
        settings = write_settings(
            settings_file, tg, sections={"models": models_section(llm.base_url)}
        )
        async with running_kernel(settings):
            tg.send_file_update("voice", b"OggS-voice", user_id=ALICE, mime_type="audio/ogg")
            await wait_for(lambda: tg.chat_texts(ALICE))
        [upload] = llm.transcriptions
        asked = json.dumps(llm.requests[-1]["messages"])
    assert upload["model"] == "whisper-1" and upload["file"] == b"OggS-voice"
    assert "[Voice note, transcribed:] remind me to call mum" in asked
