"""Questions as Block Kit messages, answered in place by pressing a button.

``ask`` posts the question (a ``section`` of plain text: tool names such as
``kv_set`` must not turn into formatting) with an ``actions`` block of one
button per option; a button's ``value`` is ``<question id>:<option value>``,
so a press on a message from before a restart still says what it answers. A
press (a ``block_actions`` interactive envelope) counts only from an allowed
user, in a DM or a served channel, who is the question's owner — in a
channel, the member whose message led to it — so another member's press
changes nothing (they are told so, ephemerally). The answer is journaled with
``answer_request``; the kernel checks the owner again and closes the
question, and ``close`` edits every message showing it to say the outcome,
buttons removed. A question without options (``input``, ``secret``) is
answered by the owner's next message in the conversation
(``take_typed_answer``); Slack does not let a bot delete a person's message,
so the hint of a ``secret`` one says to delete the answer by hand. A prompt
longer than a section (3,000 characters) is cut, never silently: the message
says how much is not shown and, for an approval, that ``/approve ID show``
sends the whole call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from core.extensions.contract import RequestOption, UserRequest

from .markup import escape
from .sender import Sender
from .targets import Targets, address_of

SECTION_CHARS = 3000
ACTION_PREFIX = "hearth_answer_"
_REPLY_HINT = {
    "input": "(Reply with your answer.)",
    "secret": "(Reply with your answer. Slack keeps it in this chat: delete it once answered.)",
}
_CONFIRM = (RequestOption("yes", "Yes"), RequestOption("no", "No"))

Answer = Callable[[str, str, str, str], Awaitable[None]]  # request id, value, address, sender


@dataclass
class _Question:
    request: UserRequest
    address: str
    text: str = ""  # the prompt as shown (cut to fit, saying so)
    shown: set[tuple[str, str]] = field(default_factory=set)  # (channel, ts) showing it


class QuestionBoard:
    """The open questions this process showed, and the messages showing them."""

    def __init__(self, sender: Sender, targets: Targets, log: logging.Logger) -> None:
        self._sender = sender
        self._targets = targets
        self._log = log
        self._questions: dict[str, _Question] = {}
        self._pressed: dict[str, set[tuple[str, str]]] = {}  # questions known only by a press

    async def ask(self, address: str, request: UserRequest) -> None:
        """Show ``request`` where ``address`` points (raises when it cannot)."""
        target = self._targets.target(address)
        options = _options(request)
        hint = "" if options else f"\n{_REPLY_HINT[request.kind]}"
        prompt = _fitted(request, SECTION_CHARS - len(hint))
        text = prompt + hint
        blocks: list[dict[str, Any]] = [_section(text)]
        if options:
            blocks.append(
                {
                    "type": "actions",
                    "block_id": f"hearth_question_{request.id}",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": f"{ACTION_PREFIX}{index}",
                            "text": {"type": "plain_text", "text": option.label[:75]},
                            "value": f"{request.id}:{option.value}",
                        }
                        for index, option in enumerate(options)
                    ],
                }
            )
        # open before it is posted: the owner may answer before Slack's reply is back
        known = request.id in self._questions
        question = self._questions.setdefault(request.id, _Question(request, address))
        question.request, question.text = request, prompt
        try:
            shown = await self._sender.post(target, text, blocks=blocks, markup=False)
        except BaseException:
            if not known:  # never shown: nobody can answer it here
                self._questions.pop(request.id, None)
            raise
        question.shown.add(shown)

    async def close(self, request_id: str, outcome: str) -> None:
        """Edit the messages showing the question: its text, then the outcome, no buttons."""
        question = self._questions.pop(request_id, None)
        shown = set(question.shown) if question else set()
        shown |= self._pressed.pop(request_id, set())
        prompt = question.text if question else ""
        room = SECTION_CHARS - len(outcome) - 2
        if len(prompt) > room:
            prompt = prompt[: max(room - 1, 0)] + "…"
        text = f"{prompt}\n{outcome}" if prompt else outcome
        for channel, ts in shown:
            try:
                await self._sender.update(channel, ts, text, blocks=[_section(text)], markup=False)
            except Exception as exc:  # the outcome is cosmetic: never fail the answer
                self._log.warning("question %s: message %s not edited: %s", request_id, ts, exc)

    async def on_press(self, body: dict[str, Any], answer: Answer) -> str | None:
        """A button press; ``None`` when journaled, else the note for the presser."""
        presser = str((body.get("user") or {}).get("id", ""))
        channel = str((body.get("channel") or {}).get("id", ""))
        message = body.get("message") or {}
        actions = body.get("actions") or []
        value = str(actions[0].get("value", "")) if actions else ""
        request_id, _, choice = value.partition(":")
        if not presser or not channel or not request_id or not choice:
            return "This button no longer works."
        dm = channel.startswith("D")
        if not dm and not self._targets.admits_channel(channel):
            return "This channel is not served."
        if not self._targets.admits(presser):
            return "You are not allowed to use this bot."
        question = self._questions.get(request_id)
        if dm:
            address = presser
        else:
            address = address_of(channel, message.get("thread_ts"))
        if question is not None:
            if choice not in {o.value for o in _options(question.request)}:
                return "This button no longer works."
            owner = question.request.owner_id or question.address
            if presser != owner:
                return "Only the person who asked can answer this."
            address = question.address
        shown = (channel, str(message.get("ts", "")))
        if question is not None and shown[1]:
            question.shown.add(shown)  # an older copy is edited too
        elif shown[1]:
            self._pressed.setdefault(request_id, set()).add(shown)
        await answer(request_id, choice, address, presser)
        return None

    def take_typed_answer(self, address: str, sender: str) -> UserRequest | None:
        """The oldest open question without options in this conversation that this
        sender owns: their next message answers it."""
        for question in self._questions.values():
            request = question.request
            owner = request.owner_id or question.address
            if question.address == address and not _options(request) and owner == sender:
                return request
        return None


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": escape(text), "verbatim": True}}


def _fitted(request: UserRequest, chars: int) -> str:
    """The prompt within ``chars``; a cut says how much it hides and, for an approval,
    how to read the whole call (no silent cut, ADR 0043)."""
    prompt = request.prompt
    if len(prompt) <= chars:
        return prompt
    how = (
        f"send /approve {request.id} show for the whole call"
        if request.kind == "approval"
        else "it is too long for one message"
    )
    note = f"\n… ({{hidden}} more characters not shown: {how})"
    head = prompt[: max(chars - len(note.format(hidden=len(prompt))), 0)]
    return head + note.format(hidden=len(prompt) - len(head))


def _options(request: UserRequest) -> tuple[RequestOption, ...]:
    if request.kind == "confirm" and not request.options:
        return _CONFIRM
    if request.kind in ("input", "secret"):
        return ()
    return request.options
