"""Side effects declared and the policy that reads them (SPEC §9, docs/consent.md).

Who says whether a tool has side effects — the manifest per tool, the tool
itself, the manifest's default, MCP annotations, else "it has" — and how the
profile, the rules (most specific wins) and "always allow" grants decide
allow / ask / deny per tool and channel. Bad settings and manifests fail
naming the file and the field. ``/policy``, ``/status`` and ``doctor`` show
the profile; the bundled tools are marked as documented.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from agents import function_tool
from agents.testing import ScriptedModel

from conftest import ext_code, grant_all
from core.config import PolicySettings, SettingsError, load_settings
from core.extensions.loading.manifest import ManifestError, load_manifest
from core.extensions.sdk import side_effects
from core.kernel.consent import ConsentPolicy, DeclaredTools, Grant, ToolCatalog, ToolInfo
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.telegram_support import install_extension

DEMO_SERVER = Path(__file__).parents[1] / "fixtures" / "mcp_demo_server.py"


class Grants:
    def __init__(self, *tools: str) -> None:
        self.tools = {tool: Grant(tool, "cli_channel:me", "cli_channel", 0.0) for tool in tools}

    def grant_for(self, tool: str, person: str | None = None) -> Grant | None:
        return self.tools.get(tool) if person is None else None


def policy(*grants: str, **settings: object) -> ConsentPolicy:
    return ConsentPolicy(PolicySettings.model_validate(settings), Grants(*grants))


WRITE = ToolInfo("kv_set", "kv", True, "test")
READ = ToolInfo("kv_get", "kv", False, "test")
SHELL = ToolInfo("run", "mcp:shell", True, "test")


def test_profiles_safe_asks_before_side_effects_and_full_auto_never_asks():
    safe, auto = policy(), policy(profile="full_auto")
    assert (safe.decide(WRITE, "cli").action, safe.decide(READ, "cli").action) == ("ask", "allow")
    assert {auto.decide(tool, "cli").action for tool in (WRITE, READ, SHELL)} == {"allow"}
    assert safe.profile == "safe" and safe.timeout_s == 600  # the defaults


def test_the_most_specific_rule_wins_then_the_channel_then_the_stricter():
    rules = [
        {"tool": "*", "action": "ask", "channel": "telegram_channel"},
        {"tool": "kv:*", "action": "allow"},
        {"tool": "kv_set", "action": "deny", "channel": "telegram_channel"},
        {"tool": "mcp:shell:*", "action": "deny"},
        {"tool": "run", "action": "allow"},
        {"tool": "run", "action": "ask"},
    ]
    p = policy(rules=rules)
    assert p.decide(WRITE, "cli_channel").action == "allow"  # kv:* beats the profile
    assert p.decide(WRITE, "telegram_channel").action == "deny"  # the tool's own rule
    assert p.decide(READ, "telegram_channel").action == "allow"  # kv:* beats *
    other = ToolInfo("current_time", "core", False, "test")
    assert p.decide(other, "telegram_channel").action == "ask"  # stricter on Telegram
    assert p.decide(other, "cli_channel").action == "allow"
    verdict = p.decide(SHELL, "cli_channel")
    assert (verdict.action, verdict.reason) == ("ask", "rule 6 (run)")  # a tie: the stricter


def test_always_allow_answers_a_question_but_never_overrides_a_deny():
    p = policy("kv_set", "run", rules=[{"tool": "run", "action": "deny"}])
    verdict = p.decide(WRITE, "cli_channel")
    assert (verdict.action, verdict.reason) == ("allow", "always allowed by cli_channel:me")
    assert p.decide(SHELL, "cli_channel").action == "deny"


@pytest.mark.parametrize(
    ("policy_section", "complaint"),
    [
        ({"profile": "yolo"}, "policy.profile"),
        ({"rules": [{"tool": "kv*", "action": "allow"}]}, "policy.rules.0.tool"),
        ({"rules": [{"tool": "kv_set", "action": "maybe"}]}, "policy.rules.0.action"),
        (
            {"rules": [{"tool": "kv_set", "action": "allow", "chanel": "x"}]},
            "policy.rules.0.chanel",
        ),
        ({"approval_timeout_s": 0}, "policy.approval_timeout_s"),
    ],
)
def test_bad_policy_settings_name_the_file_and_the_key(settings_file, policy_section, complaint):
    path = settings_file(policy=policy_section)
    with pytest.raises(SettingsError) as error:
        load_settings(path)
    assert str(path) in str(error.value) and complaint in str(error.value)


def test_bad_tool_declarations_in_a_manifest_name_the_file_and_the_field(make_ext):
    bad = make_ext("gadgets", ext_code(), {"tools": {"switch": {"side_effects": "sometimes"}}})
    with pytest.raises(ManifestError) as error:
        load_manifest(bad)
    assert "gadgets/manifest.yaml" in str(error.value)
    assert "tools.switch.side_effects" in str(error.value)
    typo = make_ext("gizmos", ext_code(), {"tools": {"switch": {"side_effect": False}}})
    with pytest.raises(ManifestError, match=r"tools\.switch\.side_effect: unknown key"):
        load_manifest(typo)


def test_who_decides_a_tools_side_effects_first_match_wins():
    def tool(name: str, declared: bool | None = None):
        made = function_tool(lambda: "ok", name_override=name)
        return made if declared is None else side_effects(made, declared)

    groups = [
        DeclaredTools("core", ["current_time"], {}),
        DeclaredTools(
            "gadgets",
            ["switch", "peek", "poke", "plain"],
            {"switch": True},
            default=False,
            manifest="gadgets/manifest.yaml",
        ),
        DeclaredTools("loud", ["honk"], {}, manifest="loud/manifest.yaml"),
    ]
    catalog = ToolCatalog(lambda: groups)
    assert catalog.info(tool("switch", False)) == ToolInfo(
        "switch", "gadgets", True, "gadgets/manifest.yaml tools.switch"
    )  # the manifest's word beats the tool's
    assert catalog.info(tool("peek", True)).side_effects is True  # the tool beats the default
    assert catalog.info(tool("plain")) == ToolInfo(
        "plain", "gadgets", False, "gadgets/manifest.yaml side_effects"
    )
    assert catalog.info(tool("honk")) == ToolInfo("honk", "loud", True, "not declared")
    assert catalog.info(tool("current_time", False)).source == "core"


async def test_bundled_core_and_mcp_tools_are_marked_and_policy_lists_them(
    make_ext, settings_file, ext_root
):
    for bundled in ("kv", "memory", "scheduler", "builder_agent", "simple_agent"):
        install_extension(ext_root, bundled)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    demo = {"command": sys.executable, "args": [str(DEMO_SERVER)]}
    path = settings_file(
        policy={"profile": "safe", "rules": [{"tool": "kv_delete", "action": "deny"}]},
        mcp={"servers": {"demo": demo}},
    )
    grant_all(ext_root, path.parent / "data")  # as the user would
    async with running_kernel(path, model=ScriptedModel([])) as kernel:
        capture = kernel.loader.instance("capture")
        await capture.say("/policy")
        await capture.say("/status")
        await wait_for(lambda: len(capture._log()) == 2)
    [policy_text] = [text for _, _, text in capture._log() if text.startswith("Profile:")]
    [status_text] = [text for _, _, text in capture._log() if text.startswith("Uptime:")]
    tools = policy_text.split("Tools here (capture):\n")[1].splitlines()
    actions = {
        line.split(":")[0].strip(): line.split(":")[1].split("—")[0].strip() for line in tools
    }
    for name in (
        "kv_get",
        "kv_set",
        "remember",
        "recall",
        "forget",
        "schedule_once",
        "current_time",
        "list_extensions",
        "simple_agent",
        "lucky_number",
    ):
        assert actions[name] == "allow", (name, policy_text)
    for name in ("request_restart", "builder_agent", "shout"):
        assert actions[name] == "ask", (name, policy_text)
    assert actions["kv_delete"] == "deny"
    assert "Profile: safe" in policy_text and "1. kv_delete: deny" in policy_text
    assert "shout: ask — profile safe: side effects (MCP tool without annotations)" in policy_text
    assert "Consent: profile safe, 1 rule(s), 0 always allowed, 0 question(s) waiting" in (
        status_text
    )


def test_doctor_shows_the_profile(settings_file, capsys):
    from core.cli.doctor import run_doctor

    run_doctor(load_settings(settings_file(policy={"profile": "full_auto"})))
    out = capsys.readouterr().out
    assert "consent: profile full_auto, 0 rule(s), questions time out after 600 s" in out


ISOLATED_TOOLS = ext_code(
    header="""
    from agents import function_tool
    from core.extensions.sdk import side_effects
    """,
    body="""
    def get_tools(self):
        @function_tool
        def peek() -> str:
            "Look."
            return "seen"

        @function_tool
        def poke() -> str:
            "Poke."
            return "poked"

        return [side_effects(peek, False), poke]
    """,
)


async def test_an_isolated_extensions_tools_carry_their_declaration_across(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("probe", ISOLATED_TOOLS, {"isolation": "process"})
    async with running_kernel(settings_file(policy={"profile": "safe"})) as kernel:
        capture = kernel.loader.instance("capture")
        await capture.say("/policy")
        await wait_for(lambda: capture._log())
    text = capture._log()[0][2]
    assert "peek: allow — profile safe: no side effects (declared by the tool)" in text
    assert "poke: ask — profile safe: side effects (not declared)" in text
