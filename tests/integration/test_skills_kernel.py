"""Skills in a running kernel with a scripted model: the catalog is in the system
prompt (sorted, the same bytes each turn), ``load_skill``'s body reaches the
model as a tool result and stays in the history, never in the system prompt;
``run_skill_script`` waits for the user's yes under ``safe`` and then runs
confined; a skill's ``allowed-tools`` narrows what the model may call for the
rest of that turn only, without a question for what it refuses; ``/skills``."""

from __future__ import annotations

import re

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from core.extensions.isolation.kernel.confinement import probe
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.rocket_ext import ROCKETS
from support.skills_kit import public_layout, write_skill


@pytest.fixture
def skills_kernel(make_ext, settings_file, tmp_path):
    def build(model, profile="full_auto"):
        make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
        make_ext("rockets", ROCKETS)
        root = public_layout(tmp_path / "skills")
        write_skill(
            root,
            "launch-check",
            "Only peek at the pad; never launch.",
            front="name: launch-check\ndescription: Check the pad.\nallowed-tools: peek",
        )
        path = settings_file(
            channels={"default": "capture"},
            policy={"profile": profile},
            skills={"paths": [str(root)]},
        )
        return running_kernel(path, model=model)

    return build


def sent(kernel) -> list[str]:
    return [text for _, _, text in kernel.loader.instance("capture")._log()]


async def say(kernel, text: str) -> None:
    await kernel.loader.instance("capture").say(text)


def outputs(call) -> list[str]:
    items = [i for i in call.input if isinstance(i, dict)]
    return [str(i["output"]) for i in items if i.get("type") == "function_call_output"]


async def test_catalog_in_the_prompt_and_the_body_in_the_history(skills_kernel, tmp_path):
    model = ScriptedModel(
        [
            [function_call("load_skill", {"name": "brand-voice"}, call_id="c1")],
            [assistant_message("Loaded.")],
            [assistant_message("Still in house style.")],
        ]
    )
    async with skills_kernel(model) as kernel:
        await say(kernel, "write in our voice")
        await wait_for(lambda: "Loaded." in sent(kernel))
        await say(kernel, "and again")
        await wait_for(lambda: "Still in house style." in sent(kernel))
    model.assert_complete()
    first, second, third = model.calls
    assert "- brand-voice: Write in the house style." in first.system_instructions
    assert "- word-count: Count the words of a text." in first.system_instructions
    catalog = first.system_instructions[first.system_instructions.index("Skills (") :]
    assert catalog in third.system_instructions  # the same bytes on the next turn
    body = "Never use exclamation marks."
    assert body not in (first.system_instructions + third.system_instructions)
    assert any(body in out for out in outputs(second))
    assert any(body in out for out in outputs(third))  # still in the history


async def test_read_skill_file_reads_references_and_refuses_an_escape(skills_kernel):
    model = ScriptedModel(
        [
            [
                function_call(
                    "read_skill_file",
                    {"name": "pdf-forms", "path": "references/fields.md"},
                    call_id="c1",
                ),
                function_call(
                    "read_skill_file", {"name": "pdf-forms", "path": "../x"}, call_id="c2"
                ),
                function_call("load_skill", {"name": "nope"}, call_id="c3"),
            ],
            [assistant_message("Read.")],
        ]
    )
    async with skills_kernel(model) as kernel:
        await say(kernel, "fill the form")
        await wait_for(lambda: "Read." in sent(kernel))
    read, escape, unknown = outputs(model.calls[1])
    assert "first_name" in read
    assert "'..' is not allowed" in escape
    assert "there is no skill 'nope'" in unknown and "brand-voice" in unknown


@pytest.mark.skipif(not probe().available, reason=f"bubblewrap is needed: {probe().detail}")
async def test_a_script_waits_for_the_users_yes_then_runs_confined(skills_kernel):
    args = {"name": "word-count", "script": "scripts/count.py", "args": ["a b c"]}
    model = ScriptedModel(
        [
            [function_call("run_skill_script", args, call_id="c1")],
            [assistant_message("Three words.")],
        ]
    )
    async with skills_kernel(model, profile="safe") as kernel:
        await say(kernel, "count a b c")
        await wait_for(lambda: any("/approve " in t for t in sent(kernel)))
        asked = next(t for t in sent(kernel) if "/approve " in t)
        assert 'Allow run_skill_script(name="word-count"' in asked
        assert len(model.calls) == 1  # nothing ran while waiting
        qid = re.search(r"/approve (\w+)", asked).group(1)
        await say(kernel, f"/approve {qid}")
        await wait_for(lambda: "Three words." in sent(kernel))
    [result] = outputs(model.calls[1])
    assert "exit code 0" in result and "3 words" in result and "confined, no network" in result


async def test_load_skill_and_read_skill_file_never_ask(skills_kernel):
    model = ScriptedModel(
        [
            [function_call("load_skill", {"name": "pdf-forms"}, call_id="c1")],
            [assistant_message("Loaded.")],
        ]
    )
    async with skills_kernel(model, profile="safe") as kernel:
        await say(kernel, "forms")
        await wait_for(lambda: "Loaded." in sent(kernel))
        assert not any("/approve " in t for t in sent(kernel))


async def test_allowed_tools_narrow_the_rest_of_the_turn_without_asking(skills_kernel):
    model = ScriptedModel(
        [
            [function_call("load_skill", {"name": "launch-check"}, call_id="c1")],
            [
                function_call("launch", {"target": "moon"}, call_id="c2"),
                function_call("peek", {}, call_id="c3"),
            ],
            [assistant_message("Pad checked.")],
            [function_call("launch", {"target": "mars"}, call_id="c4")],
            [assistant_message("Launched next turn.")],
        ]
    )
    async with skills_kernel(model, profile="safe") as kernel:
        await say(kernel, "check the pad")
        await wait_for(lambda: "Pad checked." in sent(kernel))
        assert not any("/approve " in t for t in sent(kernel))  # refused, not asked
        assert kernel.loader.instance("rockets").log() == []
        refused, peeked = outputs(model.calls[2])[-2:]
        assert "launch is not allowed while skill launch-check is active" in refused
        assert peeked == "pad is clear"
        assert "only these tools run: peek" in outputs(model.calls[1])[-1]
        await say(kernel, "now launch")  # a new turn: the skill is no longer active
        await wait_for(lambda: any("/approve " in t for t in sent(kernel)))
        qid = re.search(r"/approve (\w+)", sent(kernel)[-1]).group(1)
        await say(kernel, f"/approve {qid}")
        await wait_for(lambda: "Launched next turn." in sent(kernel))
        assert kernel.loader.instance("rockets").log() == ["mars"]


async def test_slash_skills_lists_them_and_sees_a_new_one(skills_kernel, tmp_path):
    model = ScriptedModel([[assistant_message("Hello.")]])
    async with skills_kernel(model) as kernel:
        await say(kernel, "/skills")
        await wait_for(lambda: any("word-count" in t for t in sent(kernel)))
        assert "brand-voice (settings): Write in the house style." in sent(kernel)[0]
        write_skill(tmp_path / "skills", "fresh", front="name: fresh\ndescription: New one.")
        write_skill(tmp_path / "skills", "broken", front="name: broken")
        await say(kernel, "/skills")
        await wait_for(lambda: len(sent(kernel)) == 2)
        assert "fresh (settings): New one." in sent(kernel)[1]
        assert "not loaded:" in sent(kernel)[1] and "description: missing" in sent(kernel)[1]
        await say(kernel, "hi")
        await wait_for(lambda: "Hello." in sent(kernel))
    assert "- fresh: New one." in model.calls[0].system_instructions


async def test_without_skills_there_are_no_skill_tools_and_no_catalog(
    make_ext, settings_file, tmp_path
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Hi.")]])
    path = settings_file(
        channels={"default": "capture"}, skills={"paths": [str(tmp_path / "none")]}
    )
    async with running_kernel(path, model=model) as kernel:
        await say(kernel, "hello")
        await wait_for(lambda: "Hi." in sent(kernel))
        names = [t.name for t in kernel.orchestrator.tools]
    assert "load_skill" not in names and "Skills (" not in model.calls[0].system_instructions
