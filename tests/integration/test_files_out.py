"""Files a tool returns (issue 45, ADR 0096): kept for the person, sent after the reply."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from core.config import FilesSettings
from core.extensions.contract import Artifact, attach
from core.kernel.files import FileStore, FileTooLarge
from support.bundled import tool_output
from support.files_kit import chart_code, chart_model, png, read
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.wasm_guests import guest, tool_spec, write_wasm_extension

FILE_CHANNEL = (
    CAPTURE_CHANNEL
    + """
    async def send_file(self, user_id, file):
        self._log().append(("file", user_id, file))
"""
)


async def test_a_tools_png_reaches_a_file_channel_with_the_reply(make_ext, settings_file):
    make_ext("capture", FILE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("charts", chart_code())
    settings = settings_file(channels={"default": "capture"})
    async with running_kernel(settings, model=chart_model()) as k:
        channel = k.loader.instance("capture")
        await channel.say("draw the chart")
        await wait_for(lambda: len(channel._log()) == 2)
        sent, reply = channel._log()  # before the reply ends: the HTTP API answers with it
        data_dir = k.settings.data_dir
    assert reply == ("reply", "u1", "here it is")
    kind, user, file = sent
    assert (kind, user, file.name, file.mime_type, file.caption) == (
        "file",
        "u1",
        "chart.png",
        "image/png",
        "the chart",
    )
    assert file.is_image and read(file.path) == png()
    assert Path(file.path).is_relative_to(data_dir / "files" / "_owner")


async def test_an_isolated_tools_png_crosses_the_process_boundary(make_ext, settings_file):
    make_ext("capture", FILE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("charts", chart_code(), {"isolation": "process"})
    settings = settings_file(channels={"default": "capture"})
    async with running_kernel(settings, model=chart_model()) as k:
        channel = k.loader.instance("capture")
        await channel.say("draw the chart")
        await wait_for(lambda: len(channel._log()) == 2, timeout=30)
        sent, reply = channel._log()
    assert reply == ("reply", "u1", "here it is")
    assert sent[2].name == "chart.png" and read(sent[2].path) == png()


CHARTS = {"capabilities": ["ToolProvider"], "tools": [tool_spec("chart")]}


def wasm_chart(name: str = "chart.png", data: str | None = None) -> str:
    """A wasm guest whose ``chart`` tool answers with a file (host ABI 1)."""
    attached = {
        "name": name,
        "mime_type": "image/png",
        "caption": "the chart",
        "data": base64.b64encode(png()).decode() if data is None else data,
    }
    return guest(CHARTS, tool={"__hearth_artifacts__": [attached], "result": "chart drawn"})


async def test_a_wasm_tools_png_crosses_the_host_abi(make_ext, settings_file, ext_root):
    make_ext("capture", FILE_CHANNEL, CAPTURE_MANIFEST)
    write_wasm_extension(ext_root, "charts", wasm_chart())
    settings = settings_file(channels={"default": "capture"})
    model = chart_model()
    async with running_kernel(settings, model=model) as k:
        assert type(k.loader.instance("charts")).__name__.startswith("Wasm")
        channel = k.loader.instance("capture")
        await channel.say("draw the chart")
        await wait_for(lambda: len(channel._log()) == 2)
        sent, reply = channel._log()
    assert reply == ("reply", "u1", "here it is")
    assert (sent[2].name, sent[2].caption) == ("chart.png", "the chart")
    assert read(sent[2].path) == png()
    assert tool_output(model, "c1") == "chart drawn"  # the model gets the result alone


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("../chart.png", None, "a plain file name is needed"),
        ("chart.png", "not base64!", "data is not valid base64"),
    ],
)
async def test_a_wasm_tools_malformed_file_fails_its_call_naming_why(
    make_ext, settings_file, ext_root, name, data, said
):
    make_ext("capture", FILE_CHANNEL, CAPTURE_MANIFEST)
    write_wasm_extension(ext_root, "charts", wasm_chart(name, data))
    settings = settings_file(channels={"default": "capture"})
    model = chart_model()
    async with running_kernel(settings, model=model) as k:
        channel = k.loader.instance("capture")
        await channel.say("draw the chart")
        await wait_for(lambda: channel._log())
        log = channel._log()
    assert log == [("reply", "u1", "here it is")]  # no file; the turn answered
    output = tool_output(model, "c1")
    assert output.startswith("error: tool chart failed: its files: __hearth_artifacts__[0]")
    assert said in output


async def test_a_channel_without_files_gets_the_kept_path(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("charts", chart_code())
    settings = settings_file(channels={"default": "capture"})
    async with running_kernel(settings, model=chart_model()) as k:
        channel = k.loader.instance("capture")
        await channel.say("draw the chart")
        await wait_for(lambda: len(channel._log()) == 2)
        line = channel._log()[1][2]
    assert line.startswith("[file] chart.png — the chart: ") and line.endswith("chart.png")
    assert read(line.rsplit(": ", 1)[1]) == png()


async def test_an_oversized_artifact_is_refused_in_the_reply_naming_the_limit(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("charts", chart_code())
    settings = settings_file(channels={"default": "capture"}, files={"max_bytes": 10})
    async with running_kernel(settings, model=chart_model()) as k:
        channel = k.loader.instance("capture")
        await channel.say("draw the chart")
        await wait_for(lambda: channel._log())
        await wait_for(lambda: "could not be sent" in channel._log()[0][2])
        text = channel._log()[0][2]
    assert text.startswith("here it is")
    assert "larger than 10 bytes are not accepted (files.max_bytes)" in text


def test_a_person_finds_only_their_own_files(tmp_path):
    store = FileStore(tmp_path / "files", FilesSettings())
    mine = store.keep_bytes(None, "plan.txt", "text/plain", b"the owner's plan")
    theirs = store.keep_bytes("sam", "note.txt", "text/plain", b"sam's note")
    assert store.find(None, mine.file_id) == mine
    assert store.find("sam", mine.file_id) is None  # a member, the owner's id
    assert store.find(None, theirs.file_id) is None
    assert store.find("sam", "../_owner/" + mine.file_id) is None


def test_a_turns_files_are_found_again_by_the_turn_for_its_person_only(tmp_path):
    store = FileStore(tmp_path / "files", FilesSettings())
    first = store.keep_bytes(None, "a.png", "image/png", png(), turn_id="7@1.0")
    second = store.keep_bytes(None, "b.txt", "text/plain", b"b", turn_id="7@1.0")
    store.keep_bytes(None, "c.txt", "text/plain", b"c", turn_id="8@1.0")
    store.keep_bytes("sam", "d.txt", "text/plain", b"d", turn_id="7@1.0")
    assert store.of_turn(None, "7@1.0") == [first, second]
    assert [f.name for f in store.of_turn("sam", "7@1.0")] == ["d.txt"]
    assert store.of_turn("ann", "7@1.0") == []


def test_old_files_are_pruned_and_the_limit_is_named(tmp_path):
    store = FileStore(tmp_path / "files", FilesSettings(max_bytes=2_000_000, retention_days=1))
    kept = store.keep_bytes(None, "a.txt", "", b"x")
    assert kept.mime_type == "text/plain"
    assert store.prune(now=10**12) == 1 and store.find(None, kept.file_id) is None
    with pytest.raises(FileTooLarge, match=r"files larger than 2 MB are not accepted"):
        store.keep_bytes(None, "big.bin", "", b"x" * 2_000_001)


def test_attach_outside_a_turn_is_refused():
    with pytest.raises(RuntimeError, match="no turn is collecting"):
        attach(Artifact("a.txt", "text/plain", data=b"x"))
    with pytest.raises(ValueError, match="exactly one of data and path"):
        Artifact("a.txt", "text/plain")


async def test_a_tool_approved_before_it_runs_still_sends_its_file(make_ext, settings_file):
    make_ext("capture", FILE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "charts", chart_code().replace("side_effects(chart, False)", "side_effects(chart, True)")
    )
    settings = settings_file(channels={"default": "capture"}, policy={"profile": "safe"})
    async with running_kernel(settings, model=chart_model()) as k:
        channel = k.loader.instance("capture")
        await channel.say("draw the chart")
        asked = await wait_for(
            lambda: [m for kind, _, m in channel._log() if kind == "reply" and "/approve " in m]
        )
        question_id = re.search(r"/approve (\w+)", asked[0]).group(1)
        await channel.say(f"/approve {question_id}")
        await wait_for(lambda: ("reply", "u1", "here it is") in channel._log())
        files = [entry[2] for entry in channel._log() if entry[0] == "file"]
    assert [f.name for f in files] == ["chart.png"] and read(files[0].path) == png()
