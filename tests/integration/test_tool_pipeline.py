"""The tool call's layers are one list (ADR 0079): their order, and what a feature
that is off costs a tool call — nothing (no layer, no code of it runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml
from agents import function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from conftest import ext_code
from core.config import PolicySettings
from core.extensions.contract import TurnContext
from core.kernel.consent import ConsentGate, ConsentPolicy, DeclaredTools, FullAutoGate, ToolCatalog
from core.kernel.hooks import FrameRecorder
from core.kernel.shaping.tool_pipeline import TOOL_LAYERS, ToolFeatures, layers_on
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

ROOT = Path(__file__).resolve().parents[2]
ALL_ON = ToolFeatures(skills=True, consent=True, replay=True)
ALL_OFF = ToolFeatures(skills=False, consent=False, replay=False)

LOOKUP_TOOL = """
    def get_tools(self):
        @function_tool
        def lookup(word: str) -> str:
            "Look a word up."
            return f"{word}: found"

        return [side_effects(lookup, False)]
"""
LOOKUP_HEADER = """
    from agents import function_tool

    from core.extensions.sdk import side_effects
"""
# code a tool call must not run when its feature is off (the router's consent stage,
# which looks for an answer to a question, is the message's, not the tool call's)
OFF_CODE = (
    "core/kernel/consent/gate.py",
    "core/kernel/consent/catalog.py",
    "core/kernel/consent/policy.py",
    "core/kernel/consent/assembly.py",
    "core/replay/",
    "core/skills/",
)
NULL_OBJECTS = {"FullAutoGate.admit"}  # the owner's turn: no policy lookup


def names(features: ToolFeatures, *, agents: bool = False) -> list[str]:
    return [row.name for row in layers_on(features, agents=agents)]


def test_the_tool_layers_are_declared_once_outermost_first():
    assert [row.name for row in TOOL_LAYERS] == [
        "skills",
        "consent",
        "hooks",
        "replay",
        "tool_runs",
    ]
    assert names(ALL_ON) == ["skills", "consent", "hooks", "replay", "tool_runs"]
    # a declarative agent's run cannot pause for a question and is not narrowed by skills
    assert names(ALL_ON, agents=True) == ["hooks", "replay", "tool_runs"]


def test_a_feature_that_is_off_adds_no_layer():
    assert names(ALL_OFF) == ["hooks", "tool_runs"]
    for feature in ("skills", "consent", "replay"):
        only = ToolFeatures(**{**vars_of(ALL_OFF), feature: True})
        assert names(only) == [
            row.name for row in TOOL_LAYERS if row.name in (feature, *names(ALL_OFF))
        ]


def vars_of(features: ToolFeatures) -> dict[str, bool]:
    return {name: getattr(features, name) for name in ("skills", "consent", "replay")}


async def test_a_tool_call_runs_no_code_of_the_features_that_are_off(make_ext, settings_file):
    """``full_auto`` with no rules, ``replay.record: false``, no skill: the call runs
    through the hooks to the tool, and no consent, replay or skills code runs."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("lookup", ext_code(LOOKUP_TOOL, LOOKUP_HEADER))
    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message("hello")]),
            ModelStep(output=[function_call("lookup", {"word": "hearth"}, call_id="c1")]),
            ModelStep(output=[assistant_message("hearth: found")]),
        ]
    )
    entered: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            path = frame.f_code.co_filename.replace("\\", "/")
            for part in OFF_CODE:
                if f"/{part}" in path and frame.f_code.co_qualname not in NULL_OBJECTS:
                    entered.add(f"{path.split('/core/', 1)[1]}:{frame.f_code.co_qualname}")

    settings = settings_file(channels={"default": "capture"}, replay={"record": False})
    async with running_kernel(settings, model=model) as k:
        assert names(k.tool_features()) == ["hooks", "tool_runs"]
        channel = k.loader.instance("capture")
        await channel.say("hi")  # the first turn builds the orchestrator
        await wait_for(lambda: len(channel._log()) == 1)
        sys.setprofile(profile)
        try:
            await channel.say("look up hearth")
            await wait_for(lambda: len(channel._log()) == 2)
        finally:
            sys.setprofile(None)
        assert channel._log()[1] == ("reply", "u1", "hearth: found")
    assert model.calls[2].input[-1]["output"] == "hearth: found"  # the tool ran
    assert entered == set()


async def test_full_auto_without_rules_still_keeps_the_owners_tools_from_a_member():
    """The null gate lets the owner's calls through unasked; a member's turn still gets
    the policy's answer: ``builder_agent`` is the household owner's only."""
    catalog = ToolCatalog(lambda: [DeclaredTools("builder_agent", ["builder_agent"], {})], {})
    published: list[dict] = []

    class Sink:
        async def publish(self, topic, source, payload, **kwargs):
            published.append(payload)

    gate = ConsentGate(
        ConsentPolicy(PolicySettings(profile="full_auto"), NoGrants()),
        catalog,
        FrameRecorder(Sink()),
    )
    null_gate = FullAutoGate(gate)
    tool = function_tool(lambda: "built", name_override="builder_agent")

    def ctx(turn: TurnContext) -> SimpleNamespace:
        return SimpleNamespace(context=turn, tool_call_id="c1")

    owner = TurnContext(channel_id="chat", turn_id="t1")
    member = TurnContext(channel_id="chat", turn_id="t2", person="bob", role="member")
    assert await null_gate.admit(tool, ctx(owner), "{}") is None
    denied = await null_gate.admit(tool, ctx(member), "{}")
    assert denied is not None and "owner only" in (denied.denial or "")
    assert published and published[0]["decision"] == "denied"


class NoGrants:
    def grant_for(self, tool, person=None):
        return None


def test_doctor_verbose_prints_the_tool_layers_in_order(tmp_path):
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "paths": {"data": str(tmp_path / "data"), "extensions": str(tmp_path / "ext")},
                "policy": {"profile": "full_auto"},
                "replay": {"record": False},
            }
        )
    )
    env_run = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "doctor", "--verbose", "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    lines = env_run.stdout.splitlines()
    assert any(
        line.endswith("tool call layers (outermost first): hooks → tool_runs → the tool")
        for line in lines
    ), env_run.stdout + env_run.stderr
    off = [line.split("off: ", 1)[1].split(" ", 1)[0] for line in lines if " off: " in line]
    assert off == ["skills", "consent", "replay"]
