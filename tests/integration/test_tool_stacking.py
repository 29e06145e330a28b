"""Tool stacking (seed 004, issue 16; ADR 0027).

Providers of one tool name form a stack: among the providers the user trusts
with the name — the established one, one whose grant replaces it, one
``tools.overrides`` names — the highest manifest priority is active, equal
priority the most recently installed. Everyone else is shadowed below them,
whatever their priority (ADR 0018: ``aaa`` cannot take ``remember`` from
memory by declaring priority 100). ``tools.overrides`` disables a tool or a
provider's version, or sets a provider's priority.
"""

from __future__ import annotations

import json
import logging

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from core.cli.report import collect_report
from core.config import SettingsError, ToolOverride, load_settings
from core.extensions.loading.names import NamePolicy
from core.extensions.loading.stacking import stack_names
from core.kernel.commands.builtin import status_text
from support.bundled import tool_output
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

# ------------------------------------------------------------ the rule, in isolation


def resolve(
    providers: list[str],
    *,
    ranks: dict[str, float | None],
    priorities: dict[str, int] | None = None,
    replaces: dict[str, dict[str, str]] | None = None,
    overrides: dict[str, dict] | None = None,
):
    """Stack the name ``t`` offered by ``providers`` (in load order)."""
    policy = NamePolicy(lambda o: ranks.get(o), lambda o: (replaces or {}).get(o, {}))
    sources = [(owner, ["t"]) for owner in providers]
    parsed = {k: ToolOverride.model_validate(v) for k, v in (overrides or {}).items()}
    result = stack_names(
        sources, lambda name: name, policy, lambda o: (priorities or {}).get(o, 50), parsed
    )
    return result


def order(result) -> list[str | None]:
    stack = result.stacks["t"]
    return [stack.active, *stack.shadowed]


def test_equal_priority_the_most_recently_installed_wins():
    # memory bundled (rank 0), weather granted at t=100, notes at t=200: all trusted only
    # when the grant says they replace it, so here the established one stays on top
    assert order(
        resolve(["notes", "memory", "weather"], ranks={"memory": 0, "weather": 100, "notes": 200})
    ) == [
        "memory",
        "notes",
        "weather",
    ]
    everyone_may = {o: {"t": "memory"} for o in ("weather", "notes")}
    assert order(
        resolve(
            ["notes", "memory", "weather"],
            ranks={"memory": 0, "weather": 100, "notes": 200},
            replaces=everyone_may,
        )
    ) == ["notes", "weather", "memory"]


def test_equal_rank_falls_back_to_load_order():
    # two bundled providers (same rank): the one loaded later is the more recent
    result = resolve(
        ["alpha", "beta"], ranks={"alpha": 0, "beta": 0}, replaces={"beta": {"t": "alpha"}}
    )
    assert order(result) == ["beta", "alpha"]


def test_higher_priority_wins_among_trusted_providers():
    result = resolve(
        ["early", "late"],
        ranks={"early": 0, "late": 100},
        priorities={"early": 80, "late": 50},
        replaces={"late": {"t": "early"}},
    )
    assert order(result) == ["early", "late"]
    assert result.notes == ["tool t: early (priority 80) is active; shadowed: late (50)"]
    assert result.warnings == []


def test_an_untrusted_provider_stays_below_the_established_one_whatever_its_priority():
    ranks = {"memory": 0, "aaa": 500}
    result = resolve(["aaa", "memory"], ranks=ranks, priorities={"aaa": 100})
    assert order(result) == ["memory", "aaa"]
    assert result.warnings == [
        "extension aaa: t is already provided by memory; not replacing it without a grant "
        "that says so (shadowed; tools.overrides can change that)"
    ]
    # memory gone (disabled, failed): aaa is the established provider of what is left
    assert order(resolve(["aaa"], ranks=ranks, priorities={"aaa": 100})) == ["aaa"]


def test_the_kernels_own_tools_are_never_shadowed():
    result = resolve(
        ["core", "clock"],
        ranks={"clock": 0},
        priorities={"clock": 100},
        replaces={"clock": {"t": "core"}},
    )
    assert order(result) == ["core", "clock"]
    assert result.warnings[0].startswith("extension clock: t is already provided by core")


def test_overrides_disable_a_tool_or_a_provider_or_change_a_priority():
    ranks = {"memory": 0, "aaa": 500}
    gone = resolve(["aaa", "memory"], ranks=ranks, overrides={"t": {"disabled": True}})
    assert gone.stacks["t"].active is None and gone.stacks["t"].disabled == ("aaa", "memory")
    assert gone.sources == [("aaa", []), ("memory", [])]

    without_memory = resolve(
        ["aaa", "memory"], ranks=ranks, overrides={"t": {"provider": "memory", "disabled": True}}
    )
    assert order(without_memory) == ["aaa"]
    assert without_memory.stacks["t"].disabled == ("memory",)

    # the user names aaa with a priority: that is the trust a grant would give
    preferred = resolve(
        ["aaa", "memory"], ranks=ranks, overrides={"t": {"provider": "aaa", "priority": 90}}
    )
    assert order(preferred) == ["aaa", "memory"]
    assert preferred.warnings == []
    demoted = resolve(
        ["aaa", "memory"],
        ranks=ranks,
        replaces={"aaa": {"t": "memory"}},
        overrides={"t": {"provider": "aaa", "priority": 10}},
    )
    assert order(demoted) == ["memory", "aaa"]


def test_overrides_that_change_nothing_are_reported():
    result = resolve(
        ["memory"],
        ranks={"memory": 0},
        overrides={
            "t": {"provider": "nosuch", "priority": 60},
            "ghost": {"disabled": True},
        },
    )
    assert result.warnings == [
        "tools.overrides.t: 'nosuch' does not provide 't' (its providers: memory)",
        "tools.overrides.ghost: no extension or kernel tool is named 'ghost' "
        "(MCP tools: use allowed_tools)",
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"priority": 70}, "priority needs provider"),
        ({"provider": "a"}, "provider 'a' needs a priority or disabled: true"),
        ({"provider": "a", "priority": 70, "disabled": True}, "not both"),
        ({"provider": "a", "priority": 101}, "less than or equal to 100"),
        ({"disabled": True, "enabled": False}, "enabled: Extra inputs are not permitted"),
    ],
)
def test_bad_overrides_name_the_key(tmp_path, entry, message):
    path = tmp_path / "settings.yaml"
    path.write_text(json.dumps({"tools": {"overrides": {"remember": entry}}}))
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    assert "tools.overrides.remember" in str(caught.value)
    assert message in str(caught.value)


# ------------------------------------------------------------ in a kernel

LOOKUP = ext_code(
    header="""
    from agents import function_tool
    """,
    body="""
    def get_tools(self):
        me = self.ctx.extension_id

        @function_tool
        def lookup(key: str) -> str:
            "Look a key up."
            return f"{me}: {key}"

        return [lookup]
    """,
)


@pytest.fixture
def three_lookups(make_ext):
    """Granted in this order (so installed in this order): bundled-like first."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("zeta", LOOKUP, {"priority": 50})
    make_ext("alpha", LOOKUP, {"priority": 90})
    make_ext("mid", LOOKUP, {"priority": 50})


async def ask_lookup(kernel, model: ScriptedModel) -> str:
    capture = kernel.loader.instance("capture")
    await capture.say("look up k")
    await wait_for(lambda: capture.sent)
    return tool_output(model, "c1")


def lookup_model() -> ScriptedModel:
    return ScriptedModel(
        [[function_call("lookup", {"key": "k"}, call_id="c1")], [assistant_message("done")]]
    )


async def test_the_established_provider_answers_and_the_others_are_shown_shadowed(
    three_lookups, settings_file, caplog
):
    path = settings_file(channels={"default": "capture"})
    model = lookup_model()
    caplog.set_level(logging.INFO, logger="core.kernel.tools")
    async with running_kernel(path, model=model) as kernel:
        assert await ask_lookup(kernel, model) == "zeta: k"  # granted first: established
        status = await status_text(kernel.status)
    assert (
        "Tools with several providers (active first):\n  lookup: zeta (shadowed: alpha, mid)"
        in (status)
    )
    assert "extension alpha: lookup is already provided by zeta" in caplog.text
    report = {r["id"]: r for r in await collect_report(load_settings(path))}
    expected = {"active": "zeta", "shadowed": ["alpha", "mid"], "disabled": []}
    for ext_id in ("zeta", "alpha", "mid"):
        assert report[ext_id]["tool_stacks"] == {"lookup": expected}
    assert report["capture"]["tool_stacks"] == {}


async def test_overrides_in_settings_pick_and_remove_providers(three_lookups, settings_file):
    path = settings_file(
        channels={"default": "capture"},
        tools={"overrides": {"lookup": {"provider": "mid", "priority": 95}}},
    )
    model = lookup_model()
    async with running_kernel(path, model=model) as kernel:
        assert await ask_lookup(kernel, model) == "mid: k"
        assert kernel.tool_stacks().stacks["lookup"].shadowed == ("zeta", "alpha")

    path = settings_file(
        channels={"default": "capture"},
        tools={"overrides": {"lookup": {"provider": "zeta", "disabled": True}}},
    )
    async with running_kernel(path) as kernel:
        stack = kernel.tool_stacks().stacks["lookup"]
        # alpha and mid: mid was granted after alpha, so alpha is now the established one
        assert (stack.active, stack.shadowed, stack.disabled) == ("alpha", ("mid",), ("zeta",))

    path = settings_file(
        channels={"default": "capture"}, tools={"overrides": {"lookup": {"disabled": True}}}
    )
    async with running_kernel(path) as kernel:
        assert "lookup" not in {t.name for t in kernel.orchestrator.current.tools}
        assert "  lookup: disabled (tools.overrides)" in await status_text(kernel.status)


async def test_grants_that_replace_the_name_let_priority_and_recency_decide(
    three_lookups, settings_file, ext_root, tmp_path
):
    from core.extensions.access.grant_store import GrantStore
    from core.extensions.access.grants import GrantRequest
    from core.extensions.loading.code_digest import code_digest
    from core.extensions.loading.manifest import load_manifest

    store = GrantStore(tmp_path / "data")
    for ext_id in ("alpha", "mid"):
        request = GrantRequest.from_manifest(
            load_manifest(ext_root / ext_id),
            default_isolation="inprocess",
            code=code_digest(ext_root / ext_id),
        )
        store.record(request, replaces={"lookup": "zeta"})  # re-granted: now the newest
    async with running_kernel(settings_file(channels={"default": "capture"})) as kernel:
        stack = kernel.tool_stacks().stacks["lookup"]
        # all three trusted: alpha's priority 90 wins; mid (50, granted last) beats zeta (50)
        assert (stack.active, stack.shadowed) == ("alpha", ("mid", "zeta"))
