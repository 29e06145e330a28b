"""An activation made on Telegram applies on the CLI (issue 46): with ``people:``
naming Alice on both, ``/ext activate`` from her Telegram id and a message typed
in ``main.py``'s terminal afterwards use the same activations."""

from __future__ import annotations

import shutil

import pytest
from test_cli_e2e import CLI_EXT, run_main
from test_postprocess_runner import Sink

from core.config import PostProcessSettings, load_settings
from core.extensions.contract import TurnContext
from core.kernel.conversations.people import Household
from core.kernel.postprocess import PostProcessing
from core.runtime import SESSIONS_FILE
from support.fake_openai import FakeOpenAIServer, models_section
from support.postprocessors import wired_processors

pytestmark = pytest.mark.usefixtures("postprocessors")

PEOPLE = {"alice": {"role": "owner", "identities": ["telegram:111", "cli:local"]}}


async def test_an_activation_made_on_telegram_applies_on_the_cli(settings_file, ext_root):
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    with FakeOpenAIServer() as model:
        model.script("The web tier is down.")
        path = settings_file(models=models_section(model.base_url), people=PEOPLE)
        settings = load_settings(path)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        # Alice on Telegram, as the kernel's router hands her message to /ext
        household = Household.of(settings.people, settings.extensions)
        post = PostProcessing.build(
            settings.data_dir / SESSIONS_FILE,
            Sink(),
            wired_processors(),
            settings=PostProcessSettings(),
            resolve=household.resolve,
        )
        await post.open()
        try:
            on_telegram = household.resolve(TurnContext(channel_id="telegram", user_id="111"))
            ext = {c.name: c.handler for c in post.commands()}["ext"]
            assert await ext("activate decision binary", on_telegram) == (
                "Activated #decision2 (decision, default param binary)."
            )
            await ext("rename decision2 yesno", on_telegram)
        finally:
            await post.aclose()

        done = run_main(path, "Is the web tier up? #yesno\n/last yesno\n")
    assert done.returncode == 0, done.stderr
    assert model.requests[0]["messages"][-1]["content"] == "Is the web tier up?"
    assert "Results for “Is the web tier up? #yesno”:" in done.stdout
    assert '"branch_key": "yes"' in done.stdout  # binary: the default made on Telegram
