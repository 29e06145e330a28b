"""The web page in a real headless Chromium (Debian's ``chromium`` driven by
``playwright``; no browser download): log in, chat and watch the reply stream,
requeue a dead letter, cancel a reminder, receive a pushed notification. A
screenshot is saved under ``tests/artifacts/`` (the path is printed)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Iterator

import pytest

from conftest import PROJECT_ROOT
from support.fake_openai import FakeOpenAIServer, ToolCall
from support.http_api_support import TOKEN, api_settings, client, install, serving

CHROMIUM = (
    os.environ.get("HEARTH_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium installed (apt-get install chromium): browser tests skipped",
)
SCREENSHOT = PROJECT_ROOT / "tests" / "artifacts" / "http_api_page.png"
STORY = "Once upon a time a small kernel kept a warm hearth."

# records every text the newest reply bubble shows, to see it grow
WATCH_REPLY = """() => {
  window.replyStates = [];
  new MutationObserver(() => {
    const last = document.querySelector("#messages li.hearth:last-child");
    if (last) window.replyStates.push(last.textContent);
  }).observe(document.querySelector("#messages"),
             {childList: true, subtree: true, characterData: true});
}"""


@pytest.fixture(autouse=True)
def patient_expect() -> Iterator[None]:
    """Playwright's expectations wait 5 s by default; a turn through the kernel on
    a loaded 2-core CI machine (xdist running other suites beside it) can take
    longer to reach the page, so every expectation here waits up to 30 s."""
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)
    yield
    expect.set_options(timeout=5_000)


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


async def until_dead(kernel, count: int) -> None:
    deadline = time.monotonic() + 10
    while (await kernel.bus.journal.counts()).get("dead", 0) != count:
        assert time.monotonic() < deadline, f"dead letters never reached {count}"
        await asyncio.sleep(0.02)


async def test_the_page_in_a_browser(monkeypatch, ext_root, settings_file, model):
    from playwright.async_api import async_playwright, expect

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root, "scheduler", "memory")
    settings = api_settings(settings_file, model)
    settings.write_text(settings.read_text() + "events: {max_attempts: 1, poll_interval_s: 0.1}\n")
    model.script(STORY)
    async with serving(settings) as (kernel, base):
        healthy = False

        async def flaky(event) -> None:
            if not healthy:
                raise RuntimeError("disk full")

        kernel.bus.subscribe("demo.fail", flaky, "test/flaky")
        dead_id = await kernel.bus.publish("demo.fail", "test", {})
        await until_dead(kernel, 1)
        await client(base).chat.completions.create(
            model="hearth",
            messages=[{"role": "user", "content": "/remind 2h water the plants"}],
            user="web",
        )
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{base}/")

            # log in
            await expect(page.locator("#login")).to_be_visible()
            await page.fill("#token", "not the token")
            await page.click("#login-form button")
            await expect(page.locator("#login-error")).to_contain_text("wrong token")
            await page.fill("#token", TOKEN)
            await page.click("#login-form button")
            await expect(page.locator("#app")).to_be_visible()
            await expect(page.locator("#extensions")).to_contain_text("scheduler")
            await expect(page.locator("#memories")).to_have_text("0 memories kept")
            await expect(page.locator("#model")).to_contain_text("fake-model")

            # chat: the reply grows in place, chunk by chunk (each chunk is let out
            # only once the page shows the one before: no timing to lose under load)
            await page.evaluate(WATCH_REPLY)
            model.chunk_gate = gate = threading.Semaphore(1)  # the role chunk goes at once
            await page.fill("#prompt", "tell me a story")
            await page.click("#send")
            reply, shown = page.locator("#messages li.hearth").last, ""
            for word in STORY.split(" "):
                shown = f"{shown} {word}".lstrip()
                gate.release()
                await expect(reply).to_have_text(shown)
            model.chunk_gate = None
            gate.release(3)  # the finish and usage chunks
            await expect(reply).to_have_text(STORY)
            states = [s for s in await page.evaluate("window.replyStates") if s]
            assert len(set(states)) >= 4, states
            assert all(STORY.startswith(s) for s in states)

            # a pushed notification
            await kernel.router.notify_user("Dinner is ready", "http_api", user_id="web")
            await expect(page.locator("#notifications")).to_contain_text("Dinner is ready")

            # requeue the dead letter
            healthy = True
            await page.click(f"#dead button[data-event='{dead_id}']")
            await expect(page.locator("#toast")).to_have_text(f"Requeued event {dead_id}.")
            await until_dead(kernel, 0)

            # cancel the reminder
            await expect(page.locator("#reminders")).to_contain_text("water the plants")
            await page.click("#reminders button[data-reminder='1']")
            await expect(page.locator("#toast")).to_contain_text("Cancelled reminder #1")
            await expect(page.locator("#reminders")).to_contain_text("No reminders")
            await page.click("#refresh")
            await expect(page.locator("#dead tbody")).to_have_text("none")

            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOT), full_page=True)
            print(f"screenshot of the web page: {SCREENSHOT}")
            await browser.close()


LONG_WORD = "x" * 300


@pytest.mark.parametrize("width,height", [(390, 844), (1280, 800)])
async def test_the_page_on_a_phone_and_a_desktop(
    monkeypatch, ext_root, settings_file, model, width, height
):
    """Issue 30: the page fits the screen (Send on it), the login box shows alone,
    a long word wraps, an empty answer says so, a reload keeps the chat, and the
    event list shows conversations unless asked for every topic."""
    from playwright.async_api import async_playwright, expect

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    model.script(LONG_WORD, "")
    async with serving(api_settings(settings_file, model)) as (_, base):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": width, "height": height})
            await page.goto(f"{base}/")
            await expect(page.locator("#login")).to_be_visible()
            await expect(page.locator("#app")).to_be_hidden()
            await expect(page.locator("#prompt")).to_be_hidden()
            await page.fill("#token", TOKEN)
            await page.click("#login-form button")
            await expect(page.locator("#app")).to_be_visible()

            await page.fill("#prompt", "a long word please")
            await page.click("#send")
            reply = page.locator("#messages li.hearth").last
            await expect(reply).to_have_text(LONG_WORD)
            await page.fill("#prompt", "and now nothing")
            await page.click("#send")
            await expect(page.locator("#messages li.hearth").last).to_have_text(
                "(The model answered nothing.)"
            )
            page_width = await page.evaluate("document.documentElement.scrollWidth")
            assert page_width <= width, f"the page is {page_width} px wide on a {width} px screen"
            send = await page.locator("#send").bounding_box()
            assert send is not None and send["x"] + send["width"] <= width
            bubble = await reply.bounding_box()
            assert bubble is not None and bubble["x"] + bubble["width"] <= width

            await page.reload()
            await expect(page.locator("#messages li.you")).to_have_count(2)
            await expect(page.locator("#messages li.hearth").first).to_have_text(LONG_WORD)

            topics = page.locator("#events tbody td:nth-child(3)")
            await expect(topics.first).not_to_have_text("none")
            shown = await topics.all_text_contents()
            assert not [t for t in shown if t.startswith("replay.")]
            await page.check("#all-events")
            await expect(page.locator("#events tbody tr").first).to_be_visible()
            await browser.close()


async def test_the_page_answers_an_approval_with_its_buttons(
    monkeypatch, ext_root, make_ext, settings_file, model, tmp_path
):
    from playwright.async_api import async_playwright, expect
    from test_http_api_clients import ROCKETS

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    log = tmp_path / "launched"
    make_ext("rockets", ROCKETS, {"config": {"log": str(log)}})
    settings = api_settings(settings_file, model)
    settings.write_text(settings.read_text() + "policy: {profile: safe}\n")
    model.script(ToolCall("launch", {"target": "moon"}), "Launched at the moon.")
    async with serving(settings) as (_, base):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 390, "height": 844})
            await page.goto(f"{base}/")
            await page.fill("#token", TOKEN)
            await page.click("#login-form button")
            await page.fill("#prompt", "launch at the moon")
            await page.click("#send")
            question = page.locator("#messages li.hearth").first
            await expect(question).to_contain_text("Waiting for your answer")
            buttons = question.locator(".choices button")
            await expect(buttons).to_have_text(["Allow once", "Always allow", "Deny"])
            assert not log.exists()
            await buttons.first.click()
            await expect(page.locator("#messages li.hearth").last).to_have_text(
                "Launched at the moon."
            )
            await expect(buttons.first).to_be_disabled()
            await browser.close()
    assert log.read_text() == "moon\n"
