"""Questions as messages with an inline keyboard, answered by pressing a button.

``ask`` sends the question (plain text: tool names such as ``kv_set`` must
not turn into Markdown) with one button per option; the button's callback
data is ``<question id>:<option index>`` (well under Telegram's 64 bytes).
A press counts only when it comes from an allowed user, in a chat this bot
serves, who is the question's owner — in a group, the member who asked — so
another member's press changes nothing. The press is acknowledged at once
(``answerCallbackQuery``, the spinner stops) and the answer journaled with
``answer_request``; the kernel checks the owner again and closes the
question, and ``close`` edits every message showing it to say the outcome,
keyboard removed. After a restart the kernel asks open questions again; a
press on an older message still works and that message is edited too.
A question without options (``input``, ``secret``) is answered by the
owner's next message in the chat (``take_typed_answer``); the answer to a
``secret`` one is deleted from the chat once read. A question longer than
one Telegram message (4,096 characters) is cut, never silently: the message
says how much is not shown and, for an approval, that ``/approve ID show``
sends the whole call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from core.extensions.contract import RequestOption, UserRequest
from core.extensions.sdk import utf16_len

from .allowlist import AllowList
from .chats import ChatTargets
from .sender import MAX_MESSAGE_UNITS, Sender

PRIVATE = "private"
_REPLY_HINT = {
    "input": "(Reply with your answer.)",
    "secret": "(Reply with your answer; the message is deleted once it is read.)",
}
_CONFIRM = (RequestOption("yes", "Yes"), RequestOption("no", "No"))

Answer = Callable[[str, str, str, str], Awaitable[None]]  # request id, value, address, sender


@dataclass
class _Question:
    request: UserRequest
    chat_id: int
    text: str = ""  # the prompt as shown (cut to fit a message, saying so)
    shown: set[int] = field(default_factory=set)  # message ids showing it


class QuestionBoard:
    def __init__(
        self, bot: Bot, sender: Sender, chats: ChatTargets, allow: AllowList, log: logging.Logger
    ) -> None:
        self._bot = bot
        self._sender = sender
        self._chats = chats
        self._allow = allow
        self._log = log
        self._questions: dict[str, _Question] = {}
        self._pressed: dict[str, set[tuple[int, int]]] = {}  # questions known only by a press

    async def ask(self, user_id: str, request: UserRequest) -> None:
        """Show ``request`` in the chat ``user_id`` addresses (raises when it cannot)."""
        chat_id = self._chats.chat_for(user_id)
        options = _options(request)
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(option.label, callback_data=f"{request.id}:{index}")
                    for index, option in enumerate(options)
                ]
            ]
        )
        hint = "" if options else f"\n{_REPLY_HINT[request.kind]}"
        prompt = _fitted(request, MAX_MESSAGE_UNITS - utf16_len(hint))
        text = prompt + hint
        # open before it is sent: the owner may read it and answer before Telegram's
        # reply to sendMessage is back, and that answer must not become a new message
        known = request.id in self._questions
        question = self._questions.setdefault(request.id, _Question(request, chat_id))
        question.request, question.text = request, prompt
        try:
            message = await self._sender.call(
                f"question {request.id} to {chat_id}",
                lambda: self._bot.send_message(
                    chat_id, text, reply_markup=keyboard if options else None
                ),
            )
        except BaseException:
            if not known:  # never shown: nobody can answer it here
                self._questions.pop(request.id, None)
            raise
        question.shown.add(message.message_id)

    async def close(self, user_id: str, request_id: str, outcome: str) -> None:
        """Edit the messages showing the question: its text, then the outcome."""
        question = self._questions.pop(request_id, None)
        shown = {(question.chat_id, m) for m in question.shown} if question else set()
        shown |= self._pressed.pop(request_id, set())
        prompt = question.text if question else ""
        room = MAX_MESSAGE_UNITS - utf16_len(outcome) - 2
        if prompt and utf16_len(prompt) > room:
            prompt = _head(prompt, room) + "…"
        for chat_id, message_id in sorted(shown):
            text = f"{prompt}\n{outcome}" if prompt else outcome
            try:
                await self._sender.call(
                    f"closing question {request_id}",
                    lambda c=chat_id, m=message_id, t=text: self._bot.edit_message_text(
                        t, chat_id=c, message_id=m
                    ),
                )
            except TelegramError as exc:
                self._log.warning(
                    "question %s: message %d not edited: %s", request_id, message_id, exc
                )

    async def on_press(self, query: CallbackQuery, answer: Answer) -> None:
        """A button press: acknowledged always, journaled only from the question's owner."""
        presser, message = query.from_user, query.message
        request_id, _, index = (query.data or "").partition(":")
        note = await self._judge(query, request_id, index)
        try:
            await self._bot.answer_callback_query(query.id, text=note)
        except TelegramError as exc:
            self._log.debug("answerCallbackQuery failed: %s", exc)
        if note is not None or message is None:
            return
        question = self._questions.get(request_id)
        options = _options(question.request) if question else ()
        value = options[int(index)].value if question else _APPROVAL_VALUES.get(index, "")
        if not value:
            return
        if question is not None and question.chat_id == message.chat.id:
            question.shown.add(message.message_id)  # an older copy is edited too
        else:
            self._pressed.setdefault(request_id, set()).add((message.chat.id, message.message_id))
        address = self._chats.address(message.chat.id)
        await answer(request_id, value, address, str(presser.id))

    async def _judge(self, query: CallbackQuery, request_id: str, index: str) -> str | None:
        """``None`` when the press may answer; else the note shown to the presser."""
        presser, message = query.from_user, query.message
        if message is None or not request_id or not index.isdigit():
            return "This button no longer works."
        chat = message.chat
        if chat.type != PRIVATE and not self._allow.admits_group(chat.id, chat.title or "group"):
            return "This chat is not served."
        if not self._allow.admits(presser.id, presser.full_name):
            return "You are not allowed to use this bot."
        question = self._questions.get(request_id)
        if question is not None:
            if not int(index) < len(_options(question.request)):
                return "This button no longer works."
            owner = question.request.owner_id or str(question.chat_id)
            if str(presser.id) != owner:
                return "Only the person who asked can answer this."
        elif chat.type == PRIVATE and presser.id != chat.id:
            return "Only the person who asked can answer this."
        return None

    def take_typed_answer(self, chat_id: int, sender_id: int) -> UserRequest | None:
        """The oldest open question without options in this chat that this sender owns:
        their next message answers it."""
        for question in self._questions.values():
            request = question.request
            owner = request.owner_id or str(question.chat_id)
            if question.chat_id == chat_id and not _options(request) and owner == str(sender_id):
                return request
        return None


# a press on a question this process has not shown (asked before a restart): only
# approvals outlive a restart, and their options are always these, in this order
_APPROVAL_VALUES = {"0": "once", "1": "always", "2": "deny"}


def _fitted(request: UserRequest, units: int) -> str:
    """The prompt within ``units`` UTF-16 units; a cut says how much it hides and,
    for an approval, how to read the whole call (no silent cut, ADR 0043)."""
    prompt = request.prompt
    if utf16_len(prompt) <= units:
        return prompt
    how = (
        f"send /approve {request.id} show for the whole call"
        if request.kind == "approval"
        else ("it is too long for one message")
    )
    note = f"\n… ({{hidden}} more characters not shown: {how})"
    head = _head(prompt, units - utf16_len(note.format(hidden=len(prompt))))
    return head + note.format(hidden=len(prompt) - len(head))


def _head(text: str, units: int) -> str:
    """The longest start of ``text`` of at most ``units`` UTF-16 units."""
    return text.encode("utf-16-le")[: 2 * max(units, 0)].decode("utf-16-le", errors="ignore")


def _options(request: UserRequest) -> tuple[RequestOption, ...]:
    if request.kind == "confirm" and not request.options:
        return _CONFIRM
    if request.kind in ("input", "secret"):
        return ()
    return request.options
