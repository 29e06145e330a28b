"""The bundled declarative simple_agent: the orchestrator calls it as a tool, it
reads the kv store with kv_get and answers. One ScriptedModel serves every agent."""

from __future__ import annotations

from agents.testing import ScriptedModel, assistant_message, function_call

from support.bundled import copy_bundled, tool_output
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

HAIKU = "Blue as morning sky\nyou keep it close, like a stone\nquiet, deep, and yours"


async def test_orchestrator_calls_the_haiku_agent_which_reads_kv(ext_root, make_ext, settings_file):
    copy_bundled(ext_root, "kv", "simple_agent")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    task = "Write a haiku about the user's favourite colour (key haiku.favourite_colour)."
    model = ScriptedModel(
        [
            [function_call("simple_agent", {"task": task}, call_id="o1")],  # orchestrator
            [function_call("kv_get", {"key": "haiku.favourite_colour"}, call_id="a1")],  # agent
            [assistant_message(HAIKU)],  # agent's answer
            [assistant_message(f"Here is your haiku:\n{HAIKU}")],  # orchestrator's reply
        ]
    )
    async with running_kernel(settings_file(channels={"default": "capture"}), model=model) as k:
        record = k.loader.records["simple_agent"]
        assert record.status.value == "active" and record.has("AgentProvider")
        await k.loader.instance("kv").set("haiku.favourite_colour", "blue")
        await k.loader.instance("capture").say("write me a haiku about my favourite colour")
        await wait_for(lambda: k.loader.instance("capture")._log())
    orchestrator, agent_first, _, orchestrator_last = model.calls
    assert any(t.name == "simple_agent" for t in orchestrator.tools)
    # the declarative agent: prompt.jinja2 (rendered) + manifest instructions, kv tools only
    assert agent_first.system_instructions.startswith("You are a small poet")
    assert '"haiku."' in agent_first.system_instructions
    assert "Always reply in the format of a haiku" in agent_first.system_instructions
    assert sorted(t.name for t in agent_first.tools) == ["kv_delete", "kv_get", "kv_list", "kv_set"]
    assert agent_first.input[0]["content"] == task
    assert tool_output(model, "a1") == '"blue"'
    assert tool_output(model, "o1") == HAIKU
    assert orchestrator_last.input[-1]["output"] == HAIKU  # the orchestrator got the haiku
    assert k.loader.instance("capture")._log() == [("reply", "u1", f"Here is your haiku:\n{HAIKU}")]
    model.assert_complete()


async def test_simple_agent_is_skipped_without_kv(ext_root, make_ext, settings_file):
    copy_bundled(ext_root, "simple_agent")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    async with running_kernel(settings_file()) as k:
        record = k.loader.records["simple_agent"]
    assert record.status.value == "skipped"
    assert "kv" in (record.error or "")
