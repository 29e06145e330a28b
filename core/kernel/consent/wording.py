"""What the user and the model read about a question: plain words, short ids.

``describe_call`` shows a call the way a person would write it,
``kv_set(key="x", value=3)``: whole in the question (a person approves what
they read, so nothing may hide past a cut — ADR 0043), long values cut with
a visible ``…`` in the lines that report an outcome. ``parse_answer`` reads the
answers a person types: ``y``/``yes``/``ok``/``allow`` (allow once),
``a``/``always``, ``n``/``no``/``deny`` or nothing at all (the CLI's
``[N]o`` default).
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Literal

__all__ = [
    "APPROVAL_OPTIONS",
    "Choice",
    "denial_for_model",
    "describe_call",
    "new_request_id",
    "parse_answer",
    "question_text",
]

Choice = Literal["once", "always", "deny"]
APPROVAL_OPTIONS: tuple[tuple[Choice, str], ...] = (
    ("once", "Allow once"),
    ("always", "Always allow"),
    ("deny", "Deny"),
)
_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: ids are read off a phone
_ID_LENGTH = 4
_VALUE_CHARS = 80
_CALL_CHARS = 400
_ANSWERS: dict[str, Choice] = {
    "": "deny",
    "y": "once",
    "yes": "once",
    "ok": "once",
    "allow": "once",
    "once": "once",
    "approve": "once",
    "a": "always",
    "always": "always",
    "n": "deny",
    "no": "deny",
    "deny": "deny",
}


def new_request_id() -> str:
    """A short random id (``k7mq``): four characters that cannot be misread."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


def describe_call(tool: str, arguments: dict[str, Any], *, whole: bool = False) -> str:
    """``kv_set(key="x", value=3)``: each value as JSON; unless ``whole``, a long
    value or call is cut, and the cut marked ``…``."""
    parts = []
    for key, value in arguments.items():
        text = json.dumps(value, ensure_ascii=False, default=str)
        if len(text) > _VALUE_CHARS and not whole:
            text = text[: _VALUE_CHARS - 1] + "…"
        parts.append(f"{key}={text}")
    call = f"{tool}({', '.join(parts)})"
    return call if whole or len(call) <= _CALL_CHARS else call[: _CALL_CHARS - 2] + "…)"


def question_text(tool: str, arguments: dict[str, Any]) -> str:
    """The question itself, the whole call: ``Allow kv_set(key="x")?``. A channel
    that cannot show it all says so and offers ``/approve ID show``."""
    return f"Allow {describe_call(tool, arguments, whole=True)}?"


def parse_answer(text: str) -> Choice | None:
    """The choice a typed answer means, or ``None`` when it is no answer word."""
    return _ANSWERS.get(text.strip().lower().rstrip(".!"))


def denial_for_model(tool: str, status: str, minutes: float) -> str:
    """What the model reads as the result of a call the user did not approve."""
    if status == "timeout":
        return (
            f"not run: the user did not answer the approval question for {tool} within "
            f"{minutes:g} minutes, so it was denied. Tell the user it was not done."
        )
    if status == "superseded":
        return (
            f"not run: the user wrote a new message instead of approving {tool}, so it was denied."
        )
    if status == "interrupted":
        return (
            f"not run again: {tool} was approved, but Hearth restarted while it ran, so it "
            "may or may not have finished; it was not repeated. Tell the user to check."
        )
    if status == "unchecked":
        return (
            f"not run: the arguments for {tool} are not a JSON object, so they cannot be checked."
        )
    return f"not run: the user denied {tool}."
