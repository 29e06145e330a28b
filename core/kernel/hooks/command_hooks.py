"""``hooks.commands``: programs as hooks, for people who do not write Python.

Each configured command becomes a target with the hook method of its point,
with the protocol's signature, so the turn pipeline and the tool interceptor
call it exactly like an extension's hook (owner ``command:<name>``, its own
``priority``, ``matcher`` and ``timeout_s``). A call runs the program
(``command_process``) with one JSON object on stdin and reads its answer
(``command_answers``); docs/command-hooks.md is the user's reference.

Input: ``hook_event_name`` (the Claude Code event where there is one:
``PreToolUse``, ``PostToolUse``, ``UserPromptSubmit``, ``SessionStart``,
``SessionEnd``, and ``Stop`` for ``on_turn_end``; else ``TurnStart``,
``PlainText``, ``LlmOutput``), ``hook`` (Hearth's name), ``cwd``,
``session_id``, ``turn_id``, ``channel_id``, ``user_id``, ``agent_id``, and
per point ``tool_name`` / ``tool_input`` / ``tool_use_id`` /
``tool_response``, ``messages`` + ``prompt``, ``text`` + ``direction``,
``output``, ``outcome``, ``reason``.

The working directory is the directory of the settings file (the project
root without one), so ``command: python3 hooks/guard.py`` next to
``settings.yaml`` works wherever the kernel was started.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from core.config import PROJECT_ROOT, CommandHook, HookPoint, HooksSettings
from core.extensions.contract import (
    HOOK_SPECS,
    ShortCircuit,
    ToolCall,
    ToolDecision,
    TurnContext,
    TurnOutcome,
)
from core.extensions.loading.capabilities import Capability
from core.kernel.hooks.command_answers import (
    Answer,
    check_status,
    input_answer,
    log_stderr,
    read_answer,
    text_answer,
    tool_decision,
    tool_result,
)
from core.kernel.hooks.command_process import Completed, hook_environment, run_command
from core.kernel.hooks.registry import HookEntry

__all__ = ["EVENT_NAMES", "TARGETS", "CommandSpec", "CommandTarget", "command_hook_entries"]

EVENT_NAMES: dict[HookPoint, str] = {
    spec.method: spec.command_event for spec in HOOK_SPECS if spec.command_event is not None
}

Messages = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One configured command, resolved: how to run it and under which name."""

    name: str
    hook: HookPoint
    argv: tuple[str, ...]
    timeout_s: float
    cwd: Path
    withheld: frozenset[str] = frozenset()  # environment variables it never gets

    @property
    def owner(self) -> str:
        return f"command:{self.name}"


class CommandTarget:
    """What every command target shares: send the JSON input, run, read the answer."""

    def __init__(self, spec: CommandSpec) -> None:
        self.spec = spec

    async def _run(self, turn: TurnContext, fields: dict[str, Any]) -> Completed:
        spec = self.spec
        payload = {
            "hook_event_name": EVENT_NAMES[spec.hook],
            "hook": spec.hook,
            "cwd": str(spec.cwd),
            "session_id": turn.session_id,
            "turn_id": turn.turn_id,
            "channel_id": turn.channel_id,
            "user_id": turn.user_id,
            "agent_id": turn.agent_id,
            **fields,
        }
        done = await run_command(
            spec.argv,
            json.dumps(payload, ensure_ascii=False, default=str).encode(),
            timeout_s=spec.timeout_s,
            cwd=spec.cwd,
            env=hook_environment(spec.withheld),
        )
        log_stderr(spec.owner, done)
        return done

    async def _answer(self, turn: TurnContext, can_block: bool, **fields: Any) -> Answer:
        return read_answer(await self._run(turn, fields), can_block=can_block)

    async def _notify(self, turn: TurnContext, **fields: Any) -> None:
        """A lifecycle point: the output is ignored, only a failure counts."""
        check_status(await self._run(turn, fields))


# One class per hook point, each with exactly its protocol's method and signature,
# so the loader's capability checks and the callers treat it like an extension.


class TurnStartCommand(CommandTarget):
    async def on_turn_start(self, turn: TurnContext) -> None:
        await self._notify(turn)


class TurnEndCommand(CommandTarget):
    async def on_turn_end(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        await self._notify(
            turn,
            outcome={
                "status": outcome.status,
                "reply": outcome.reply,
                "duration_ms": outcome.duration_ms,
            },
        )


class SessionStartCommand(CommandTarget):
    async def on_session_start(self, turn: TurnContext) -> None:
        await self._notify(turn)


class SessionEndCommand(CommandTarget):
    async def on_session_end(self, turn: TurnContext, reason: str) -> None:
        await self._notify(turn, reason=reason)


class InputMessagesCommand(CommandTarget):
    async def on_input_messages(
        self, messages: list[dict[str, Any]], turn: TurnContext
    ) -> list[dict[str, Any]] | ShortCircuit | None:
        answer = await self._answer(turn, True, messages=messages, prompt=_prompt(messages))
        return input_answer(answer, self.spec.owner)


class PlainTextCommand(CommandTarget):
    async def on_plain_text(
        self, text: str, direction: Literal["in", "out"], turn: TurnContext
    ) -> str | None:
        answer = await self._answer(turn, False, text=text, direction=direction)
        return text_answer(answer, "text")


class LlmOutputCommand(CommandTarget):
    async def on_llm_output(self, output: str, turn: TurnContext) -> str | None:
        return text_answer(await self._answer(turn, False, output=output), "output")


class BeforeToolCallCommand(CommandTarget):
    async def before_tool_call(self, call: ToolCall, turn: TurnContext) -> ToolDecision | None:
        answer = await self._answer(turn, True, **_tool_fields(call))
        return tool_decision(answer, self.spec.owner)


class AfterToolCallCommand(CommandTarget):
    async def after_tool_call(self, call: ToolCall, result: str, turn: TurnContext) -> str | None:
        answer = await self._answer(turn, True, **_tool_fields(call), tool_response=result)
        return tool_result(answer, self.spec.owner)


# one target class per hook point a program may implement (the spec table's
# ``command_event`` rows): every ``CommandTarget`` above, found by the hook method it defines
TARGETS: dict[HookPoint, tuple[Capability, type[CommandTarget]]] = {
    spec.method: (Capability(spec.capability), target)
    for spec in HOOK_SPECS
    for target in CommandTarget.__subclasses__()
    if spec.command_event is not None and spec.method in vars(target)
}


def command_hook_entries(
    settings: HooksSettings,
    *,
    cwd: Path | None = None,
    withheld: Collection[str] = (),
) -> list[tuple[Capability, HookEntry]]:
    """The registry's ``extra`` entries for ``hooks.commands``, in file order.

    ``cwd``: where the programs run (default: the project root); ``withheld``:
    environment variable names they never get (on top of known secret values).
    """
    names = _names(settings.commands)
    entries: list[tuple[Capability, HookEntry]] = []
    for order, (hook, name) in enumerate(zip(settings.commands, names, strict=True)):
        spec = CommandSpec(
            name=name,
            hook=hook.hook,
            argv=tuple(hook.argv),
            timeout_s=hook.timeout_s or settings.timeout_s,
            cwd=cwd or PROJECT_ROOT,
            withheld=frozenset(withheld),
        )
        point, target = TARGETS[hook.hook]
        entry = HookEntry(
            spec.owner,
            hook.priority,
            order,
            target(spec),
            matcher=hook.tool_matcher,
            timeout_s=hook.timeout_s,
        )
        entries.append((point, entry))
    return entries


def _names(commands: list[CommandHook]) -> list[str]:
    """Each command's ``name``, else one derived from its program (``guard`` for
    ``python3 hooks/guard.py``), made unique with ``-2``, ``-3`` … suffixes."""
    taken = {c.name for c in commands if c.name}
    names: list[str] = []
    for command in commands:
        if command.name:
            names.append(command.name)
            continue
        base = _derived_name(command.argv)
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        names.append(name)
    return names


def _derived_name(argv: list[str]) -> str:
    """The first argument that looks like a script, else the program's file name."""
    for arg in argv[1:]:
        if not arg.startswith("-") and ("/" in arg or Path(arg).suffix):
            return Path(arg).stem or arg
    return Path(argv[0]).name


def _tool_fields(call: ToolCall) -> dict[str, Any]:
    return {"tool_name": call.name, "tool_input": call.arguments, "tool_use_id": call.call_id}


def _prompt(messages: Messages) -> str:
    """The text of the last user message (Claude Code's ``prompt``)."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            parts = [p.get("text") for p in content if isinstance(p, dict)]
            return "\n".join(p for p in parts if isinstance(p, str))
        return ""
    return ""
