"""The questions of paused turns: asked, answered, timed out, superseded (ADR 0021).

``ApprovalDesk`` keeps every open paused turn in memory (read back from
``sessions.db`` at start) and decides its questions:

- ``ask`` stores the paused turn and its questions (durably, before anyone
  is asked), journals an ``asked`` frame, shows each question on the
  conversation's channel — buttons or an inline prompt on an
  ``InteractiveChannel``, a line naming ``/approve ID`` elsewhere — and arms a
  timer of ``policy.approval_timeout_s``;
- ``answer`` accepts an answer only from the conversation and the sender the
  question belongs to (in a group: the member who asked); ``always`` also
  records a grant;
- ``expire`` (the timer) and ``supersede`` (a new message from the person
  asked instead of an answer) deny, and the user is told; in a group chat
  another member's message leaves the question open.

Each decision is one conditional update, journaled as a ``hook.approval``
frame, and closes the question on the channel. When the last question of a
turn is decided a ``system.turn.resume`` event is journaled; the router
resumes the turn under the conversation's lock. After a restart ``start``
re-arms the timers, asks the pending questions again and re-journals the
resumptions still due, so nothing is lost between a decision and its turn.

On a database other kernel processes share (a channels/workers split, ADR
0102) the memory is only this process's copy: ``sync`` reads back the turns an
answer, a message or a resumption names before they are used (another worker
may have paused, answered or finished them), and a question whose channel runs
in another process is shown there as a notice (``system.user.notify``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from core.events.system_payloads import TurnResume, UserNotify
from core.events.topics import SystemTopics
from core.extensions.contract import (
    InteractiveChannel,
    RequestOption,
    TurnContext,
    UserRequest,
)
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.consent.gate import APPROVAL_FRAME, AskedCall
from core.kernel.consent.policy import Grant
from core.kernel.consent.responder import Responder
from core.kernel.consent.store import Approval, ApprovalStatus, ApprovalStore, PausedTurn
from core.kernel.consent.wording import (
    APPROVAL_OPTIONS,
    Choice,
    describe_call,
    new_request_id,
    question_text,
)
from core.kernel.conversations.people import Household
from core.kernel.hooks import FrameRecorder
from core.kernel.hooks.frames import FrameSink

__all__ = ["ApprovalDesk"]

log = logging.getLogger("core.kernel.consent")

SHOW_TIMEOUT_S = 30.0
_OUTCOMES: dict[ApprovalStatus, str] = {
    "approved": "Allowed",
    "denied": "Denied",
    "timeout": "Not answered in time: denied",
    "superseded": "A new message came instead: denied",
}


class ApprovalDesk:
    """Open paused turns and their questions; every decision durable and journaled."""

    def __init__(
        self,
        store: ApprovalStore,
        bus: FrameSink,
        frames: FrameRecorder,
        channel_for: Callable[[str], Any | None],
        *,
        timeout_s: float,
        household: Household | None = None,
    ) -> None:
        self._store = store
        self._household = household or Household({}, [])
        self._bus = bus
        self._frames = frames
        self._channel_for = channel_for
        self.timeout_s = timeout_s
        self._turns: dict[str, PausedTurn] = {}
        self._grants: dict[str, Grant] = {}  # by ``Grant.key``: each person's own
        self._timers: dict[str, asyncio.Task[None]] = {}

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Read what was open when the kernel last stopped (no side effects yet)."""
        turns, grants = await self._store.open()
        self._turns = {turn.message_key: turn for turn in turns}
        self._grants = {grant.tool: Grant.stored(grant) for grant in grants}

    async def start(self) -> None:
        """Once the bus runs: resume what is due, time out what is late, re-ask the rest."""
        for turn in list(self._turns.values()):
            if turn.status == "resuming" or not _pending(turn):
                await self._resume_due(turn)
                continue
            for approval in _pending(turn):
                if approval.expires_at <= time.time():
                    await self.expire(approval.id)
                else:
                    self._arm(approval)
                    await self._show(turn, approval, again=True)

    async def stop(self) -> None:
        timers = list(self._timers.values())
        self._timers.clear()
        for task in timers:
            task.cancel()
        await asyncio.gather(*timers, return_exceptions=True)

    async def aclose(self) -> None:
        """Give back the store's resources (a PostgreSQL pool), after the bus stopped."""
        await self._store.aclose()

    # ------------------------------------------------------------ grants (GrantBook)

    def grant_for(self, tool: str, person: str | None = None) -> Grant | None:
        """``person``'s "always allow" of ``tool`` (``None``: the owner's)."""
        return self._grants.get(tool if person is None else f"{tool}@{person}")

    def grants(self) -> list[Grant]:
        """Every person's "always allow" answers (what the owner's ``/policy`` lists)."""
        return [self._grants[key] for key in sorted(self._grants)]

    def grants_of(self, person: str | None) -> list[Grant]:
        """One person's answers (``None``: the owner's): what a member's ``/policy`` lists."""
        return [grant for grant in self.grants() if grant.person == person]

    async def revoke(self, tool: str) -> bool:
        """Forget every person's "always allow" of ``tool`` (the owner's command): it
        asks again."""
        keys = [key for key, grant in self._grants.items() if grant.tool == tool]
        for key in keys:
            del self._grants[key]
        revoked = [await self._store.revoke(key) for key in keys or [tool]]
        return any(revoked)

    async def sync(
        self,
        *,
        message_key: str | None = None,
        approval_id: str | None = None,
        conversation: str | None = None,
    ) -> None:
        """On a shared database: the open turns of the message, the question or the
        conversation named read back into memory (and, for a conversation, every
        "always allow" answer: another process may have given or revoked one). Their
        open questions' timers run here too: the process that asked may be gone, and
        only the first decision counts. Alone, the memory is the truth: nothing is read."""
        if not self._store.shared:
            return
        stored = await self._store.turns(
            message_key=message_key, approval_id=approval_id, conversation=conversation
        )
        wanted = (approval_id or "").strip().lower()
        for key, turn in list(self._turns.items()):
            if (
                key == message_key
                or turn.conversation == conversation
                or any(a.id == wanted for a in turn.approvals)
            ):
                del self._turns[key]
        for turn in stored:
            self._turns[turn.message_key] = turn
            for approval in _pending(turn):
                self._arm(approval)
        if conversation is not None:
            self._grants = {g.tool: Grant.stored(g) for g in await self._store.grants()}

    # ------------------------------------------------------------ queries

    def paused(self, message_key: str) -> PausedTurn | None:
        return self._turns.get(message_key)

    def any_paused(self) -> bool:
        """Whether any turn may wait on its questions (none: no message can answer one);
        on a shared database another process's may, unseen here."""
        return self._store.shared or bool(self._turns)

    def pending_in(self, conversation: str, asked: Responder | None = None) -> list[Approval]:
        """The conversation's unanswered questions, oldest first; with ``asked``, only
        those put to that responder (in a group chat: the member who asked)."""
        return [
            approval
            for turn in self._turns.values()
            if turn.conversation == conversation
            and (asked is None or asked.was_asked(turn.channel_id, turn.user_id, turn.owner_id))
            for approval in _pending(turn)
        ]

    def holds(self, approval_id: str) -> bool:
        """Whether ``approval_id`` is an open question (ids are never shared)."""
        return self._find(approval_id) is not None

    def open_count(self) -> int:
        return sum(len(_pending(turn)) for turn in self._turns.values())

    def show(self, approval_id: str, responder: Responder) -> str:
        """The whole question, for whoever it was put to (``/approve ID show``): what a
        channel that cannot show a long call at once points to instead of a silent cut."""
        found = self._find(approval_id)
        if found is None:
            return f"There is no open question {approval_id}."
        turn, approval = found
        if not responder.was_asked(turn.channel_id, turn.user_id, turn.owner_id):
            return f"Only the person who was asked can see question {approval_id}."
        return f"Question {approval.id}: {question_text(approval.tool, approval.arguments)}"

    # ------------------------------------------------------------ asking

    async def ask(self, turn: PausedTurn, asked: Sequence[AskedCall]) -> PausedTurn:
        """Store the paused turn and its questions, then show each one."""
        expires = time.time() + self.timeout_s
        questions = [
            Approval(
                new_request_id(),
                turn.message_key,
                turn.round,
                a.call.call_id or "",
                a.call.name,
                a.call.arguments,
                expires,
            )
            for a in asked
        ]
        stored = await self._store.save(turn, questions)
        self._turns[stored.message_key] = stored
        ids = ", ".join(approval.id for approval in stored.approvals)
        log.info("turn %s waits for the answer to question(s) %s", turn.message_key, ids)
        reasons = {a.call.call_id or "": a.verdict.reason for a in asked}
        for approval in stored.approvals:
            await self.record(stored, approval, "asked", "policy", reasons.get(approval.call_id))
            self._arm(approval)
            await self._show(stored, approval)
        return stored

    async def _show(self, turn: PausedTurn, approval: Approval, *, again: bool = False) -> None:
        """The question on the conversation's channel; a failure is logged (``/approve``
        still works, and the timer still runs)."""
        channel = self._channel_for(turn.channel_id)
        prompt = question_text(approval.tool, approval.arguments)
        if again:
            prompt = f"(Still waiting) {prompt}"
        try:
            async with asyncio.timeout(SHOW_TIMEOUT_S):
                if isinstance(channel, InteractiveChannel):
                    options = tuple(RequestOption(v, label) for v, label in APPROVAL_OPTIONS)
                    request = UserRequest(
                        approval.id, "approval", prompt, options, turn.owner_id, self.timeout_s
                    )
                    await channel.ask_user(turn.user_id, request)
                elif channel is not None:
                    await channel.send_to_user(turn.user_id, self._typed_question(prompt, approval))
                elif self._store.shared:  # the channel runs in another process (ADR 0102):
                    # asked again once, however many workers start meanwhile
                    key = f"approval:{approval.id}{':again' if again else ''}"
                    await self._notify(turn, self._typed_question(prompt, approval), key)
                else:
                    log.warning("no channel %r to ask question %s", turn.channel_id, approval.id)
        except Exception as exc:
            log.warning(
                "question %s not shown on %s: %s",
                approval.id,
                turn.channel_id,
                describe_exception(exc),
            )

    def _typed_question(self, prompt: str, approval: Approval) -> str:
        minutes = f"{self.timeout_s / 60:g}"
        return (
            f"{prompt}\nReply /approve {approval.id} (once), /approve {approval.id} always, "
            f"or /deny {approval.id} — or just yes / no. No answer in {minutes} min means no."
        )

    # ------------------------------------------------------------ deciding

    async def answer(self, approval_id: str, choice: Choice, responder: Responder) -> str:
        """Apply an answer from ``responder``; the returned line says what happened."""
        await self.sync(approval_id=approval_id)
        found = self._find(approval_id)
        if found is None:
            return f"There is no open question {approval_id}."
        turn, approval = found
        if not responder.was_asked(turn.channel_id, turn.user_id, turn.owner_id):
            log.warning(
                "answer to %s from %s:%s refused: not its owner",
                approval_id,
                responder.channel_id,
                responder.who,
            )
            return f"Only the person who was asked can answer question {approval_id}."
        status: ApprovalStatus = "denied" if choice == "deny" else "approved"
        by = f"{responder.channel_id}:{responder.who}"
        if not await self._decide(turn, approval, status, by, always=choice == "always"):
            return f"Question {approval_id} was already answered."
        call = describe_call(approval.tool, approval.arguments)
        if choice == "deny":
            return f"Denied: {call} will not run."
        if choice == "always":
            return f"Allowed: {call} runs now, and {approval.tool} will not ask again."
        return f"Allowed once: {call} runs now."

    async def expire(self, approval_id: str) -> None:
        """No answer within ``policy.approval_timeout_s``: denied, and the user is told."""
        await self.sync(approval_id=approval_id)
        found = self._find(approval_id)
        if found is not None:
            await self._decide(*found, "timeout", "timeout")

    async def supersede(self, conversation: str, responder: Responder) -> None:
        """A new message instead of an answer: every open question there that was put
        to ``responder`` is denied. Another member's message in a group chat is not
        an answer to someone else's question, so theirs stay open."""
        by = f"{responder.channel_id}:{responder.who}"
        for approval in self.pending_in(conversation, responder):
            found = self._find(approval.id)
            if found is not None:
                await self._decide(*found, "superseded", by)

    async def _decide(
        self,
        turn: PausedTurn,
        approval: Approval,
        status: ApprovalStatus,
        by: str,
        *,
        always: bool = False,
    ) -> bool:
        if not await self._store.decide(approval.id, status, by, always):
            return False
        decided = replace(approval, status=status, decided_by=by, always=always)
        turn = replace(
            turn, approvals=tuple(decided if a.id == approval.id else a for a in turn.approvals)
        )
        self._turns[turn.message_key] = turn
        timer = self._timers.pop(approval.id, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()
        if always and status == "approved":
            sender = turn.owner_id if turn.owner_id != turn.user_id else None
            person = self._household.key_of(turn.channel_id, turn.user_id, sender)
            grant = Grant(approval.tool, by, turn.channel_id, time.time(), person)
            await self._store.grant(replace(grant, tool=grant.key))
            self._grants[grant.key] = grant
        kind = "always" if always and status == "approved" else status
        await self.record(turn, decided, kind, by)
        await self._close(turn, decided, status, always)
        if not _pending(turn):
            await self._resume_due(turn)
        return True

    async def _close(
        self, turn: PausedTurn, approval: Approval, status: ApprovalStatus, always: bool
    ) -> None:
        outcome = _OUTCOMES[status]
        if status == "approved" and always:
            outcome = "Always allowed"
        elif status == "approved":
            outcome = "Allowed once"
        outcome = f"{outcome}: {describe_call(approval.tool, approval.arguments)}"
        channel = self._channel_for(turn.channel_id)
        try:
            async with asyncio.timeout(SHOW_TIMEOUT_S):
                if isinstance(channel, InteractiveChannel):
                    await channel.close_request(turn.user_id, approval.id, outcome)
                elif channel is not None and status == "timeout":
                    await channel.send_to_user(turn.user_id, f"{outcome} (question {approval.id}).")
                elif self._store.shared and status == "timeout":
                    text = f"{outcome} (question {approval.id})."
                    await self._notify(turn, text, f"approval:{approval.id}:timeout")
        except Exception as exc:
            log.warning(
                "question %s not closed on %s: %s",
                approval.id,
                turn.channel_id,
                describe_exception(exc),
            )

    async def _notify(self, turn: PausedTurn, text: str, key: str) -> None:
        """``text`` for the process that runs the turn's channel to send."""
        notice = UserNotify(text=text, channel_id=turn.channel_id, user_id=turn.user_id)
        await self._bus.publish(
            SystemTopics.USER_NOTIFY, "kernel", notice.to_payload(), idempotency_key=key
        )

    async def _resume_due(self, turn: PausedTurn) -> None:
        """Every question is decided: journal the resumption (once per round)."""
        await self._bus.publish(
            SystemTopics.TURN_RESUME,
            "kernel",
            TurnResume(message_key=turn.message_key, conversation=turn.conversation).to_payload(),
            idempotency_key=f"resume:{turn.message_key}:{turn.round}",
        )

    # ------------------------------------------------------------ the turn's state

    async def mark_resuming(self, message_key: str) -> None:
        """Durably, before the resumed run: a crash from here on must not run an
        approved call twice (``ApprovalFlow`` then reports it as interrupted)."""
        await self._store.mark(message_key, "resuming")
        turn = self._turns.get(message_key)
        if turn is not None:
            self._turns[message_key] = replace(turn, status="resuming")

    async def finish(self, message_key: str) -> None:
        await self._store.mark(message_key, "done")
        self._turns.pop(message_key, None)

    # ------------------------------------------------------------ helpers

    def _find(self, approval_id: str) -> tuple[PausedTurn, Approval] | None:
        wanted = approval_id.strip().lower()
        for turn in self._turns.values():
            for approval in _pending(turn):
                if approval.id == wanted:
                    return turn, approval
        return None

    def _arm(self, approval: Approval) -> None:
        async def expire_later() -> None:
            await asyncio.sleep(max(0.0, approval.expires_at - time.time()))
            await self.expire(approval.id)

        if approval.id not in self._timers:
            task = asyncio.create_task(expire_later(), name=f"approval-{approval.id}")
            self._timers[approval.id] = task
            task.add_done_callback(lambda done: self._forget_timer(approval.id, done))

    def _forget_timer(self, approval_id: str, task: asyncio.Task[None]) -> None:
        if self._timers.get(approval_id) is task:
            del self._timers[approval_id]
        error = None if task.cancelled() else task.exception()
        if error is not None:
            log.error("timing out question %s failed: %s", approval_id, describe_exception(error))

    async def record(
        self,
        turn: PausedTurn,
        approval: Approval,
        decision: str,
        by: str,
        reason: str | None = None,
    ) -> None:
        """Journal one decision about ``approval`` as a ``hook.approval`` frame."""
        context = TurnContext(
            channel_id=turn.channel_id,
            user_id=turn.user_id,
            session_id=turn.session_id,
            turn_id=turn.message_key,
        )
        await self._frames.record(
            APPROVAL_FRAME,
            "policy",
            "consent",
            context,
            before=approval.arguments,
            tool=approval.tool,
            call_id=approval.call_id,
            approval_id=approval.id,
            decision=decision,
            by=by,
            reason=reason,
        )


def _pending(turn: PausedTurn) -> list[Approval]:
    return [approval for approval in turn.approvals if approval.status == "pending"]
