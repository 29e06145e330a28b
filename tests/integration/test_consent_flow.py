"""Consent through a real kernel and a scripted model (ADR 0021): in ``safe`` a
side-effecting call waits for the user's answer — given with ``/approve``,
``/deny``, a typed "yes", or not at all — and runs only once approved; a
denial, a timeout and a new message reach the model as denials; ``always``
records a grant that ``/policy`` shows and revokes; a ``deny`` rule never
runs the tool; the before hooks run before the question, so the user
approves the final arguments and a call a hook denies is never asked."""

from __future__ import annotations

import json
import re

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, CONVERSING, running_kernel, wait_for
from support.rocket_ext import ROCKETS

GUARD = ext_code(
    header="from core.extensions.contract import ToolDecision",
    body="""
    async def before_tool_call(self, call, turn):
        if call.arguments.get("target") == "sun":
            return ToolDecision.deny("too hot")
        if call.arguments.get("target") == "mars?":
            return ToolDecision.modify({"target": "mars"})
        return None
    """,
)


@pytest.fixture
def consent_kernel(make_ext, settings_file):
    def build(model, **policy):
        make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
        make_ext("rockets", ROCKETS)
        make_ext("guard", GUARD, CONVERSING)
        path = settings_file(channels={"default": "capture"}, policy={"profile": "safe", **policy})
        return running_kernel(path, model=model)

    return build


def sent(kernel) -> list[str]:
    return [text for _, _, text in kernel.loader.instance("capture")._log()]


def launched(kernel) -> list[str]:
    return kernel.loader.instance("rockets").log()


async def say(kernel, text: str) -> None:
    await kernel.loader.instance("capture").say(text)


async def question(kernel, n: int = 1) -> str:
    """The id of the n-th question the capture channel was sent."""
    await wait_for(lambda: len([t for t in sent(kernel) if "/approve " in t]) >= n)
    text = [t for t in sent(kernel) if "/approve " in t][n - 1]
    return re.search(r"/approve (\w+)", text).group(1)


def last_tool_output(model: ScriptedModel) -> str:
    items = [i for i in model.calls[-1].input if isinstance(i, dict)]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    return str(outputs[-1]["output"])


async def test_side_effecting_call_waits_for_approve_then_runs_once(consent_kernel):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    async with consent_kernel(model) as kernel:
        await say(kernel, "launch at the moon")
        qid = await question(kernel)
        assert 'Allow launch(target="moon")?' in sent(kernel)[0]
        assert launched(kernel) == []  # nothing ran while waiting
        await say(kernel, f"/approve {qid}")
        await wait_for(lambda: "Launched at the moon." in sent(kernel))
        assert launched(kernel) == ["moon"]
        assert "Allowed once" in sent(kernel)[1]
        assert last_tool_output(model) == "launched at moon"
        frames = await kernel.bus.journal.recent_events(50, topic="hook.approval")
    model.assert_complete()
    decisions = [(f.payload["decision"], f.payload["tool"]) for f in frames]
    assert ("asked", "launch") in decisions and ("approved", "launch") in decisions


async def test_deny_reaches_the_model_and_the_tool_never_runs(consent_kernel):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("OK, I did not launch.")],
        ]
    )
    async with consent_kernel(model) as kernel:
        await say(kernel, "launch")
        qid = await question(kernel)
        await say(kernel, f"/deny {qid}")
        await wait_for(lambda: "OK, I did not launch." in sent(kernel))
        assert launched(kernel) == []
    assert last_tool_output(model) == "not run: the user denied launch."


async def test_no_answer_in_time_is_a_denial_and_the_user_is_told(consent_kernel):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("You did not answer, so nothing was launched.")],
        ]
    )
    async with consent_kernel(model, approval_timeout_s=0.3) as kernel:
        await say(kernel, "launch")
        await question(kernel)
        await wait_for(lambda: "You did not answer, so nothing was launched." in sent(kernel))
        assert launched(kernel) == []
        assert any("Not answered in time" in text for text in sent(kernel))
    assert "did not answer the approval question for launch" in last_tool_output(model)


async def test_a_typed_yes_answers_and_a_new_subject_denies(consent_kernel):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched.")],
            [function_call("launch", {"target": "venus"}, call_id="c2")],
            [assistant_message("Not launched.")],
            [assistant_message("It is sunny.")],
        ]
    )
    async with consent_kernel(model) as kernel:
        await say(kernel, "launch at the moon")
        await question(kernel, 1)
        await say(kernel, "yes")
        await wait_for(lambda: "Launched." in sent(kernel))
        await say(kernel, "launch at venus")
        await question(kernel, 2)
        await say(kernel, "what is the weather?")
        await wait_for(lambda: "It is sunny." in sent(kernel))
        assert launched(kernel) == ["moon"]
        replies = sent(kernel)
        assert replies.index("Not launched.") < replies.index("It is sunny.")  # in order
    model.assert_complete()


async def test_always_allow_records_a_grant_shown_and_revoked_by_policy(consent_kernel):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("One.")],
            [function_call("launch", {"target": "mars"}, call_id="c2")],
            [assistant_message("Two.")],
        ]
    )
    async with consent_kernel(model) as kernel:
        await say(kernel, "launch at the moon")
        qid = await question(kernel)
        await say(kernel, f"/approve {qid} always")
        await wait_for(lambda: "One." in sent(kernel))
        await say(kernel, "and mars")  # no question this time
        await wait_for(lambda: "Two." in sent(kernel))
        assert launched(kernel) == ["moon", "mars"]
        await say(kernel, "/policy")
        await wait_for(lambda: any(t.startswith("Profile: safe") for t in sent(kernel)))
        policy = next(t for t in sent(kernel) if t.startswith("Profile: safe"))
        assert "launch: allow — always allowed by capture:u1" in policy
        assert "peek: allow" in policy and "request_restart: ask" in policy
        await say(kernel, "/policy revoke launch")
        await wait_for(lambda: "launch is no longer always allowed; it asks again." in sent(kernel))


async def test_a_deny_rule_never_runs_the_tool_and_full_auto_never_asks(consent_kernel):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Refused by policy.")],
            [function_call("request_restart", {"reason": "x"}, call_id="c2")],
            [assistant_message("done")],
        ]
    )
    rules = [{"tool": "rockets:*", "action": "deny"}, {"tool": "request_restart", "action": "deny"}]
    async with consent_kernel(model, profile="full_auto", rules=rules) as kernel:
        await say(kernel, "launch")
        await wait_for(lambda: "Refused by policy." in sent(kernel))
        assert launched(kernel) == []
        assert "denied by policy (rule 1 (rockets:*))" in last_tool_output(model)
        await say(kernel, "restart")
        await wait_for(lambda: "done" in sent(kernel))
        assert kernel.restart_requested is None
    assert not any("/approve" in text for text in sent(kernel))


async def test_full_auto_runs_side_effecting_tools_without_asking(consent_kernel):
    model = ScriptedModel(
        [[function_call("launch", {"target": "moon"}, call_id="c1")], [assistant_message("Go.")]]
    )
    async with consent_kernel(model, profile="full_auto") as kernel:
        await say(kernel, "launch")
        await wait_for(lambda: "Go." in sent(kernel))
        assert launched(kernel) == ["moon"]
    assert sent(kernel) == ["Go."]


async def test_hooks_run_before_the_question_so_the_final_arguments_are_asked(consent_kernel):
    model = ScriptedModel(
        [
            [
                function_call("launch", {"target": "sun"}, call_id="c1"),
                function_call("launch", {"target": "mars?"}, call_id="c2"),
            ],
            [assistant_message("Mars done, the sun refused.")],
        ]
    )
    async with consent_kernel(model) as kernel:
        await say(kernel, "launch at the sun and mars")
        qid = await question(kernel)
        asked = [t for t in sent(kernel) if "/approve" in t]
        assert len(asked) == 1 and 'Allow launch(target="mars")?' in asked[0]  # never the sun
        await say(kernel, f"/approve {qid}")
        await wait_for(lambda: "Mars done, the sun refused." in sent(kernel))
        assert launched(kernel) == ["mars"]
    outputs = {
        i["call_id"]: i["output"]
        for i in model.calls[-1].input
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    }
    assert outputs == {"c1": "denied by guard: too hot", "c2": "launched at mars"}


async def test_only_the_conversation_that_was_asked_can_answer(consent_kernel):
    model = ScriptedModel(
        [[function_call("launch", {"target": "moon"}, call_id="c1")], [assistant_message("ok")]]
    )
    async with consent_kernel(model) as kernel:
        await say(kernel, "launch")
        qid = await question(kernel)
        await kernel.loader.instance("capture").say(f"/approve {qid}", user_id="intruder")
        await wait_for(lambda: any("Only the person who was asked" in t for t in sent(kernel)))
        assert launched(kernel) == []
        await say(kernel, f"/approve {qid}")
        await wait_for(lambda: "ok" in sent(kernel))
        assert launched(kernel) == ["moon"]
        history = json.dumps(kernel.loader.instance("capture")._log())
    assert history.count("launched") == 0  # the tool's output stays with the model


async def test_a_run_without_a_conversation_cannot_ask_so_it_is_denied(consent_kernel):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("I could not launch without asking.")],
        ]
    )
    async with consent_kernel(model) as kernel:
        assert kernel.router is not None
        reply = await kernel.router.invoke_agent("launch at the moon", source="scheduler")
        assert reply == "I could not launch without asking."
        assert launched(kernel) == []
        assert sent(kernel) == []  # nobody was asked
    assert last_tool_output(model).startswith("denied: launch needs the user's approval")


@pytest.mark.parametrize("agent_side_effects", [True, False])
async def test_an_agents_own_asking_tools_run_only_inside_an_approved_call(
    consent_kernel, make_ext, agent_side_effects
):
    make_ext(
        "pilot",
        manifest={
            "description": "Flies rockets.",
            "agent": {"uses_tools": ["rockets"], "instructions": "Fly."},
            "side_effects": agent_side_effects,
        },
    )
    model = ScriptedModel(
        [
            [function_call("pilot", {"task": "launch at the moon"}, call_id="a1")],
            [function_call("launch", {"target": "moon"}, call_id="n1")],  # the agent's run
            [assistant_message("pilot done")],
            [assistant_message("All done.")],
        ]
    )
    async with consent_kernel(model) as kernel:
        await say(kernel, "fly")
        if agent_side_effects:  # the agent call itself asks; approved, its launch runs
            qid = await question(kernel)
            assert 'Allow pilot(task="launch at the moon")?' in sent(kernel)[0]
            await say(kernel, f"/approve {qid}")
        await wait_for(lambda: "All done." in sent(kernel))
        ran = launched(kernel)
    inner = [
        i["output"]
        for i in model.calls[2].input
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]
    if agent_side_effects:
        assert ran == ["moon"] and inner == ["launched at moon"]
    else:  # allowed without asking: nobody approved the launch inside it
        assert ran == [] and inner[0].startswith("denied: launch needs the user's approval")


def test_an_answer_counts_from_the_conversation_asked_whatever_its_reply_tag():
    """The HTTP API tags each request's address (ADR 0024): its next request, with
    another tag, may answer; another conversation or channel still may not."""
    from core.kernel.consent import Responder

    asked = ("http_api", "ops#reply:r1", "ops#reply:r1")
    assert Responder("http_api", "ops#reply:r2").was_asked(*asked)
    assert Responder("http_api", "ops").was_asked(*asked)
    assert not Responder("http_api", "dev#reply:r1").was_asked(*asked)
    assert not Responder("telegram", "ops#reply:r1").was_asked(*asked)
    # in a group the member who asked, not another member of the same chat
    group = ("telegram", "-100", "7")
    assert Responder("telegram", "-100", "7").was_asked(*group)
    assert not Responder("telegram", "-100", "8").was_asked(*group)
