"""Extensions' questions to the user: ``confirm``, ``select``, ``input``, ``secret`` (seed 003).

``ExtensionContext.ui_request`` lands here. The question goes to the
conversation of the turn being served, the same way as an approval: an
``InteractiveChannel`` renders it (buttons, an inline prompt), any other
channel gets a line naming ``/answer ID``. The answer comes back as
``system.ui.answer`` (``answer_request``) or ``/answer``, is accepted only
from that conversation and the turn's sender, and wakes the extension, which
waits in memory — these questions live as long as the call that asked, so
they do not outlive a restart (approvals do). Each question and its outcome
are journaled as ``hook.ui`` frames — a ``secret`` answer as ``(hidden)``,
and the lines that close a secret question never repeat it. The answer to a
``secret`` question is never journaled at all (ADR 0048): the context hands
it over in memory (``answer_off_record``, ``typed_secret``) — the question
lives only in this process's memory anyway, so a crash loses nothing the
journal could have saved; the extension asks again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from core.extensions.context.ui_gateway import UI_KINDS, UiGateway
from core.extensions.contract import InteractiveChannel, RequestOption, TurnContext, UserRequest
from core.extensions.errors import NotAvailableError
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.commands.table import parse_command
from core.kernel.consent.desk import SHOW_TIMEOUT_S
from core.kernel.consent.elsewhere import AskedElsewhere, QuestionsElsewhere
from core.kernel.consent.responder import Responder
from core.kernel.consent.wording import new_request_id
from core.kernel.hooks import FrameRecorder

__all__ = ["DEFAULT_TIMEOUT_S", "UiRequests"]

log = logging.getLogger("core.kernel.consent")

Kind = Literal["confirm", "select", "input", "secret"]
DEFAULT_TIMEOUT_S = 120.0
MAX_OPTIONS = 10
UI_FRAME = "ui"
HIDDEN = "(hidden)"
_YES = {"y", "yes", "ok", "sure"}
_NO = {"n", "no", "", "nope"}


@dataclass
class _Open:
    request: UserRequest
    turn: TurnContext
    owner: str
    future: asyncio.Future[str]


class UiRequests(UiGateway):
    """Open questions from extensions, each awaited by the call that asked."""

    def __init__(
        self,
        channel_for: Callable[[str], Any | None],
        frames: FrameRecorder,
        taken: Callable[[str], bool],
        elsewhere: QuestionsElsewhere | None = None,
    ) -> None:
        self._channel_for = channel_for
        self._frames = frames
        self._taken = taken  # an approval's id
        self._open: dict[str, _Open] = {}
        # a worker of a channels/workers split: questions go through the database
        self.elsewhere = elsewhere

    def owns(self, request_id: str) -> bool:
        return request_id.strip().lower() in self._open

    async def ask(
        self,
        ext_id: str,
        turn: TurnContext | None,
        kind: str,
        prompt: str,
        options: Sequence[str],
        timeout_s: float | None,
    ) -> str | None:
        request, turn = self._request(turn, kind, prompt, options, timeout_s)
        assert turn.channel_id is not None and turn.user_id is not None
        channel = self._channel_for(turn.channel_id)
        if channel is None and self.elsewhere is not None:
            return await self._ask_elsewhere(self.elsewhere, ext_id, turn, request)
        if channel is None:
            raise NotAvailableError(f"no channel {turn.channel_id!r} to ask the user on")
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._open[request.id] = _Open(request, turn, turn.sender_id or turn.user_id, future)
        await self._record(ext_id, turn, request, "asked", None)
        try:
            await self._show(channel, turn.user_id, request)
            async with asyncio.timeout(request.timeout_s):
                value: str | None = await future
        except TimeoutError:
            value = None
            await self._close(turn, request.id, "Not answered in time")
        finally:
            self._open.pop(request.id, None)
        await self._record(
            ext_id, turn, request, "answered" if value is not None else "timeout", value
        )
        return value

    async def _ask_elsewhere(
        self, elsewhere: QuestionsElsewhere, ext_id: str, turn: TurnContext, request: UserRequest
    ) -> str | None:
        """The question kept in the database and shown by the channel's process; the
        answer read back from there (``core/kernel/consent/elsewhere.py``)."""
        assert turn.channel_id is not None and turn.user_id is not None
        if request.kind == "secret":  # its answer would cross in the database (ADR 0048)
            raise NotAvailableError("a secret cannot be asked from a worker process")
        request = await elsewhere.keep(request, turn.channel_id, turn.user_id, turn.turn_id or "")
        await self._record(ext_id, turn, request, "asked", None)
        value = await elsewhere.ask(request, turn.channel_id, turn.user_id, _typed(request))
        decision = "answered" if value is not None else "timeout"
        await self._record(ext_id, turn, request, decision, value)
        return value

    async def held_elsewhere(self, request_id: str) -> bool:
        """Whether ``request_id`` is an open question another process asked."""
        return self.elsewhere is not None and await self.elsewhere.asked(request_id) is not None

    def _request(
        self,
        turn: TurnContext | None,
        kind: str,
        prompt: str,
        options: Sequence[str],
        timeout_s: float | None,
    ) -> tuple[UserRequest, TurnContext]:
        if kind not in UI_KINDS:
            raise ValueError(f"kind must be one of {', '.join(UI_KINDS)}, got {kind!r}")
        if kind == "select" and not 0 < len(options) <= MAX_OPTIONS:
            raise ValueError(f"a select needs 1 to {MAX_OPTIONS} options, got {len(options)}")
        if turn is None or not (turn.channel_id and turn.user_id and turn.session_id):
            raise NotAvailableError(
                "ui_request works inside a turn of a conversation (a tool call or a command)"
            )
        request_id = new_request_id()
        while request_id in self._open or self._taken(request_id):
            request_id = new_request_id()
        choices = tuple(RequestOption(str(o), str(o)) for o in options) if kind == "select" else ()
        limit = DEFAULT_TIMEOUT_S if timeout_s is None else max(float(timeout_s), 0.0)
        owner = turn.sender_id or turn.user_id
        checked = cast(Kind, kind)  # one of UI_KINDS, checked above
        return UserRequest(request_id, checked, prompt, choices, owner, limit), turn

    async def answer(self, request_id: str, text: str, responder: Responder) -> str:
        """An answer from ``responder``; the returned line says what happened."""
        found = self._open.get(request_id.strip().lower())
        if found is None and self.elsewhere is not None:
            asked = await self.elsewhere.asked(request_id)
            if asked is not None:
                return await self._answer_elsewhere(self.elsewhere, asked, text, responder)
        if found is None or found.future.done():
            return f"There is no open question {request_id}."
        turn = found.turn
        if not responder.was_asked(turn.channel_id or "", turn.user_id or "", found.owner):
            return f"Only the person who was asked can answer question {request_id}."
        value = _value(found.request, text)
        if value is None:
            return _expected(found.request)
        found.future.set_result(value)
        said = "Answered." if found.request.kind == "secret" else f"Answered: {value}"
        await self._close(turn, found.request.id, said)
        return said

    async def _answer_elsewhere(
        self,
        elsewhere: QuestionsElsewhere,
        asked: AskedElsewhere,
        text: str,
        responder: Responder,
    ) -> str:
        """An answer to a question another process waits on: checked here as a local
        one would be, then written for it to read."""
        request = asked.request
        if not responder.was_asked(asked.channel_id, asked.user_id, request.owner_id or ""):
            return f"Only the person who was asked can answer question {request.id}."
        value = _value(request, text)
        if value is None:
            return _expected(request)
        if not await elsewhere.settle(request.id, value):
            return f"There is no open question {request.id}."
        return "Answered." if request.kind == "secret" else f"Answered: {value}"

    def expire(self, request_id: str) -> bool:
        """The open question ends unanswered now, as when its time runs out (a
        replay gives a question the recording saw time out this outcome)."""
        found = self._open.get(request_id.strip().lower())
        if found is None or found.future.done():
            return False
        found.future.set_exception(TimeoutError())
        return True

    async def answer_off_record(
        self, request_id: str, answer: str, channel_id: str, user_id: str, sender_id: str | None
    ) -> bool:
        """A channel's answer to an open ``secret`` question, taken here instead of
        being journaled; the same checks as ``answer``."""
        if not self._secret(request_id):
            return False
        outcome = await self.answer(request_id, answer, Responder(channel_id, user_id, sender_id))
        log.info("answer to %s from %s (kept off the journal): %s", request_id, channel_id, outcome)
        return True

    async def typed_secret(
        self, text: str, channel_id: str, user_id: str, sender_id: str | None
    ) -> bool:
        """``/answer ID …`` typed for an open ``secret`` question (a channel without
        buttons): answered here, and the outcome line sent back as the command's
        reply would be; the message itself is never journaled."""
        if not self._open or not text.lstrip().startswith("/"):
            return False
        command = parse_command(text)
        if command is None or command.name != "answer":
            return False
        request_id, _, answer = command.args.partition(" ")
        if not self._secret(request_id):
            return False
        outcome = await self.answer(request_id, answer, Responder(channel_id, user_id, sender_id))
        log.info("answer to %s from %s (kept off the journal): %s", request_id, channel_id, outcome)
        channel = self._channel_for(channel_id)
        try:
            if channel is not None:
                async with asyncio.timeout(SHOW_TIMEOUT_S):
                    await channel.send_to_user(user_id, outcome)
        except Exception as exc:  # the answer is taken; only the line saying so is lost
            log.warning("answer to %s not confirmed: %s", request_id, describe_exception(exc))
        return True

    def _secret(self, request_id: str) -> bool:
        found = self._open.get(request_id.strip().lower())
        return found is not None and found.request.kind == "secret"

    async def _show(self, channel: Any, user_id: str, request: UserRequest) -> None:
        async with asyncio.timeout(SHOW_TIMEOUT_S):
            if isinstance(channel, InteractiveChannel):
                await channel.ask_user(user_id, request)
            else:
                await channel.send_to_user(user_id, _typed(request))

    async def _close(self, turn: TurnContext, request_id: str, outcome: str) -> None:
        channel = self._channel_for(turn.channel_id or "")
        if not isinstance(channel, InteractiveChannel) or turn.user_id is None:
            return
        try:
            async with asyncio.timeout(SHOW_TIMEOUT_S):
                await channel.close_request(turn.user_id, request_id, outcome)
        except Exception as exc:
            log.warning("question %s not closed: %s", request_id, describe_exception(exc))

    async def _record(
        self, ext_id: str, turn: TurnContext, request: UserRequest, decision: str, value: str | None
    ) -> None:
        await self._frames.record(
            UI_FRAME,
            ext_id,
            "ui_request",
            turn,
            before={
                "kind": request.kind,
                "prompt": request.prompt,
                "options": [o.value for o in request.options],
            },
            after=HIDDEN if request.kind == "secret" and value is not None else value,
            request_id=request.id,
            decision=decision,
        )


def _value(request: UserRequest, text: str) -> str | None:
    """The answer ``text`` gives ``request`` (``None``: it is none of the choices)."""
    answer = text.strip()
    if request.kind == "confirm":
        lowered = answer.lower().rstrip(".!")
        return "yes" if lowered in _YES else "no" if lowered in _NO else None
    if request.kind == "select":
        for index, option in enumerate(request.options, 1):
            if answer.lower() in (option.value.lower(), option.label.lower(), str(index)):
                return option.value
        return None
    return answer


def _expected(request: UserRequest) -> str:
    if request.kind == "confirm":
        return f"Answer question {request.id} with yes or no."
    choices = ", ".join(o.label for o in request.options)
    return f"Answer question {request.id} with one of: {choices}."


def _typed(request: UserRequest) -> str:
    """The question for a channel without buttons: how to answer it in words."""
    if request.kind == "confirm":
        how = f"Reply /answer {request.id} yes (or no)."
    elif request.kind == "select":
        choices = " / ".join(f"{i}. {o.label}" for i, o in enumerate(request.options, 1))
        how = f"{choices}\nReply /answer {request.id} followed by your choice."
    else:
        how = f"Reply /answer {request.id} followed by your answer."
    return f"{request.prompt}\n{how}"
