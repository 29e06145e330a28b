"""``hooks.commands``: real programs as hooks — JSON in, JSON out, the Claude Code
shapes understood, failures and deadlines contained (docs/command-hooks.md).

Each test writes a small Python script to ``tmp_path`` and runs it with
``sys.executable``; the non-tool hooks are called through ``TurnHooks`` like
the turn runner calls them, the tool hooks directly (as the tool interceptor
will).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from core.config import HooksSettings, SettingsError, load_settings
from core.extensions.contract import (
    AfterToolCallHook,
    BeforeToolCallHook,
    InputMessagesHook,
    LlmOutputHook,
    PlainTextHook,
    SessionEndHook,
    SessionStartHook,
    ShortCircuit,
    ToolCall,
    ToolDecision,
    TurnContext,
    TurnEndHook,
    TurnOutcome,
    TurnStartHook,
)
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.signatures import check_signatures
from core.kernel.hooks import (
    CommandHookError,
    FrameRecorder,
    HookCaller,
    HookEntry,
    HookRegistry,
    TurnHooks,
    command_hook_entries,
)
from core.kernel.hooks.command_process import STDOUT_LIMIT
from core.kernel.runner import Kernel
from core.runtime import REDACTOR
from support.harness import wait_for
from support.hooks_kit import FrameLog
from support.kernel_process import alive

TURN = TurnContext(channel_id="cli", user_id="alice", session_id="s-1", turn_id="t-1")
MESSAGES = [{"role": "user", "content": "hello there"}]


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    """A hook program: ``event`` is the JSON it was given on stdin."""
    path = tmp_path / f"{name}.py"
    prelude = "import json, os, sys\nevent = json.load(sys.stdin)\n"
    path.write_text(prelude + textwrap.dedent(body))
    return [sys.executable, str(path)]


def hooks(tmp_path: Path, *commands: dict[str, Any], timeout_s: float = 30.0) -> HooksSettings:
    return HooksSettings.model_validate({"timeout_s": timeout_s, "commands": list(commands)})


def entries(settings: HooksSettings, tmp_path: Path) -> list[tuple[Capability, HookEntry]]:
    return command_hook_entries(settings, cwd=tmp_path)


def target(settings: HooksSettings, tmp_path: Path) -> Any:
    """The one configured command's target, to call directly."""
    [(_, entry)] = entries(settings, tmp_path)
    return entry.target


def pipeline(settings: HooksSettings, tmp_path: Path) -> tuple[TurnHooks, FrameLog]:
    """TurnHooks with no extensions at all: only the configured commands."""
    made = entries(settings, tmp_path)
    registry = HookRegistry(lambda: [], extra=lambda: made)
    journal = FrameLog()
    return TurnHooks(registry, HookCaller(settings.timeout_s), FrameRecorder(journal)), journal


# ------------------------------------------------------------------ tool hooks


async def test_a_pre_tool_hook_reads_claude_code_input_and_blocks(tmp_path: Path):
    argv = script(
        tmp_path,
        "guard",
        """
        with open("seen.json", "w") as f:
            json.dump(event, f)
        if "rm " in event["tool_input"].get("command", ""):
            print(json.dumps({"decision": "block", "reason": "no rm, please"}))
        """,
    )
    guard = target(hooks(tmp_path, {"hook": "before_tool_call", "command": argv}), tmp_path)

    decision = await guard.before_tool_call(ToolCall("shell", {"command": "rm -rf ~"}, "c1"), TURN)
    assert decision == ToolDecision.deny("no rm, please")
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["hook_event_name"] == "PreToolUse" and seen["hook"] == "before_tool_call"
    assert seen["tool_name"] == "shell" and seen["tool_input"] == {"command": "rm -rf ~"}
    assert (seen["tool_use_id"], seen["session_id"], seen["turn_id"]) == ("c1", "s-1", "t-1")
    assert (seen["channel_id"], seen["user_id"], seen["cwd"]) == ("cli", "alice", str(tmp_path))

    assert await guard.before_tool_call(ToolCall("shell", {"command": "ls"}), TURN) is None


async def test_exit_2_blocks_with_stderr_as_the_reason(tmp_path: Path):
    argv = script(tmp_path, "guard", 'sys.stderr.write("writes are off today\\n")\nsys.exit(2)')
    guard = target(hooks(tmp_path, {"hook": "before_tool_call", "command": argv}), tmp_path)

    decision = await guard.before_tool_call(ToolCall("write_file", {"path": "a"}), TURN)

    assert decision == ToolDecision.deny("writes are off today")


async def test_a_hook_rewrites_the_tool_input(tmp_path: Path):
    argv = script(
        tmp_path,
        "jail",
        """
        path = event["tool_input"]["path"]
        if not path.startswith("/srv/"):
            print(json.dumps({"decision": "modify", "tool_input": {"path": "/srv/" + path}}))
        """,
    )
    jail = target(hooks(tmp_path, {"hook": "before_tool_call", "command": argv}), tmp_path)

    decision = await jail.before_tool_call(ToolCall("read_file", {"path": "notes.txt"}), TURN)

    assert decision == ToolDecision.modify({"path": "/srv/notes.txt"})


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            {"permissionDecision": "deny", "permissionDecisionReason": "not on weekends"},
            ToolDecision.deny("not on weekends"),
        ),
        (
            {"permissionDecision": "allow", "updatedInput": {"query": "cats"}},
            ToolDecision.modify({"query": "cats"}),
        ),
        ({"permissionDecision": "ask"}, ToolDecision.allow()),  # no consent flow yet
    ],
)
async def test_the_hook_specific_output_shape(
    tmp_path: Path, answer: dict[str, Any], expected: ToolDecision
):
    body = f"print(json.dumps({{'hookSpecificOutput': {answer!r}}}))"
    argv = script(tmp_path, "policy", body)
    policy = target(hooks(tmp_path, {"hook": "before_tool_call", "command": argv}), tmp_path)

    assert await policy.before_tool_call(ToolCall("search", {"query": "dogs"}), TURN) == expected


async def test_a_matcher_limits_a_hook_to_the_tools_it_names(tmp_path: Path):
    argv = script(tmp_path, "audit", 'open("calls.log", "a").write(event["tool_name"] + "\\n")')
    settings = hooks(
        tmp_path,
        {"hook": "before_tool_call", "command": argv, "matcher": "shell|write_file"},
        {"hook": "after_tool_call", "command": argv, "matcher": "*"},
    )
    made = dict(entries(settings, tmp_path))
    before = made[Capability.BEFORE_TOOL_CALL]
    assert (before.owner, made[Capability.AFTER_TOOL_CALL].owner) == (
        "command:audit",
        "command:audit-2",
    )

    for tool in ("shell", "read_file", "write_file", "shell_extra"):
        if before.applies_to_tool(tool):  # what the tool interceptor checks
            await before.target.before_tool_call(ToolCall(tool, {}), TURN)

    assert (tmp_path / "calls.log").read_text().split() == ["shell", "write_file"]
    assert made[Capability.AFTER_TOOL_CALL].applies_to_tool("anything")


async def test_a_post_tool_hook_replaces_or_withholds_the_result(tmp_path: Path):
    argv = script(
        tmp_path,
        "scrub",
        """
        if "password" in event["tool_response"]:
            print(json.dumps({"decision": "block", "reason": "it held a password"}))
        else:
            print(json.dumps({"tool_response": event["tool_response"].upper()}))
        """,
    )
    scrub = target(hooks(tmp_path, {"hook": "after_tool_call", "command": argv}), tmp_path)

    assert await scrub.after_tool_call(ToolCall("cat", {}), "plain text", TURN) == "PLAIN TEXT"
    withheld = await scrub.after_tool_call(ToolCall("cat", {}), "password: x", TURN)
    assert withheld == "withheld by command:scrub: it held a password"


# ------------------------------------------------------------------ turn hooks


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            'print(json.dumps({"messages": [{"role": "user", "content": event["prompt"].upper()}]}))',
            [{"role": "user", "content": "HELLO THERE"}],
        ),
        (
            'print(json.dumps({"decision": "block", "reason": "Not during focus time."}))',
            ShortCircuit("Not during focus time."),
        ),
        ('print(json.dumps({"reply": "Out of office."}))', ShortCircuit("Out of office.")),
        ('sys.stderr.write("Blocked by policy.")\nsys.exit(2)', ShortCircuit("Blocked by policy.")),
    ],
)
async def test_an_input_hook_rewrites_the_messages_or_answers_instead(
    tmp_path: Path, body: str, expected: Any
):
    argv = script(tmp_path, "gate", body)
    turn_hooks, journal = pipeline(
        hooks(tmp_path, {"hook": "on_input_messages", "command": argv}), tmp_path
    )

    assert await turn_hooks.input_messages(MESSAGES, TURN) == expected

    [(topic, frame)] = journal.frames
    assert topic in ("hook.input", "hook.short_circuit")
    assert frame["owner"] == "command:gate" and frame["before"] == MESSAGES


async def test_output_hooks_rewrite_the_answer_in_priority_order(tmp_path: Path):
    shout = script(tmp_path, "shout", 'print(json.dumps({"output": event["output"].upper()}))')
    sign = script(tmp_path, "sign", 'print(json.dumps({"text": event["text"] + " -- bot"}))')
    star = script(tmp_path, "star", 'print(json.dumps({"text": "* " + event["text"]}))')
    settings = hooks(
        tmp_path,
        {"hook": "on_llm_output", "command": shout},
        {"hook": "on_plain_text", "command": sign, "priority": 10},
        {"hook": "on_plain_text", "command": star, "priority": 90},
    )
    turn_hooks, _ = pipeline(settings, tmp_path)

    rendered = await turn_hooks.render_output("all done", TURN)

    assert rendered.text == "* ALL DONE -- bot"


async def test_a_turn_end_hook_is_told_how_the_turn_ended(tmp_path: Path):
    argv = script(
        tmp_path, "notify", 'json.dump(event, open("end.json", "w"))\nprint("ignored, not JSON")'
    )
    turn_hooks, _ = pipeline(hooks(tmp_path, {"hook": "on_turn_end", "command": argv}), tmp_path)

    await turn_hooks.turn_ended(TURN, TurnOutcome("answered", "Hi!", 12.5))

    seen = json.loads((tmp_path / "end.json").read_text())
    assert seen["hook_event_name"] == "Stop"
    assert seen["outcome"] == {"status": "answered", "reply": "Hi!", "duration_ms": 12.5}


# ------------------------------------------------------------------ containment


async def test_a_late_hook_is_killed_with_its_children_and_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    argv = script(
        tmp_path,
        "slow",
        """
        import subprocess, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open("pids.tmp", "w").write(f"{os.getpid()} {child.pid}")
        os.rename("pids.tmp", "pids")
        time.sleep(60)
        print(json.dumps({"messages": []}))
        """,
    )
    settings = hooks(tmp_path, {"hook": "on_input_messages", "command": argv, "timeout_s": 3})
    turn_hooks, journal = pipeline(settings, tmp_path)

    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="core.kernel.hooks"):
        assert await turn_hooks.input_messages(MESSAGES, TURN) == MESSAGES
    assert time.monotonic() - started < 20

    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    await wait_for(lambda: not any(alive(pid) for pid in pids))
    assert journal.frames == []
    assert "command:slow took longer than 3 s" in caplog.text


async def test_garbage_or_failure_is_contained_and_logged_without_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    REDACTOR.add(["hunter2-secret"])
    garbage = script(tmp_path, "garbage", 'print("this is not JSON")')
    crash = script(
        tmp_path, "crash", 'sys.stderr.write("token hunter2-secret bad\\n")\nsys.exit(3)'
    )
    flood = script(tmp_path, "flood", f'sys.stdout.write("x" * {STDOUT_LIMIT + 10})')
    settings = hooks(
        tmp_path,
        {"hook": "on_llm_output", "command": garbage},
        {"hook": "on_llm_output", "command": crash},
        {"hook": "on_llm_output", "command": flood},
    )
    turn_hooks, journal = pipeline(settings, tmp_path)

    with caplog.at_level(logging.ERROR, logger="core.kernel.hooks"):
        assert (await turn_hooks.render_output("the answer", TURN)).text == "the answer"

    assert journal.frames == []
    assert "command:garbage failed: CommandHookError: printed something other than JSON" in (
        caplog.text
    )
    assert "command:crash failed: CommandHookError: exited with status 3: token *** bad" in (
        caplog.text
    )
    assert f"command:flood failed: CommandHookError: wrote more than {STDOUT_LIMIT}" in caplog.text
    assert "hunter2-secret" not in caplog.text


async def test_a_program_that_does_not_exist_is_a_clear_failure(tmp_path: Path):
    missing = target(
        hooks(tmp_path, {"hook": "before_tool_call", "command": "./no-such-hook --x"}), tmp_path
    )
    with pytest.raises(CommandHookError, match="cannot start './no-such-hook'"):
        await missing.before_tool_call(ToolCall("shell", {}), TURN)


async def test_the_program_gets_no_secrets_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    REDACTOR.add(["declared-secret-value"])
    monkeypatch.setenv("HOOK_TEST_PLAIN", "visible")
    monkeypatch.setenv("HOOK_TEST_FROM_ENV_FILE", "kept in .env")
    monkeypatch.setenv("HOOK_TEST_DECLARED", "declared-secret-value")
    argv = script(tmp_path, "env", 'json.dump(dict(os.environ), open("env.json", "w"))')
    settings = hooks(tmp_path, {"hook": "on_turn_start", "command": argv})
    [(_, entry)] = command_hook_entries(
        settings, cwd=tmp_path, withheld={"HOOK_TEST_FROM_ENV_FILE"}
    )

    await entry.target.on_turn_start(TURN)

    env = json.loads((tmp_path / "env.json").read_text())
    assert env["HOOK_TEST_PLAIN"] == "visible"
    assert "HOOK_TEST_FROM_ENV_FILE" not in env and "HOOK_TEST_DECLARED" not in env


# ------------------------------------------------------------------ settings


async def test_the_kernel_runs_commands_next_to_its_settings_file(
    settings_file: Any, tmp_path: Path
):
    (tmp_path / "hooks").mkdir()
    script(tmp_path / "hooks", "guard", 'sys.stderr.write("from " + os.getcwd())\nsys.exit(2)')
    command = f"{shlex.quote(sys.executable)} hooks/guard.py"  # relative to settings.yaml
    path = settings_file(hooks={"commands": [{"hook": "before_tool_call", "command": command}]})
    kernel = Kernel(load_settings(path))

    [entry] = kernel.hook_registry.at(Capability.BEFORE_TOOL_CALL)
    decision = await entry.target.before_tool_call(ToolCall("shell", {}), TURN)

    assert entry.owner == "command:guard"
    assert decision == ToolDecision.deny(f"from {tmp_path}")


def test_every_target_has_the_protocol_signature(tmp_path: Path):
    protocols = {
        "on_turn_start": TurnStartHook,
        "on_turn_end": TurnEndHook,
        "on_session_start": SessionStartHook,
        "on_session_end": SessionEndHook,
        "on_input_messages": InputMessagesHook,
        "on_plain_text": PlainTextHook,
        "on_llm_output": LlmOutputHook,
        "before_tool_call": BeforeToolCallHook,
        "after_tool_call": AfterToolCallHook,
    }
    settings = hooks(tmp_path, *({"hook": h, "command": "true"} for h in protocols))
    made = entries(settings, tmp_path)
    for (point, entry), protocol in zip(made, protocols.values(), strict=True):
        assert point == Capability(protocol.__name__)
        assert isinstance(entry.target, protocol)
        check_signatures(entry.target, protocol)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            {"hook": "before_tool_call", "command": "true", "matcher": "shell("},
            "hooks.commands.1.matcher: not a regular expression",
        ),
        (
            {"hook": "on_turn_start", "command": "true", "matcher": "shell"},
            "hooks.commands.1.matcher: only before_tool_call and after_tool_call take a matcher",
        ),
        (
            {"hook": "on_turn_start", "command": "guard 'unclosed"},
            "hooks.commands.1.command: cannot be split into arguments",
        ),
        (
            {"hook": "on_turn_start", "command": "true", "name": "first"},
            "commands.1.name: 'first' is already the name of commands.0",
        ),
    ],
)
def test_a_bad_command_hook_is_a_settings_error_naming_the_field(
    settings_file: Any, command: dict[str, Any], message: str
):
    first = {"hook": "on_turn_end", "command": "true", "name": "first"}
    path = settings_file(hooks={"commands": [first, command]})

    with pytest.raises(SettingsError) as caught:
        load_settings(path)

    assert message in str(caught.value)
    assert os.fspath(path) in str(caught.value)
