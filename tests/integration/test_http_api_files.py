"""Files on the HTTP API (issue 45, ADR 0096): a tool's file comes with the reply as
a link, served to its person only."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from agents.testing import ScriptedModel, assistant_message

from support.files_kit import chart_code, chart_model, png
from support.http_api_support import AUTH, EXTENSION_ID, TOKEN, install, serving

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
