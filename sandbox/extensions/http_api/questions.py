"""Questions the kernel puts to an API client, and the answers typed back (ADR 0057).

The channel is an ``InteractiveChannel``: the kernel hands it each approval
(and each extension's question) with the tagged address of the request whose
turn asked. ``OpenQuestions`` files them by conversation, so a later request
of the same client — same token, same conversation, any reply tag — can
answer: ``yes`` / ``always`` / ``no`` for every approval open there,
``/approve ID [always]``, ``/deny ID`` or ``/answer ID TEXT`` for one. The
answer goes back through ``answer_request`` with the address the question was
asked at, which is what the kernel checks (ADR 0043).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.extensions.contract import UserRequest, split_reply_address

YES = {"yes", "y", "ok", "allow", "once", "allow once"}
ALWAYS = {"always", "always allow"}
NO = {"no", "n", "deny", "nope"}
COMMANDS = {"/approve", "/deny", "/answer"}


@dataclass(frozen=True, slots=True)
class Question:
    """One open question: where it was asked (the tagged address) and what it asks."""

    conversation: str
    asked_at: str
    request: UserRequest

    @property
    def tag(self) -> str | None:
        return split_reply_address(self.asked_at)[1]

    def to_json(self) -> dict[str, Any]:
        """What a client shows: the web page's buttons come from ``options``."""
        return {
            "id": self.request.id,
            "kind": self.request.kind,
            "prompt": self.request.prompt,
            "options": [{"value": o.value, "label": o.label} for o in self.request.options],
        }


@dataclass(frozen=True, slots=True)
class Answer:
    question: Question
    value: str


class OpenQuestions:
    """The questions asked on this channel and not closed yet."""

    def __init__(self) -> None:
        self._open: dict[str, Question] = {}

    def add(self, user_id: str, request: UserRequest) -> Question:
        conversation = split_reply_address(user_id)[0]
        question = self._open[request.id.lower()] = Question(conversation, user_id, request)
        return question

    def close(self, request_id: str) -> None:
        self._open.pop(request_id.lower(), None)

    def in_conversation(self, conversation: str) -> list[Question]:
        return [q for q in self._open.values() if q.conversation == conversation]

    def answers(self, conversation: str, text: str) -> list[Answer]:
        """The answers ``text`` gives to questions open in ``conversation``; empty when
        it answers none (then it is an ordinary message)."""
        said = " ".join(text.strip().lower().rstrip(".!").split())
        approvals = [q for q in self.in_conversation(conversation) if q.request.kind == "approval"]
        if approvals and said in YES | ALWAYS | NO:
            value = "once" if said in YES else "always" if said in ALWAYS else "deny"
            return [Answer(q, value) for q in approvals]
        words = text.strip().split(maxsplit=2)
        if len(words) < 2 or words[0].lower() not in COMMANDS:
            return []
        question = self._open.get(words[1].lower())
        if question is None or question.conversation != conversation:
            return []  # not this client's: the kernel answers the command itself
        rest = words[2] if len(words) > 2 else ""
        if words[0].lower() == "/deny":
            return [Answer(question, "deny")]
        if words[0].lower() == "/approve":
            return [Answer(question, "always" if rest.strip().lower() == "always" else "once")]
        return [Answer(question, rest)]


def waiting_text(questions: list[dict[str, Any]]) -> str:
    """The reply of a request whose turn waits for an answer: what, and how to answer."""
    lines = []
    for q in questions:
        if q["kind"] == "approval":
            lines.append(
                f"Waiting for your answer: {q['prompt']}\nAnswer yes (allow once), always, "
                f"or no — or /approve {q['id']}, /approve {q['id']} always, /deny {q['id']}."
            )
        else:
            lines.append(
                f"Waiting for your answer: {q['prompt']}\nAnswer with /answer {q['id']} TEXT."
            )
    return "\n\n".join(lines)
