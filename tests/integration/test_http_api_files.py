"""Files on the HTTP API (issue 45, ADR 0096): a tool's file comes with the reply as
a link, served to its person only."""

from __future__ import annotations

import base64
import json
import random
import sqlite3
from typing import Any

import httpx
import openai
import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from core.kernel.files import PICTURE_NOTE
from support.files_kit import chart_code, chart_model, pdf, png
from support.http_api_support import AUTH, EXTENSION_ID, TOKEN, client, install, serving

ASK = {"model": "hearth", "messages": [{"role": "user", "content": "draw the chart"}]}
OWNER_ON_TERMINAL = {
    "alex": {"role": "owner", "identities": ["cli:local"]},
    "sam": {"role": "member", "identities": ["http:default"]},
}


@pytest.fixture(autouse=True)
def _token(monkeypatch):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)


def settings(settings_file: Any, **sections: Any) -> Any:
    return settings_file(
        channels={"default": EXTENSION_ID},
        extensions={EXTENSION_ID: {"listen": "127.0.0.1:0"}},
        **sections,
    )


async def test_a_tools_png_comes_with_the_reply_and_is_served_with_the_token(
    ext_root, make_ext, settings_file
):
    install(ext_root)
    make_ext("charts", chart_code())
    async with serving(settings(settings_file), model=chart_model()) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            answer = (await http.post("/v1/chat/completions", json=ASK, headers=AUTH)).json()
            files = answer["hearth"]["files"]
            got = await http.get(files[0]["url"], headers=AUTH)
            anonymous = await http.get(files[0]["url"])
    assert answer["choices"][0]["message"]["content"] == "here it is"
    assert [(f["name"], f["mime_type"], f["caption"]) for f in files] == [
        ("chart.png", "image/png", "the chart")
    ]
    assert got.status_code == 200 and got.content == png()
    assert got.headers["content-type"] == "image/png"
    assert anonymous.status_code == 401


async def test_a_member_cannot_fetch_the_owners_file_by_url_or_id(
    ext_root, make_ext, settings_file
):
    install(ext_root)
    async with serving(settings(settings_file, people=OWNER_ON_TERMINAL)) as (kernel, base):
        store = kernel.person_files.store
        owners = store.keep_bytes(None, "plan.txt", "text/plain", b"the owner's plan")
        sams = store.keep_bytes("sam", "note.txt", "text/plain", b"sam's note")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            theirs = await http.get(f"/v1/files/{owners.file_id}", headers=AUTH)
            climbing = await http.get(f"/v1/files/..%2F_owner%2F{owners.file_id}", headers=AUTH)
            own = await http.get(f"/v1/files/{sams.file_id}", headers=AUTH)
    assert theirs.status_code == 404 and b"owner" not in theirs.content
    assert climbing.status_code == 404
    assert own.status_code == 200 and own.content == b"sam's note"
    assert own.headers["content-disposition"].startswith("attachment")


def image_ask(url: str, text: str = "what is this?") -> dict[str, Any]:
    content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    return {"model": "hearth", "messages": [{"role": "user", "content": content}]}


async def test_an_image_part_reaches_the_model_as_an_image(ext_root, settings_file):
    install(ext_root)
    model = ScriptedModel([[assistant_message("a red square")]])
    url = "data:image/png;base64," + base64.b64encode(png()).decode()
    async with serving(settings(settings_file), model=model) as (kernel, base):
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            answer = await http.post("/v1/chat/completions", json=image_ask(url), headers=AUTH)
        kept = list((kernel.settings.data_dir / "files" / "_owner").glob("*/image-1.png"))
    assert answer.json()["choices"][0]["message"]["content"] == "a red square"
    users = [i for i in model.calls[0].input if isinstance(i, dict) and i.get("role") == "user"]
    parts = users[-1]["content"]
    assert parts[0]["text"].startswith("what is this?")
    assert parts[1] == {"type": "input_image", "image_url": url, "detail": "auto"}
    assert len(kept) == 1  # kept for the person the API speaks for


async def test_an_oversized_image_is_refused_naming_the_limit(ext_root, settings_file):
    install(ext_root)
    model = ScriptedModel([])
    url = "data:image/png;base64," + base64.b64encode(png(40, 40)).decode()
    async with serving(settings(settings_file, files={"max_bytes": 100}), model=model) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            answer = await http.post("/v1/chat/completions", json=image_ask(url), headers=AUTH)
            bad = await http.post(
                "/v1/chat/completions", json=image_ask("https://example.org/a.png"), headers=AUTH
            )
    assert answer.status_code == 413
    assert (
        "files larger than 100 bytes are not accepted (files.max_bytes)"
        in (answer.json()["error"]["message"])
    )
    assert bad.status_code == 400 and "data: URL" in bad.json()["error"]["message"]
    assert not model.calls


def data_url(mime_type: str, data: bytes) -> str:
    return f"data:{mime_type};base64," + base64.b64encode(data).decode()


def user_parts(model: ScriptedModel, call: int = 0) -> Any:
    """The content of the newest user message of model call ``call`` (parts with a
    picture, else its text)."""
    users = [i for i in model.calls[call].input if isinstance(i, dict) and i.get("role") == "user"]
    return users[-1]["content"]


async def test_the_responses_api_takes_a_picture_and_a_document_with_the_real_client(
    ext_root, settings_file
):
    install(ext_root)
    model = ScriptedModel([[assistant_message("a red square and your notes")]])
    picture = data_url("image/png", png())
    content = [
        {"type": "input_text", "text": "what are these?"},
        {"type": "input_image", "image_url": picture, "detail": "auto"},
        {
            "type": "input_file",
            "filename": "notes.txt",
            "file_data": data_url("text/plain", b"buy milk"),
        },
    ]
    async with serving(settings(settings_file), model=model) as (kernel, base):
        answer = await client(base).responses.create(
            model="hearth", input=[{"role": "user", "content": content}]
        )
        kept = sorted(p.name for p in (kernel.settings.data_dir / "files" / "_owner").glob("*/*"))
    assert answer.output_text == "a red square and your notes"
    parts = user_parts(model)
    assert parts[0]["text"].startswith("what are these?")
    assert "[The user sent notes.txt:]\nbuy milk" in parts[0]["text"]
    assert parts[1] == {"type": "input_image", "image_url": picture, "detail": "auto"}
    assert [name for name in kept if name != "meta.json"] == ["image-1.png", "notes.txt"]


async def test_chat_file_parts_bring_a_pdfs_text_and_a_documents_typed_by_its_name(
    ext_root, settings_file
):
    install(ext_root)
    model = ScriptedModel([[assistant_message("read it")]])
    document = {"filename": "plan.pdf", "file_data": data_url("application/pdf", pdf("Fly at 9"))}
    # a type the browser did not know: the name says it is Markdown
    unknown = {"filename": "todo.md", "file_data": data_url("application/octet-stream", b"- milk")}
    content = [
        {"type": "text", "text": "read this"},
        {"type": "file", "file": document},
        {"type": "file", "file": unknown},
    ]
    async with serving(settings(settings_file), model=model) as (_, base):
        answer = await client(base).chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": content}]
        )
    assert answer.choices[0].message.content == "read it"
    said = user_parts(model)  # no picture: the text alone
    assert said.startswith("read this") and "[The user sent plan.pdf:]\nFly at 9" in said
    assert "[The user sent todo.md:]\n- milk" in said


async def test_the_responses_api_returns_a_tools_file_as_a_link_whole_and_streamed(
    ext_root, make_ext, settings_file
):
    install(ext_root)
    make_ext("charts", chart_code())
    model = ScriptedModel(
        [
            [function_call("chart", {}, call_id="c1")],
            [assistant_message("here it is")],
            [function_call("chart", {}, call_id="c2")],
            [assistant_message("here it is again")],
            [assistant_message("the chart is red")],
        ]
    )
    async with serving(settings(settings_file), model=model) as (_, base):
        api = client(base)
        whole = await api.responses.create(model="hearth", input="draw the chart")
        stream = await api.responses.create(model="hearth", input="again", stream=True)
        events = [event async for event in stream]
        files = whole.model_extra["hearth"]["files"]
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            got = await http.get(files[0]["url"], headers=AUTH)
        # the kept file, sent back by its id: the model sees the picture again
        again = [{"type": "input_image", "file_id": files[0]["id"], "detail": "auto"}]
        looked = await api.responses.create(
            model="hearth", input=[{"role": "user", "content": again}]
        )
        unknown = [{"type": "input_file", "file_id": "0" * 24}]
        with pytest.raises(openai.BadRequestError) as refused:
            await api.responses.create(model="hearth", input=[{"role": "user", "content": unknown}])
    assert whole.output_text == "here it is"
    assert [(f["name"], f["mime_type"], f["caption"]) for f in files] == [
        ("chart.png", "image/png", "the chart")
    ]
    assert got.status_code == 200 and got.content == png()
    completed = events[-1]
    assert completed.type == "response.completed"
    streamed = completed.response.model_extra["hearth"]["files"]
    assert [f["name"] for f in streamed] == ["chart.png"] and streamed[0]["id"] != files[0]["id"]
    assert looked.output_text == "the chart is red"
    assert user_parts(model, 4)[-1]["image_url"] == data_url("image/png", png())
    assert "is kept for you" in refused.value.body["message"]


def stored_history(data_dir: Any) -> str:
    """Every history item the kernel stored, as its JSON text."""
    with sqlite3.connect(data_dir / "sessions.db") as db:
        return "\n".join(row[0] for row in db.execute("SELECT message_data FROM agent_messages"))


async def test_a_picture_is_seen_on_its_turn_and_only_named_in_the_history(ext_root, settings_file):
    install(ext_root)
    model = ScriptedModel([[assistant_message("a red square")], [assistant_message("red")]])
    big = png() + random.Random(45).randbytes(30_000)  # 40 KB of base64, not for the history
    url = data_url("image/png", big)
    encoded = url.split(",", 1)[1]
    conversation = {"X-Hearth-Conversation": "pictures", **AUTH}
    async with serving(settings(settings_file), model=model) as (kernel, base):
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            first = await http.post(
                "/v1/chat/completions", json=image_ask(url), headers=conversation
            )
            after_first = stored_history(kernel.settings.data_dir)
            ask = {"model": "hearth", "messages": [{"role": "user", "content": "its colour?"}]}
            second = await http.post("/v1/chat/completions", json=ask, headers=conversation)
        after_second = stored_history(kernel.settings.data_dir)
        kept = list((kernel.settings.data_dir / "files" / "_owner").glob("*/image-1.png"))
    assert first.status_code == second.status_code == 200
    seen = user_parts(model, 0)
    assert seen[1] == {"type": "input_image", "image_url": url, "detail": "auto"}
    file_id = kept[0].parent.name
    assert f"kept as file {file_id}" in seen[0]["text"]
    # the stored history names the picture and its kept file, without its bytes
    assert encoded not in after_first and encoded not in after_second
    assert f"kept as file {file_id}" in after_first and PICTURE_NOTE in after_first
    assert len(after_first) < len(encoded)
    # the next turn's request carries the note, not the picture
    later = json.dumps(model.calls[1].input)
    assert encoded not in later and "input_image" not in later and PICTURE_NOTE in later
    assert len(after_second) - len(after_first) < len(encoded)
