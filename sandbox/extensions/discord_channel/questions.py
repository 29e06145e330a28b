"""Questions as messages with buttons, answered in place by pressing one.

``ask`` sends the question (its text as is, cut to fit a message, never
silently) with one button per option (a ``discord.ui.View`` of ``Button``\\ s;
custom id ``hearth:<question id>:<option index>``, well under Discord's 100
characters, at most 25 buttons). The press arrives as an ``INTERACTION_CREATE``
(a component interaction) and is handled here, not by a callback of the view:
a press on a message sent before a restart must work too, and the view is
gone then. A press counts only from an allowed or paired user, in a DM or a
served channel, who owns the question (in a channel, the member who asked);
anyone else gets a note only they see (an ephemeral reply). A counted press
is acknowledged at once (a deferred update: the button stops spinning) and
the answer journaled with ``answer_request``; the kernel closes the question
and ``close`` edits every message showing it to say the outcome, buttons
removed. A question without options (``input``, ``secret``) has one button,
*Answer…*, that opens a form (a Discord modal) with a text field: what is
typed there is submitted as an interaction and never shows in the chat — the
way to answer a secret, since Discord lets no bot delete the other side's DM
messages. The owner's next message there answers it too
(``take_typed_answer``); such a ``secret`` answer is deleted once read where
the bot may (a server channel where it has Manage Messages).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import discord

from core.extensions.contract import RequestOption, UserRequest
from core.extensions.sdk import utf16_len

from .sender import MAX_MESSAGE_UNITS, Sender
from .targets import Targets

CUSTOM_ID_PREFIX = "hearth"
MAX_BUTTONS = 25
MAX_LABEL = 80
MAX_FIELD_LABEL = 45  # a form field's label
ANSWER, FORM = "answer", "form"  # the Answer… button; the form it opens
FIELD = "answer"  # the form's text field
_REPLY_HINT = {
    "input": "(Press Answer…, or reply with your answer.)",
    "secret": "(Press Answer… and type it there: it never shows in the chat.)",
}
_CONFIRM = (RequestOption("yes", "Yes"), RequestOption("no", "No"))
# a press on a question this process has not shown (asked before a restart): only
# approvals outlive a restart, and their options are always these, in this order
_APPROVAL_VALUES = {"0": "once", "1": "always", "2": "deny"}

Answer = Callable[[str, str, str, str], Awaitable[None]]  # request id, value, address, sender


@dataclass
class _Question:
    request: UserRequest
    channel_id: int
    address: str
    text: str = ""  # the prompt as shown
    shown: set[int] = field(default_factory=set)  # message ids showing it


class QuestionBoard:
    def __init__(self, sender: Sender, targets: Targets, log: logging.Logger) -> None:
        self._sender = sender
        self._targets = targets
        self._log = log
        self._questions: dict[str, _Question] = {}
        self._pressed: dict[str, set[tuple[int, int]]] = {}  # questions known only by a press

    async def ask(self, user_id: str, request: UserRequest) -> None:
        """Show ``request`` where ``user_id`` addresses (raises when it cannot)."""
        channel_id = await self._sender.channel_id(self._targets.target(user_id))
        options = _options(request)
        hint = "" if options else f"\n{_REPLY_HINT[request.kind]}"
        prompt = _fitted(request, MAX_MESSAGE_UNITS - utf16_len(hint))
        # open before it is sent: the owner may answer before Discord's reply is back
        known = request.id in self._questions
        question = self._questions.setdefault(request.id, _Question(request, channel_id, user_id))
        question.request, question.text = request, prompt
        try:
            message_id = await self._sender.send_piece(
                channel_id, prompt + hint, view=_buttons(request.id, options)
            )
        except BaseException:
            if not known:  # never shown: nobody can answer it here
                self._questions.pop(request.id, None)
            raise
        question.shown.add(message_id)

    async def close(self, user_id: str, request_id: str, outcome: str) -> None:
        """Edit the messages showing the question: its text, then the outcome, no buttons."""
        question = self._questions.pop(request_id, None)
        shown = {(question.channel_id, m) for m in question.shown} if question else set()
        shown |= self._pressed.pop(request_id, set())
        prompt = question.text if question else ""
        room = MAX_MESSAGE_UNITS - utf16_len(outcome) - 2
        if prompt and utf16_len(prompt) > room:
            prompt = _head(prompt, room) + "…"
        text = f"{prompt}\n{outcome}" if prompt else outcome
        for channel_id, message_id in sorted(shown):
            try:
                await self._sender.edit_piece(channel_id, message_id, text, drop_buttons=True)
            except discord.DiscordException as exc:
                self._log.warning(
                    "question %s: message %d not edited: %s", request_id, message_id, exc
                )

    async def on_press(self, interaction: discord.Interaction, answer: Answer) -> None:
        """A button press or a submitted form: acknowledged always, journaled only
        from the question's owner."""
        data = interaction.data or {}
        prefix, _, rest = str(data.get("custom_id", "")).partition(":")
        kinds = (discord.InteractionType.component, discord.InteractionType.modal_submit)
        if interaction.type not in kinds or prefix != CUSTOM_ID_PREFIX:
            return
        request_id, _, index = rest.rpartition(":")
        note = self._judge(interaction, request_id, index)
        question = self._questions.get(request_id)
        try:
            if note is not None:
                await interaction.response.send_message(note, ephemeral=True)
            elif index == ANSWER and question is not None:
                await interaction.response.send_modal(_form(question.request))
                return  # the answer comes with the form
            else:
                await interaction.response.defer()  # acknowledged; ``close`` edits the message
        except discord.DiscordException as exc:
            self._log.warning("acknowledging a button press failed: %s", exc)
        if note is not None:
            return
        if index == FORM:
            value = _field_value(data.get("components", []))
        else:
            options = _options(question.request) if question else ()
            value = options[int(index)].value if question else _APPROVAL_VALUES.get(index, "")
        if not value:
            return
        channel_id = interaction.channel_id or 0
        message_id = interaction.message.id if interaction.message else 0
        if question is not None and question.channel_id == channel_id:
            question.shown.add(message_id)  # an older copy is edited too
        elif message_id:
            self._pressed.setdefault(request_id, set()).add((channel_id, message_id))
        presser = interaction.user.id
        address = str(channel_id) if interaction.guild_id is not None else str(presser)
        await answer(request_id, value, address, str(presser))

    def _judge(self, interaction: discord.Interaction, request_id: str, index: str) -> str | None:
        """``None`` when the press may answer; else the note shown to the presser."""
        presser = interaction.user
        form = index in (ANSWER, FORM)
        if not request_id or not (index.isdigit() or form) or interaction.channel_id is None:
            return "This button no longer works."
        if interaction.guild_id is not None and not self._targets.serves_channel(
            interaction.channel_id
        ):
            return "This channel is not served."
        if not self._targets.admits(presser.id, str(presser)):
            return "You are not allowed to use this bot."
        question = self._questions.get(request_id)
        if question is None and form:
            return "This question is over."
        if question is not None:
            if not form and not int(index) < len(_options(question.request)):
                return "This button no longer works."
            owner = question.request.owner_id or question.address
            if str(presser.id) != owner:
                return "Only the person who asked can answer this."
        return None

    def take_typed_answer(self, channel_id: int, sender_id: int) -> UserRequest | None:
        """The oldest open question without options here that this sender owns: their
        next message answers it."""
        for question in self._questions.values():
            request = question.request
            owner = request.owner_id or question.address
            if (
                question.channel_id == channel_id
                and not _options(request)
                and owner == str(sender_id)
            ):
                return request
        return None


def _buttons(request_id: str, options: tuple[RequestOption, ...]) -> discord.ui.View:
    """A view of one button per option (deny-like answers in red), never timing out;
    without options, the one button that opens the answer form."""
    view = discord.ui.View(timeout=None)
    if not options:
        answer = discord.ui.Button(
            label="Answer…",
            custom_id=f"{CUSTOM_ID_PREFIX}:{request_id}:{ANSWER}",
            style=discord.ButtonStyle.primary,
        )
        view.add_item(answer)
        return view
    for index, option in enumerate(options[:MAX_BUTTONS]):
        style = (
            discord.ButtonStyle.danger
            if option.value in ("deny", "no")
            else discord.ButtonStyle.primary
            if index == 0
            else discord.ButtonStyle.secondary
        )
        view.add_item(
            discord.ui.Button(
                label=option.label[:MAX_LABEL] or option.value[:MAX_LABEL],
                custom_id=f"{CUSTOM_ID_PREFIX}:{request_id}:{index}",
                style=style,
            )
        )
    return view


def _form(request: UserRequest) -> discord.ui.Modal:
    """The answer form: one text field (a line for a secret, a paragraph for text)."""
    form = discord.ui.Modal(
        title="Answer Hearth", custom_id=f"{CUSTOM_ID_PREFIX}:{request.id}:{FORM}", timeout=None
    )
    label = request.prompt if len(request.prompt) <= MAX_FIELD_LABEL else "Your answer"
    style = discord.TextStyle.short if request.kind == "secret" else discord.TextStyle.paragraph
    form.add_item(discord.ui.TextInput(label=label, custom_id=FIELD, style=style))
    return form


def _field_value(components: object) -> str:
    """The text field's value in a submitted form (in an action row or a label)."""
    if isinstance(components, list):
        return next((v for v in map(_field_value, components) if v), "")
    if not isinstance(components, dict):
        return ""
    if components.get("custom_id") == FIELD and isinstance(components.get("value"), str):
        return str(components["value"])
    return _field_value(components.get("components") or [components.get("component")])


def _fitted(request: UserRequest, units: int) -> str:
    """The prompt within ``units`` UTF-16 units; a cut says how much it hides and,
    for an approval, how to read the whole call (no silent cut, ADR 0043)."""
    prompt = request.prompt
    if utf16_len(prompt) <= units:
        return prompt
    how = (
        f"send /approve {request.id} show for the whole call"
        if request.kind == "approval"
        else "it is too long for one message"
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
