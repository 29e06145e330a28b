"""Questions answered in place: a mail in the thread, answered by replying to it.

Mail has no buttons, so ``ask`` sends the question as a mail in the
conversation's thread, its options numbered (``1. Allow once``, ``2. Always
allow``, ``3. Deny``). The person answers by replying with an option's
number, its label (``allow once``), or ``yes`` / ``no`` (the first option,
or the one that refuses). The first line of the reply's new text counts
(the quote of the question below it does not). A reply to the question
mail, or any mail from the question's owner in its thread while it is open,
is tried as an answer; anything else they write is an ordinary message.
A question without options (``input``, ``secret``) is answered by the next
mail in the thread; the mail holding a ``secret`` answer is deleted from the
mailbox once read. The kernel checks the owner again and closes the
question; nothing is mailed then (the answer's effect comes as the reply).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.extensions.contract import RequestOption, UserRequest

from .threads import Thread

_REPLY_HINT = {
    "input": "(Reply to this mail with your answer.)",
    "secret": "(Reply to this mail with your answer; the mail is deleted once it is read.)",
}
_CONFIRM = (RequestOption("yes", "Yes"), RequestOption("no", "No"))
_APPROVAL = (
    RequestOption("once", "Allow once"),
    RequestOption("always", "Always allow"),
    RequestOption("deny", "Deny"),
)
_YES = ("yes", "y", "ok", "okay", "sure", "allow")
_NO = ("no", "n", "nope", "deny", "refuse")
_REFUSING = ("no", "deny", "cancel", "reject")
MAX_PROMPT_CHARS = 20_000

Post = Callable[[Thread, str, str], Awaitable[str]]  # thread, subject, text -> Message-ID


@dataclass
class _Question:
    request: UserRequest
    thread_key: str
    owner: str
    mail_ids: set[str]


@dataclass(frozen=True, slots=True)
class Reply:
    """What a mail answered: the question and the value."""

    request: UserRequest
    value: str


class QuestionBoard:
    def __init__(self, post: Post) -> None:
        self._post = post
        self._questions: dict[str, _Question] = {}

    async def ask(self, thread: Thread, request: UserRequest) -> None:
        """Mail ``request`` into ``thread`` (raises when it cannot be sent)."""
        options = _options(request)
        lines = [f"{index}. {option.label}" for index, option in enumerate(options, start=1)]
        hint = (
            "(Reply to this mail with the number, the words, or yes / no.)"
            if options
            else _REPLY_HINT[request.kind]
        )
        prompt = request.prompt
        if len(prompt) > MAX_PROMPT_CHARS:
            more = len(prompt) - MAX_PROMPT_CHARS
            prompt = f"{prompt[:MAX_PROMPT_CHARS]}\n… ({more} more characters not shown)"
        text = "\n".join([prompt, "", *lines, "", hint])
        owner = request.owner_id or thread.peer
        question = self._questions.setdefault(
            request.id, _Question(request, thread.key, owner.lower(), set())
        )
        question.request = request
        mail_id = await self._post(thread, thread.next_subject(), text)
        question.mail_ids.add(mail_id)

    def close(self, request_id: str) -> None:
        self._questions.pop(request_id, None)

    def answer_in(
        self, thread: Thread, sender: str, text: str, parents: tuple[str, ...]
    ) -> Reply | None:
        """The open question this mail of ``sender`` in ``thread`` answers, if any."""
        replied = set(parents)
        ordered = sorted(
            self._questions.values(), key=lambda q: not (q.mail_ids & replied)
        )  # a reply to a question mail first
        for question in ordered:
            if question.thread_key != thread.key or question.owner != sender:
                continue
            options = _options(question.request)
            if not options:
                return Reply(question.request, text.strip())
            value = value_of(options, first_line(text))
            if value is not None:
                return Reply(question.request, value)
        return None


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def value_of(options: tuple[RequestOption, ...], text: str) -> str | None:
    """The option a number (1-based), a label, a value or a yes/no names."""
    answer = text.strip().rstrip(".!").strip().lower()
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1].value
    for option in options:
        if answer in (option.label.lower(), option.value.lower()):
            return option.value
    if answer in _YES and options:
        return options[0].value
    if answer in _NO:
        refusing = [o for o in options if o.value.lower() in _REFUSING]
        return refusing[0].value if refusing else None
    return None


def _options(request: UserRequest) -> tuple[RequestOption, ...]:
    if request.kind == "confirm" and not request.options:
        return _CONFIRM
    if request.kind == "approval" and not request.options:
        return _APPROVAL
    if request.kind in ("input", "secret"):
        return ()
    return request.options
