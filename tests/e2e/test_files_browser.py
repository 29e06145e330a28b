"""A tool's picture on the web page (issue 45, ADR 0096), in a real headless
Chromium: the reply shows the image inline, decoded at its own size, fetched
with the page's session; a screenshot is saved under ``tests/artifacts/``."""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator

import pytest
from agents.testing import ScriptedModel, assistant_message

from conftest import PROJECT_ROOT
from support.files_kit import chart_code, chart_model, png
from support.http_api_support import EXTENSION_ID, TOKEN, install, serving

CHROMIUM = (
    os.environ.get("HEARTH_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium installed (apt-get install chromium): browser tests skipped",
)
SCREENSHOT = PROJECT_ROOT / "tests" / "artifacts" / "http_api_files.png"


@pytest.fixture(autouse=True)
def patient_expect() -> Iterator[None]:
    """A turn on a loaded 2-core machine can take longer than Playwright's 5 s."""
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)
    yield
    expect.set_options(timeout=5_000)


async def test_a_tools_png_shows_inline_on_the_page(monkeypatch, ext_root, settings_file, make_ext):
    from playwright.async_api import async_playwright, expect

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    make_ext("charts", chart_code())
    settings = settings_file(
        channels={"default": EXTENSION_ID}, extensions={EXTENSION_ID: {"listen": "127.0.0.1:0"}}
    )
    async with serving(settings, model=chart_model()) as (_, base):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{base}/")
            await page.fill("#token", TOKEN)
            await page.click("#login-form button")
            await expect(page.locator("#app")).to_be_visible()
            await page.fill("#prompt", "draw the chart")
            await page.click("#send")
            reply = page.locator("#messages li.hearth").last
            image = reply.locator("figure.file img")
            await expect(image).to_be_visible()
            await expect(reply.locator("figcaption")).to_have_text("the chart")
            await page.wait_for_function(
                "() => { const i = document.querySelector('figure.file img');"
                " return i && i.complete && i.naturalWidth > 0; }"
            )
            size = await image.evaluate("i => [i.naturalWidth, i.naturalHeight]")
            assert size == [3, 2]  # the tool's PNG, decoded: fetched with the session
            assert await reply.evaluate("li => li.firstChild.textContent") == "here it is"
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOT), full_page=True)
            print(f"screenshot of the page with a file: {SCREENSHOT}")
            await browser.close()


async def test_a_picture_attached_on_the_page_reaches_the_model(
    monkeypatch, ext_root, settings_file, tmp_path
):
    from playwright.async_api import async_playwright, expect

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    picture = tmp_path / "square.png"
    picture.write_bytes(png())
    model = ScriptedModel([[assistant_message("a red square")]])
    settings = settings_file(
        channels={"default": EXTENSION_ID}, extensions={EXTENSION_ID: {"listen": "127.0.0.1:0"}}
    )
    async with serving(settings, model=model) as (_, base):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{base}/")
            await page.fill("#token", TOKEN)
            await page.click("#login-form button")
            await expect(page.locator("#app")).to_be_visible()
            await page.set_input_files("#attach", str(picture))
            await page.fill("#prompt", "what is this?")
            await page.click("#send")
            await expect(page.locator("#messages li.hearth").last).to_have_text("a red square")
            await expect(page.locator("#messages li.you img.sent-image")).to_be_visible()
            await browser.close()
    users = [i for i in model.calls[0].input if isinstance(i, dict) and i.get("role") == "user"]
    image = users[-1]["content"][1]
    assert image["type"] == "input_image"
    assert image["image_url"] == "data:image/png;base64," + base64.b64encode(png()).decode()


PASTE = """b64 => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], "image.png", { type: "image/png" }));
  const paste = new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true });
  document.querySelector("#prompt").dispatchEvent(paste);
}"""


async def test_a_document_uploaded_and_a_picture_pasted_reach_the_model(
    monkeypatch, ext_root, settings_file, tmp_path
):
    from playwright.async_api import async_playwright, expect

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    notes = tmp_path / "notes.txt"
    notes.write_text("buy milk")
    dropped = tmp_path / "dropped.csv"
    dropped.write_text("a,b")
    model = ScriptedModel([[assistant_message("milk, and a red square")]])
    settings = settings_file(
        channels={"default": EXTENSION_ID}, extensions={EXTENSION_ID: {"listen": "127.0.0.1:0"}}
    )
    async with serving(settings, model=model) as (kernel, base):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{base}/")
            await page.fill("#token", TOKEN)
            await page.click("#login-form button")
            await expect(page.locator("#app")).to_be_visible()
            await page.set_input_files("#attach", [str(notes), str(dropped)])
            await page.evaluate(PASTE, base64.b64encode(png()).decode())
            listed = page.locator("#attached li")
            await expect(listed).to_have_count(3)
            await listed.nth(1).locator("button.drop").click()  # dropped.csv: not sent
            await expect(listed).to_have_count(2)
            await page.fill("#prompt", "what are these?")
            await page.click("#send")
            reply = page.locator("#messages li.hearth").last
            await expect(reply).to_have_text("milk, and a red square")
            mine = page.locator("#messages li.you").last
            await expect(mine.locator(".sent-file")).to_have_text("📄 notes.txt")
            await expect(mine.locator("img.sent-image")).to_be_visible()
            await expect(page.locator("#attached")).to_be_hidden()
            await browser.close()
        kept = sorted(
            p.name
            for p in (kernel.settings.data_dir / "files" / "_owner").glob("*/*")
            if p.name != "meta.json"
        )
    users = [i for i in model.calls[0].input if isinstance(i, dict) and i.get("role") == "user"]
    text, image = users[-1]["content"]
    assert text["text"].startswith("what are these?")
    assert "[The user sent notes.txt:]\nbuy milk" in text["text"]
    assert image["image_url"] == "data:image/png;base64," + base64.b64encode(png()).decode()
    assert kept == ["image-2.png", "notes.txt"]  # a picture part has no name: its place
