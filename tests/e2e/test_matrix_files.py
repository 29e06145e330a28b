"""Files on Matrix (issues 45 and 48, ADR 0096) against a real homeserver
(Synapse on SQLite): a tool's PNG is uploaded to the media repository and
posted as an ``m.image``, a picture a person posts reaches the model as an
image part, one over ``files.max_bytes`` is refused naming the limit."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message

from support.files_kit import chart_code, chart_model, data_url, png, sent_picture
from support.harness import running_kernel
from support.matrix_support import (
    MatrixUser,
    Synapse,
    install_extension,
    synapse_missing,
    until,
    write_settings,
)

pytestmark = pytest.mark.skipif(synapse_missing() is not None, reason=str(synapse_missing()))


@pytest.fixture(scope="module")
def synapse(tmp_path_factory):
    server = Synapse(tmp_path_factory.mktemp("synapse")).start()
    yield server
    server.stop()


@pytest.fixture
async def alice(synapse):
    user = MatrixUser(synapse, "alice")
    yield user
    await user.close()


@pytest.fixture
def bot(synapse, monkeypatch, ext_root):
    bot_id, token = synapse.register("hearth")
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", token)
    install_extension(ext_root)
    return bot_id


async def test_a_tools_png_is_posted_as_an_image(synapse, alice, bot, make_ext, settings_file):
    make_ext("charts", chart_code())
    settings = write_settings(settings_file, synapse.url, [alice.user_id])
    async with running_kernel(settings, model=chart_model()):
        room = await alice.open_direct(bot)
        await alice.send(room, "draw the chart")

        async def both() -> bool:
            return len(await alice.bot_writes(room, bot)) == 2

        await until(both)
    writes = [content for _, content in await alice.bot_writes(room, bot)]
    [image] = [c for c in writes if c.get("msgtype") == "m.image"]
    assert (image["body"], image["filename"]) == ("the chart", "chart.png")
    assert image["info"] == {"mimetype": "image/png", "size": len(png())}
    assert await alice.fetch(image["url"]) == png()
    assert [c["body"] for c in writes if c.get("msgtype") == "m.text"] == ["here it is"]


async def test_a_posted_picture_reaches_the_model_as_an_image_part(
    synapse, alice, bot, settings_file
):
    model = ScriptedModel([[assistant_message("a red square")]])
    settings = write_settings(settings_file, synapse.url, [alice.user_id])
    async with running_kernel(settings, model=model):
        room = await alice.open_direct(bot)
        await alice.send_file(room, png(), "square.png", "image/png", caption="what is this?")

        async def answered() -> bool:
            return await alice.bot_texts(room, bot) == ["a red square"]

        await until(answered)
    text, image = sent_picture(model)
    assert text.startswith("what is this?")
    assert image["image_url"] == data_url(png(), "image/png")


async def test_an_oversized_upload_is_refused_naming_the_limit(synapse, alice, bot, settings_file):
    model = ScriptedModel([])
    settings = write_settings(
        settings_file, synapse.url, [alice.user_id], sections={"files": {"max_bytes": 1000}}
    )
    async with running_kernel(settings, model=model):
        room = await alice.open_direct(bot)
        await alice.send_file(room, b"x" * 5000, "big.csv", "text/csv")

        async def refused() -> list[str]:
            return await alice.bot_texts(room, bot)

        texts = await until(refused)
    assert texts == [
        "I could not take big.csv is 5 KB; files larger than 1 KB are not accepted "
        "(files.max_bytes)"
    ]
    assert not model.calls
