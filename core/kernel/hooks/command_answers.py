"""What a hook command's answer means, per hook point (docs/command-hooks.md).

Exit status first: 0 is an answer (empty stdout: no change), 2 is "block"
with stderr as the reason (the Claude Code convention), anything else is a
failure. stdout, when not empty, must be one JSON object; its fields are read
per hook point, the Claude Code shapes included — ``decision`` /
``reason`` / ``tool_input`` and the newer ``hookSpecificOutput`` with
``permissionDecision`` / ``permissionDecisionReason`` / ``updatedInput``.
Fields no hook point reads are ignored; a field of the wrong type is a
failure (``CommandHookError``), so the data stays unchanged.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.extensions.contract import ShortCircuit, ToolDecision
from core.kernel.hooks.command_process import CommandHookError, Completed
from core.runtime import REDACTOR, escape_control

__all__ = [
    "Answer",
    "check_status",
    "input_answer",
    "log_stderr",
    "read_answer",
    "text_answer",
    "tool_decision",
    "tool_result",
]

log = logging.getLogger("core.kernel.hooks")

BLOCK_STATUS = 2
NO_REASON = "no reason given"
_QUOTED = 500  # characters of stderr quoted in a failure


@dataclass(frozen=True, slots=True)
class Answer:
    """A command's answer: ``blocked`` (exit 2, ``reason`` from stderr) or ``data``."""

    data: dict[str, Any] = field(default_factory=dict)
    blocked: bool = False
    reason: str = ""


def check_status(done: Completed) -> None:
    """``CommandHookError`` unless the command exited 0."""
    if done.status != 0:
        raise CommandHookError(f"exited with status {done.status}{_quote(done.stderr)}")


def read_answer(done: Completed, *, can_block: bool) -> Answer:
    """The exit status and stdout of a command whose answer counts."""
    if done.status == BLOCK_STATUS and can_block:
        return Answer(blocked=True, reason=done.stderr.strip())
    check_status(done)
    text = done.stdout.strip()
    if not text:
        return Answer()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CommandHookError(f"printed something other than JSON on stdout ({exc})") from exc
    if not isinstance(data, dict):
        raise CommandHookError(f"printed a JSON {type(data).__name__}, not an object")
    return Answer(data)


def tool_decision(answer: Answer, owner: str) -> ToolDecision | None:
    """``before_tool_call``: deny, modify, allow, or no opinion (``None``)."""
    if answer.blocked:
        return ToolDecision.deny(answer.reason or NO_REASON)
    data = answer.data
    specific = _get(data, "hookSpecificOutput", dict) or {}
    permission = _get(specific, "permissionDecision", str)
    action: str | None
    if permission is not None:  # the newer shape wins over the older ``decision``
        if permission not in ("allow", "deny", "ask"):
            raise CommandHookError(f"permissionDecision {permission!r} is not allow, deny or ask")
        action = "deny" if permission == "deny" else "allow"  # ask: consent comes later
        if permission == "ask":
            log.info("%s answered permissionDecision 'ask'; treated as 'allow'", owner)
        reason = _get(specific, "permissionDecisionReason", str)
    else:
        decision = _get(data, "decision", str)
        if decision not in (None, "block", "approve", "modify"):
            raise CommandHookError(f"decision {decision!r} is not block, approve or modify")
        action = {"block": "deny", "approve": "allow"}.get(decision or "", decision)
        reason = _get(data, "reason", str)
    if action == "deny":
        return ToolDecision.deny(reason or NO_REASON)
    arguments = _get(specific, "updatedInput", dict)
    if arguments is None:
        arguments = _get(data, "tool_input", dict)
    if arguments is not None:
        return ToolDecision.modify(arguments)
    if action == "modify":
        raise CommandHookError("decision 'modify' without a tool_input object")
    return ToolDecision.allow() if action == "allow" else None


def tool_result(answer: Answer, owner: str) -> str | None:
    """``after_tool_call``: the result the model reads instead, or ``None``.

    A block (exit 2 or ``decision: block``) withholds the result: the model
    reads ``withheld by <owner>: <reason>``. ``tool_response`` replaces it
    (a value that is not a string is sent as its JSON).
    """
    if answer.blocked or _get(answer.data, "decision", str) == "block":
        reason = answer.reason or _get(answer.data, "reason", str) or NO_REASON
        return f"withheld by {owner}: {reason}"
    if "tool_response" not in answer.data:
        return None
    value = answer.data["tool_response"]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def input_answer(answer: Answer, owner: str) -> list[dict[str, Any]] | ShortCircuit | None:
    """``on_input_messages``: a block or ``reply`` answers the user; ``messages`` rewrites."""
    if answer.blocked or _get(answer.data, "decision", str) == "block":
        reason = answer.reason or _get(answer.data, "reason", str)
        return ShortCircuit(reason or f"This message was blocked ({owner}).")
    reply = _get(answer.data, "reply", str)
    if reply is not None:
        return ShortCircuit(reply)
    messages = _get(answer.data, "messages", list)
    if messages is None:
        return None
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise CommandHookError("messages must be a list of {role, content} objects")
    return messages


def text_answer(answer: Answer, key: str) -> str | None:
    """``on_plain_text`` (``text``) and ``on_llm_output`` (``output``): the new text."""
    return _get(answer.data, key, str)


def log_stderr(owner: str, done: Completed) -> None:
    """What a command that exited 0 wrote on stderr: one redacted, escaped log line
    (a failure quotes it in its own line; a block makes it the reason)."""
    if done.status == 0 and done.stderr.strip():
        log.info("%s stderr: %s", owner, _clean(done.stderr, 2000))


T = TypeVar("T")


def _get(data: dict[str, Any], key: str, kind: type[T]) -> T | None:
    value = data.get(key)
    if value is None or isinstance(value, kind):
        return value
    raise CommandHookError(f"{key} must be a JSON {_JSON_NAMES[kind]}")


_JSON_NAMES: dict[type, str] = {str: "string", dict: "object", list: "array"}


def _quote(stderr: str) -> str:
    return f": {_clean(stderr, _QUOTED)}" if stderr.strip() else ""


def _clean(text: str, limit: int) -> str:
    text = REDACTOR.redact(text.strip())  # before cutting, which could split a secret
    return escape_control(text[:limit] + (" …" if len(text) > limit else ""))
