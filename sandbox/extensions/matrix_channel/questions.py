"""Questions answered in place: numbered options, answered by a reply or a reaction.

Plain Matrix clients have no buttons, so ``ask`` sends the question as text
with its options numbered (``1. Allow once``, ``2. Always allow``, …). The
question's owner answers it by any of:

- a message in the room that is an option's number or label (``1``,
  ``allow once``) — a reply to the question or not;
- a reaction on the question with the number (``1``, ``1️⃣``) or the label.

Anything else they write is an ordinary message. Only the question's owner
(``owner_id``, else the room's allowed member) counts: another member's
reply is an ordinary message of theirs, and their reaction changes nothing.
The answer is journaled with ``answer_request``; the kernel checks the owner
again and closes the question, and ``close`` edits the question (``m.replace``)
to say how it ended. A question without options (``input``, ``secret``) is
answered by the owner's next message in the room; the answer to a ``secret``
one is redacted once read. After a restart the kernel asks open questions
again, and the new copy is answered the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from core.extensions.contract import RequestOption, UserRequest

from .rooms import Rooms
from .sender import MAX_BODY_CHARS, Sender, text_content

_REPLY_HINT = {
    "input": "(Reply with your answer.)",
    "secret": "(Reply with your answer; the message is removed once it is read.)",
}
_CONFIRM = (RequestOption("yes", "Yes"), RequestOption("no", "No"))
_APPROVAL = (
    RequestOption("once", "Allow once"),
    RequestOption("always", "Always allow"),
    RequestOption("deny", "Deny"),
)
_KEYCAPS = {f"{n}\ufe0f\u20e3": str(n) for n in range(10)} | {
    f"{n}\u20e3": str(n) for n in range(10)
}

Answer = Callable[[str, str, str, str], Awaitable[None]]  # request id, value, room, sender


@dataclass
class _Question:
    request: UserRequest
    room_id: str
    text: str = ""  # the question as shown
    shown: set[str] = field(default_factory=set)  # event ids showing it


@dataclass(frozen=True, slots=True)
class Reply:
    """What the owner's message answered: the question, and the value (``None``:
    not an answer, an ordinary message)."""

    request: UserRequest
    value: str


class QuestionBoard:
    def __init__(self, sender: Sender, rooms: Rooms, log: logging.Logger) -> None:
        self._sender = sender
        self._rooms = rooms
        self._log = log
        self._questions: dict[str, _Question] = {}
        self._events: dict[str, str] = {}  # event id showing a question -> its request id

    async def ask(self, address: str, request: UserRequest) -> None:
        """Show ``request`` in the room ``address`` names (raises when it cannot)."""
        room_id = await self._rooms.target(address)
        options = _options(request)
        lines = [f"{index}. {option.label}" for index, option in enumerate(options, start=1)]
        hint = (
            "(Reply with the number, or react with it.)" if options else _REPLY_HINT[request.kind]
        )
        prompt = request.prompt
        room = MAX_BODY_CHARS - sum(len(line) + 1 for line in lines) - len(hint) - 200
        if len(prompt) > room:
            how = (
                f"send /approve {request.id} show for the whole call"
                if request.kind == "approval"
                else "it is too long for one message"
            )
            prompt = f"{prompt[:room]}\n… ({len(prompt) - room} more characters not shown: {how})"
        text = "\n".join([prompt, *lines, hint])
        question = self._questions.setdefault(request.id, _Question(request, room_id))
        question.request, question.text = request, prompt
        try:
            event_id = await self._sender.send_content(room_id, text_content(text))
        except BaseException:
            if not question.shown:
                self._questions.pop(request.id, None)
            raise
        question.shown.add(event_id)
        self._events[event_id] = request.id

    async def close(self, request_id: str, outcome: str) -> None:
        """Edit the messages showing the question: its text, then the outcome."""
        question = self._questions.pop(request_id, None)
        if question is None:
            return
        for event_id in sorted(question.shown):
            self._events.pop(event_id, None)
            try:
                await self._sender.edit_piece(
                    question.room_id, event_id, f"{question.text}\n{outcome}", attempts=3
                )
            except Exception as exc:  # the outcome is journaled; the edit is cosmetic
                self._log.warning("question %s: %s not edited: %s", request_id, event_id, exc)

    def typed_answer(
        self, room_id: str, sender_id: str, text: str, in_reply_to: str | None
    ) -> Reply | None:
        """The open question this message of ``sender_id`` answers, if any."""
        if in_reply_to is not None and in_reply_to in self._events:
            question = self._questions.get(self._events[in_reply_to])
            if question is not None and self._owner(question) == sender_id:
                value = _value_of(_options(question.request), text)
                if value is not None:
                    return Reply(question.request, value)
        for question in self._questions.values():
            if question.room_id != room_id or self._owner(question) != sender_id:
                continue
            options = _options(question.request)
            if not options:
                return Reply(question.request, text)
            value = _value_of(options, text)
            if value is not None:
                return Reply(question.request, value)
        return None

    def reaction_answer(
        self, room_id: str, sender_id: str, reacts_to: str, key: str
    ) -> tuple[str, str] | None:
        """(request id, value) when the owner's reaction on a question answers it."""
        request_id = self._events.get(reacts_to)
        question = self._questions.get(request_id) if request_id else None
        if question is None or question.room_id != room_id:
            return None
        if self._owner(question) != sender_id:
            self._log.info("a reaction by %s on question %s changes nothing", sender_id, request_id)
            return None
        value = _value_of(_options(question.request), _KEYCAPS.get(key, key))
        return (question.request.id, value) if value is not None else None

    def _owner(self, question: _Question) -> str | None:
        if question.request.owner_id:
            return question.request.owner_id
        return next(
            (u for u in sorted(self._rooms.members(question.room_id)) if self._rooms.allowed(u)),
            None,
        )


def _value_of(options: tuple[RequestOption, ...], text: str) -> str | None:
    """The option a number (1-based) or a label (any case) names."""
    answer = text.strip().rstrip(".").strip().lower()
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1].value
    for option in options:
        if answer in (option.label.lower(), option.value.lower()):
            return option.value
    return None


def _options(request: UserRequest) -> tuple[RequestOption, ...]:
    if request.kind == "confirm" and not request.options:
        return _CONFIRM
    if request.kind == "approval" and not request.options:
        return _APPROVAL
    if request.kind in ("input", "secret"):
        return ()
    return request.options
