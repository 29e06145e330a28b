"""The history joins each model request, not the run's input (ADR 0101): the model
sees the whole conversation as before, and a turn paused for approval keeps only
its own items in its stored state, getting the history back when it resumes."""

from __future__ import annotations

import json
import re
import sqlite3

from agents.testing import ScriptedModel, assistant_message, function_call

from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.rocket_ext import ROCKETS


def said(call) -> list[str]:
    """The user's and the assistant's texts a model call was given, in order."""
    texts = []
    for item in call.input:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part.get("text", "") for part in content if isinstance(part, dict)]
    return [t for t in texts if t]


async def test_a_paused_turn_keeps_no_history_and_resumes_with_it(make_ext, settings_file):
    model = ScriptedModel(
        [
            [assistant_message("Noted: the moon.")],
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("rockets", ROCKETS)
    path = settings_file(channels={"default": "capture"}, policy={"profile": "safe"})
    async with running_kernel(path, model=model) as kernel:
        capture = kernel.loader.instance("capture")
        log = lambda: [text for _, _, text in capture._log()]  # noqa: E731
        await capture.say("my target is the moon")
        await wait_for(lambda: "Noted: the moon." in log())
        await capture.say("launch at my target")
        await wait_for(lambda: any("/approve " in t for t in log()))
        asked = next(t for t in log() if "/approve " in t)
        db = sqlite3.connect(kernel.settings.data_dir / "sessions.db")
        (state,) = db.execute("SELECT state FROM hearth_paused_turns").fetchone()
        db.close()
        qid = re.search(r"/approve (\w+)", asked).group(1)
        await capture.say(f"/approve {qid}")
        await wait_for(lambda: "Launched at the moon." in log())
    model.assert_complete()
    # every request carried the conversation so far, the resumed one too
    assert said(model.calls[1])[:2] == ["my target is the moon", "Noted: the moon."]
    assert said(model.calls[2])[:2] == ["my target is the moon", "Noted: the moon."]
    # the stored state holds the paused turn alone, marked to get the history back
    stored = json.loads(state)
    assert stored["hearth_history_spliced"] is True
    assert "my target is the moon" not in json.dumps(stored["original_input"])
    assert "launch at my target" in json.dumps(stored["original_input"])
