"""A turn that waits for the user's approval: paused, asked, resumed once (ADR 0021).

``pause`` takes a run the SDK interrupted, reads which of its calls the gate
asked about (with the final arguments), and hands the turn to the desk,
which stores it and asks. ``resume`` runs when every question is decided
(the ``system.turn.resume`` event, or inline when a new message supersedes
the questions), under the conversation's lock: the run state is restored,
approved calls are approved with the arguments the user saw, the others are
rejected with a reason the model reads, and the turn finishes like any other
— recorded in the ledger with its history items in one transaction, then
delivered through the outbox (ADR 0014), so the user gets one reply.

The paused turn is marked ``resuming`` durably before the run goes on. A
resume that finds it already ``resuming`` follows a crash in the middle of
one: an approved call may have run, so it is not run again — the model
reads that it was interrupted. A tool therefore runs at most once.

While questions are open, the conversation's next message is checked first
(``on_message``): an answer word from the person asked (``yes``, ``always``,
``no``) answers their oldest question; anything else from them denies theirs
("superseded") and the paused turn finishes before the new message is
answered, so the history keeps its order. In a group chat a message from
another member is not about someone else's question: it is answered as
usual and the question stays open for the person asked.

On a channels/workers split (ADR 0102) the turn pauses on one worker, the
answer — ``/approve``, a typed yes, a button — is taken by whichever worker
claims it, and the resumption by whichever claims ``system.turn.resume``: each
step reads the paused turn back from the shared database first
(``ApprovalDesk.sync``); the resumption does so under the conversation's lock
across processes, so a turn another process finished (``done``) is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from agents import RunState

from core.events.models import Event
from core.events.system_payloads import TurnResume, UiAnswer, read_system_payload
from core.events.topics import SystemTopics
from core.extensions.contract import ToolCall, TurnContext
from core.extensions.contract.files import COLLECTING, Artifact, KeptFile
from core.kernel.consent.desk import ApprovalDesk
from core.kernel.consent.gate import ConsentGate
from core.kernel.consent.responder import Responder
from core.kernel.consent.store import PausedTurn
from core.kernel.consent.ui import UiRequests
from core.kernel.consent.wording import denial_for_model, parse_answer
from core.kernel.conversations.ledger import ConversationSession, StoredReply
from core.kernel.conversations.people import Household
from core.kernel.conversations.sessions import Conversations
from core.kernel.files import TurnFiles, for_history
from core.kernel.postprocess import PostQuery, PostSpec
from core.kernel.scale.seam import TurnHandler, TurnLock
from core.kernel.turns.outbox import ReplyOutbox
from core.kernel.turns.turn import Decide, TurnResult

__all__ = ["ApprovalFlow", "Resumer"]

log = logging.getLogger("core.kernel.consent")


class Resumer(Protocol):
    """The turn runner's resume step (``TurnRunner.resume``)."""

    async def resume(
        self,
        state: dict[str, Any],
        input_items: list[dict[str, Any]],
        turn: TurnContext,
        decide: Decide,
        query: PostQuery | None = None,
        session: ConversationSession | None = None,
    ) -> TurnResult: ...


class ApprovalFlow:
    """Pauses and resumes turns around the desk's questions: the turn pipeline's
    ``ConsentStage`` (ADR 0052)."""

    def __init__(
        self,
        desk: ApprovalDesk,
        gate: ConsentGate,
        ui: UiRequests,
        runner: Resumer,
        conversations: Conversations,
        outbox: ReplyOutbox,
        household: Household | None = None,
        *,
        turn_lock: TurnLock,
        files: TurnFiles | None = None,
    ) -> None:
        self.desk = desk
        # whether any turn may wait on its questions: the desk's own answer, asked each turn
        self.waiting: Callable[[], bool] = desk.any_paused
        self.files = files  # the files a resumed turn's tools attach (ADR 0096)
        self._turn_lock = turn_lock
        self.household = household or Household({}, [])
        self.gate = gate
        self.ui = ui
        self._runner = runner
        self._conversations = conversations
        self._outbox = outbox

    # ------------------------------------------------------------ ConsentStage

    def handlers(self) -> list[TurnHandler]:
        """Answered turns resume in order; answers come from buttons and prompts."""
        return [
            (SystemTopics.TURN_RESUME, self._on_resume, "kernel.resume", 8),
            (SystemTopics.UI_ANSWER, self.on_answer_event, "kernel.ui_answer", 8),
        ]

    async def answered(self, message_key: str, text: str, turn: TurnContext) -> bool:
        assert turn.channel_id is not None and turn.user_id is not None
        responder = Responder(turn.channel_id, turn.user_id, turn.sender_id)
        return await self.on_message(message_key, text, responder)

    async def holds(self, message_key: str) -> bool:
        await self.desk.sync(message_key=message_key)
        return self.desk.paused(message_key) is not None

    async def _on_resume(self, event: Event) -> None:
        """Every question of a paused turn is answered: finish it, in order."""
        resume = read_system_payload(TurnResume, event, subscriber="kernel.resume")
        if resume is None:
            return
        async with self._turn_lock(resume.conversation, None):
            await self.resume(resume.message_key)

    # ------------------------------------------------------------ pausing

    async def pause(self, message_id: int, turn: TurnContext, result: TurnResult) -> bool:
        """Store the paused turn and ask its questions (the caller holds the lock).
        When there is nothing to ask — the SDK stopped for arguments the gate could
        not check — the turn goes on at once, those calls rejected."""
        paused = result.paused
        assert paused is not None and turn.turn_id and turn.channel_id and turn.user_id
        assert turn.session_id is not None
        asked = self.gate.take_asked(turn.turn_id)
        self.gate.forget(turn.turn_id)
        waiting = [asked[i.call_id] for i in paused.interruptions if i.call_id in asked]
        earlier = self.desk.paused(turn.turn_id)
        row = PausedTurn(
            turn.turn_id,
            message_id,
            Conversations.key(turn.channel_id, turn.user_id),
            turn.session_id,
            turn.channel_id,
            turn.user_id,
            turn.sender_id or turn.user_id,
            paused.input_items,
            _query_json(paused.query),
            paused.state,
            earlier.round + 1 if earlier else 1,
        )
        await self.desk.ask(row, waiting)
        if not waiting:
            await self.resume(turn.turn_id)
        return True

    # ------------------------------------------------------------ resuming

    async def resume(self, message_key: str) -> None:
        """Finish a paused turn whose questions are all decided (the caller holds the
        conversation's lock). A turn finished already, or still waiting, is left alone
        — also when another process paused, answered or finished it (ADR 0102)."""
        await self.desk.sync(message_key=message_key)
        paused = self.desk.paused(message_key)
        if paused is None or any(a.status == "pending" for a in paused.approvals):
            return
        session = await self._conversations.session_by_id(paused.session_id)
        stored = await session.recorded(message_key)
        usage = None
        kept: list[KeptFile] = []
        if stored is None:
            interrupted = paused.status == "resuming"
            if interrupted:  # a crash in the middle of the last attempt
                for approval in paused.approvals:
                    if approval.status == "approved":
                        await self.desk.record(paused, approval, "interrupted", "kernel")
            await self.desk.mark_resuming(message_key)
            turn = self.household.resolve(_turn_of(paused))

            def decide(state: RunState[Any, Any]) -> None:
                self._apply(state, paused, interrupted)

            query = _query_of(paused.query)
            collected: list[Artifact] = []  # what the approved tools attach (ADR 0096)
            collecting = COLLECTING.set(collected)
            try:
                result = await self._runner.resume(
                    paused.state, paused.input_items, turn, decide, query, session
                )
            finally:
                COLLECTING.reset(collecting)
            if result.paused is not None:
                await self.pause(paused.message_id, turn, result)
                return
            self.gate.forget(message_key)
            answer = result.reply
            if collected and self.files is not None:
                kept, problems = await self.files.keep(turn, collected)
                answer = "\n\n".join([answer, *problems]) if problems else answer
            reply = StoredReply(
                message_key, paused.channel_id, paused.user_id, answer, result.followup
            )
            stored = await session.commit_turn(reply, for_history(result.items), result.records)
            usage = result.usage
        elif not stored.sent and self.files is not None:  # recorded, not sent: its files too
            kept = await self.files.of_turn(self.household.resolve(_turn_of(paused)))
        await self.desk.finish(message_key)
        channel = self._outbox.channel(stored.channel_id) if kept else None
        if kept and self.files is not None:
            await self.files.send(channel, stored.user_id, kept)
        await self._outbox.deliver(paused.message_id, stored, usage=usage)
        if kept and self.files is not None:
            await self.files.tell(channel, stored.user_id, kept)

    def _apply(self, state: RunState[Any, Any], paused: PausedTurn, interrupted: bool) -> None:
        """The user's decisions on the restored state: approve with the arguments the
        user saw, or reject with what the model should read."""
        by_call = {approval.call_id: approval for approval in paused.approvals}
        minutes = self.desk.timeout_s / 60
        for item in state.get_interruptions():
            approval = by_call.get(item.call_id or "")
            tool = item.tool_name or "the tool"
            if approval is not None and approval.status == "approved" and not interrupted:
                call = ToolCall(approval.tool, approval.arguments, approval.call_id)
                self.gate.approved(paused.message_key, call)
                state.approve(item, always_approve=approval.always)
                continue
            if approval is None and self._allowed(tool, paused.channel_id):
                state.approve(item)  # the SDK asked of arguments it could not parse: the
                continue  # tool reports them, as it would without consent
            if approval is None:
                status = "unchecked"
            elif approval.status == "approved":
                status = "interrupted"
                log.warning(
                    "approved call %s of %s was interrupted by a restart; not run again",
                    approval.tool,
                    paused.message_key,
                )
            else:
                status = approval.status
            state.reject(item, rejection_message=denial_for_model(tool, status, minutes))

    def _allowed(self, tool: str, channel_id: str) -> bool:
        gate = self.gate
        return gate.policy.decide(gate.catalog.info_by_name(tool), channel_id).action == "allow"

    # ------------------------------------------------------------ answers

    async def on_message(self, event_key: str, text: str, responder: Responder) -> bool:
        """A message in a conversation with open questions (the caller holds the lock).

        ``True``: it was the answer (nothing else to do). ``False``: it was not; the
        questions put to its sender are denied and their turns finished (another
        member's stay open), and the message is answered as usual after that."""
        conversation = Conversations.key(responder.channel_id, responder.user_id)
        await self.desk.sync(conversation=conversation)
        pending = self.desk.pending_in(conversation, responder)
        if not pending:
            return False  # none, or only another member's: theirs stay open
        choice = parse_answer(text)
        if choice is not None:
            await self.desk.answer(pending[0].id, choice, responder)
            return True
        await self.desk.supersede(conversation, responder)
        for message_key in dict.fromkeys(approval.message_key for approval in pending):
            await self.resume(message_key)
        return False

    async def on_answer_event(self, event: Event) -> None:
        """``system.ui.answer``: a button or the CLI's prompt line, for an approval or
        an extension's question."""
        answer = read_system_payload(UiAnswer, event, subscriber="kernel.consent")
        if answer is None:
            return
        responder = Responder(answer.channel_id, answer.user_id, answer.sender_id)
        if self.ui.owns(answer.request_id) or await self.ui.held_elsewhere(answer.request_id):
            outcome = await self.ui.answer(answer.request_id, answer.answer, responder)
        else:
            choice = parse_answer(answer.answer) or "deny"
            outcome = await self.desk.answer(answer.request_id, choice, responder)
        log.info("answer to %s from %s: %s", answer.request_id, answer.channel_id, outcome)


def _query_json(query: PostQuery | None) -> dict[str, Any]:
    if query is None:
        return {}
    specs = [spec.to_dict() for spec in query.specs]
    return {"original": query.original, "clean": query.clean, "specs": specs}


def _query_of(data: dict[str, Any]) -> PostQuery | None:
    if not data:
        return None
    specs = tuple(PostSpec(str(s["name"]), s.get("param")) for s in data.get("specs", ()))
    return PostQuery(str(data["original"]), str(data["clean"]), specs)


def _turn_of(paused: PausedTurn) -> TurnContext:
    sender = paused.owner_id if paused.owner_id != paused.user_id else None
    return TurnContext(
        channel_id=paused.channel_id,
        user_id=paused.user_id,
        session_id=paused.session_id,
        turn_id=paused.message_key,
        sender_id=sender,
    )
