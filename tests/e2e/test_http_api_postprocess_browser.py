"""Post-processors on the web page in a real headless Chromium, at phone and desktop
sizes (issue 46): ``#`` opens an autocomplete worked by keyboard, chosen ones sit as
chips in the input (× and Backspace remove them), a sent message carries tags that
open its results in a popover — after a reload too — and the configuration panel
lists the processors with their metadata and changes the activations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_http_api_browser import CHROMIUM

from support.fake_openai import FakeOpenAIServer
from support.http_api_support import TOKEN, api_settings, install, serving

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed: browser tests skipped"),
    pytest.mark.usefixtures("postprocessors"),
]


@pytest.fixture(autouse=True)
def patient_expect() -> Iterator[None]:
    """Every expectation waits up to 30 s: a turn on a loaded 2-core machine may take
    longer than Playwright's 5 s default to reach the page."""
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)
    yield
    expect.set_options(timeout=5_000)


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 900)], ids=["phone", "desktop"])
async def test_chips_autocomplete_tags_and_the_panel(
    monkeypatch, ext_root, settings_file, model, width, height
):
    from playwright.async_api import async_playwright, expect

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    settings = api_settings(settings_file, model)
    async with serving(settings) as (_, base), async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = await browser.new_page(viewport={"width": width, "height": height})
        await page.goto(f"{base}/")
        await page.fill("#token", TOKEN)
        await page.click("#login-form button")
        await expect(page.locator("#app")).to_be_visible()
        await expect(page.locator("#post-available li")).to_have_count(4)

        # the autocomplete, by keyboard
        prompt, menu, chips = (
            page.locator("#prompt"),
            page.locator("#post-menu"),
            page.locator("#chips .chip"),
        )
        await prompt.click()
        await prompt.press_sequentially("#")
        await expect(menu).to_be_visible()
        await expect(menu.locator("li")).to_have_count(4)
        await prompt.press("ArrowDown")
        await expect(menu.locator("li[aria-selected='true']")).to_have_attribute(
            "data-name", "decision"
        )
        await prompt.press("Enter")
        await expect(menu).to_be_hidden()
        await expect(chips).to_have_count(1)
        await expect(chips.first).to_have_attribute("data-name", "decision")
        await expect(prompt).to_have_value("")
        await prompt.press_sequentially("#j")
        await expect(menu.locator("li")).to_have_count(1)
        await prompt.press("Tab")
        await expect(chips).to_have_count(2)
        await prompt.press("Backspace")  # empty input: the last chip goes
        await expect(chips).to_have_count(1)
        await prompt.press_sequentially("#ex")
        await prompt.press("Escape")
        await expect(menu).to_be_hidden()
        await expect(prompt).to_have_value("#ex")  # Escape leaves the text as typed
        await prompt.fill("")
        await prompt.press_sequentially("#cl")
        await prompt.press("Enter")
        await expect(chips).to_have_count(2)
        await page.click("#chips .chip[data-name='classify'] button")  # × removes one
        await expect(chips).to_have_count(1)

        # send: the model sees no tag; the message carries one per result, and the
        # chat_append one (#json) shows as a block under the answer
        await prompt.press_sequentially("is the disk down? #json:minimal")
        await prompt.press("Enter")
        answer = page.locator("#messages li.hearth").last
        await expect(answer.locator(".post-block[data-name='json']")).to_contain_text(
            '"query": "is the disk down?"'
        )
        await expect(chips).to_have_count(0)
        json_tag = page.locator("#messages li.you .post-tag[data-name='json']")
        await expect(json_tag).to_have_text("#json:minimal")
        await json_tag.click()  # scrolls to the block and flashes it, no popover
        await expect(answer.locator(".post-block.flash")).to_have_count(1)
        tag = page.locator("#messages li.you .post-tag[data-name='decision']")
        await expect(tag).to_have_text("#decision")
        await tag.click()
        popover = page.locator("#messages li.you .post-popover")
        await expect(popover).to_contain_text('"branch_key": "threshold_exceeded_critical"')
        await tag.click()  # again: closed
        await expect(popover).to_have_count(0)

        # after a reload the tags and the block are still there
        await page.reload()
        await expect(tag).to_be_visible()
        await expect(answer.locator(".post-block[data-name='json']")).to_contain_text(
            '"answer": "echo: is the disk down?"'
        )
        await tag.click()
        await expect(popover).to_contain_text("#decision · silent · ok")
        box = await popover.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1

        # the panel: metadata, a default param changed, a deactivation
        card = page.locator("#post-available li[data-name='decision']")
        await expect(card).to_contain_text("Decision #decision")
        await expect(card).to_contain_text("Automation · built-in · silent")
        await expect(card).to_contain_text("Param: binary, critical, warning")
        row = page.locator("#post-activations tr[data-name='json']")
        await row.locator("input[aria-label^='Default param']").fill("huge")
        await row.locator("button[data-action='set']").click()
        await expect(page.locator("#toast")).to_contain_text("'huge' is not one of minimal, full")
        await row.locator("input[aria-label^='Default param']").fill("minimal")
        await row.locator("button[data-action='set']").click()
        await expect(page.locator("#toast")).to_have_text("#json runs with minimal by default now.")
        await page.click(
            "#post-activations tr[data-name='extract'] button[data-action='deactivate']"
        )
        await expect(page.locator("#post-activations tr[data-name='extract']")).to_have_count(0)
        await page.click("#post-available li[data-name='extract'] button[data-action='activate']")
        extract = page.locator("#post-activations tr[data-name='extract']")
        await expect(extract).to_have_count(1)
        await extract.locator("input[aria-label^='New name']").fill("numbers")
        await extract.locator("button[data-action='rename']").click()
        await expect(page.locator("#toast")).to_have_text("Renamed #extract to #numbers.")
        await expect(page.locator("#post-activations tr[data-name='numbers']")).to_have_count(1)
        await page.click("#post-activations tr[data-name='decision'] button[data-action='source']")
        await expect(page.locator("#post-source")).to_contain_text("class Decision:")
        await browser.close()
    assert model.requests[-1]["messages"][-1]["content"] == "is the disk down?"
