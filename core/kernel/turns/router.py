"""MessageRouter: ``user.message`` events become turns; replies reach channels.

Turns of one conversation run in order (a per-conversation lock taken in
arrival order); different conversations run concurrently (the bus runs the
handler many at a time). Commands never wait for a turn; those of one
conversation are answered in order among themselves. Every step has a
deadline from ``turns.*`` settings, so a hung model, command or context
provider costs one worker for a bounded time and the user a clear line.

The outcome of a message is durable before it is sent (ADR 0014): the turn
records its reply and new history items in one transaction keyed by the
message (``LedgerSession.commit_turn``), then hands the recorded reply to the
outbox, which sends it and, if that fails, journals it (``system.reply``) for
its own retrying subscriber. A message
delivered again (a crash, a failed step) whose reply is already recorded is
answered from the record: the model is never called twice for it and the
history never holds the exchange twice; a reply already handed over (the
ledger's ``sent_at``, ADR 0072) is not sent again. Slash commands go the same way, so a
command's side effects are not repeated either once its reply is recorded.
The turn's end reaches the lifecycle hooks and observers after its reply is
sent, still under the conversation's lock (``TurnRunner.tell_end``, ADR 0065).

A turn that waits for the user's approval (ADR 0021) is handed to the
consent stage (``ConsentStage``, ADR 0052: the ``ApprovalFlow``) instead of
being recorded: it is stored and asked, and the ``user.message`` is done. The
stage resumes it, under the conversation's lock, when its questions are
answered, and records and delivers it then. While questions are open, the
conversation's next message is first offered to the stage: the answer, or a
new subject that denies them.

What depends on other kernel processes goes through the ``Scale`` seam (ADR
0036, 0052): which handlers this process subscribes, the lock a turn holds,
and (in ``ReplyOutbox``) where its reply goes. One process uses
``LocalScale``: the conversation's in-process lock, everything subscribed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from core.agents.usage import TurnUsage
from core.config import TurnsSettings
from core.events import EventBus
from core.events.models import Event
from core.events.system_payloads import (
    AgentBackground,
    AgentTask,
    TurnCancel,
    UserMessage,
    read_system_payload,
)
from core.events.topics import SystemTopics
from core.extensions.contract import StreamingChannelProvider, TurnContext, TurnOutcome
from core.extensions.contract.files import COLLECTING, Artifact, KeptFile
from core.kernel.commands.table import CommandRegistry, ParsedCommand, parse_command
from core.kernel.conversations.ledger import ConversationSession, StoredReply
from core.kernel.conversations.people import Household
from core.kernel.conversations.sessions import Conversations
from core.kernel.files import Offering, TurnFiles, for_history
from core.kernel.scale.placement import ROUTER_SUBSCRIBER
from core.kernel.scale.seam import Scale, TurnHandler
from core.kernel.shaping.context_chain import ContextChain
from core.kernel.spending import NO_SPENDING, TurnSpending
from core.kernel.turns.cancelling import CANCELLED_REPLY, RunningTurns
from core.kernel.turns.consent_stage import NO_CONSENT, ConsentStage
from core.kernel.turns.notices import KERNEL_SOURCE, Notices
from core.kernel.turns.outbox import OpenStream, ReplyOutbox
from core.kernel.turns.streaming import channel_callbacks
from core.kernel.turns.tool_hints import ToolHints
from core.kernel.turns.turn import APOLOGY, OrchestratorLike, TurnResult, TurnRunner
from core.kernel.turns.warm import PrefixWarmer

__all__ = ["APOLOGY", "MessageRouter", "OrchestratorLike"]

log = logging.getLogger("core.kernel.turns.router")

# shown until the first token while a local model reads the prompt from its start
READING = "reading the conversation…"


class MessageRouter:
    """Routes messages between channels, commands and the orchestrator."""

    def __init__(
        self,
        *,
        bus: EventBus,
        conversations: Conversations,
        commands: CommandRegistry,
        context: ContextChain,
        runner: TurnRunner,
        outbox: ReplyOutbox,
        notices: Notices,
        channels: dict[str, Any],
        scale: Scale,
        consent: ConsentStage = NO_CONSENT,
        household: Household | None = None,
        turns: TurnsSettings | None = None,
        spending: TurnSpending = NO_SPENDING,
        files: TurnFiles | None = None,
        offering: Offering | None = None,
        hints: ToolHints | None = None,
    ) -> None:
        self.bus = bus
        self.household = household or Household({}, [])
        self.conversations = conversations
        self.commands = commands
        self.context = context
        self.limits = turns or TurnsSettings()
        self.runner = runner
        self.channels = channels  # the live table the outbox and the notices send on
        self.scale = scale  # one turn per conversation at a time, in message order
        self.shared = scale.placement.shared  # else no reply is another node's to send
        self.outbox = outbox
        self.notices = notices
        self.consent = consent  # the approval flow's stage (ADR 0021, 0052)
        self.spending = spending  # usage rows with each turn, the budget (ADR 0061)
        self.running = RunningTurns()
        self.files = files  # a turn's artifacts, kept and sent after its reply (ADR 0096)
        self.offering = offering  # the files a message came with, for the model
        self.hints = hints  # tool renderers, for streamed tool calls (ADR 0096)
        # background tasks become workflow runs: listed, cancellable, kept (ADR 0091)
        self.background: Callable[[str, str, str | None], Awaitable[Any]] | None = None
        # a local model that must read the prompt from its start (ADR 0098): a live
        # stream says so, and the turn waits while its server still loads the model
        self.warmer: PrefixWarmer | None = None

    # ------------------------------------------------------------ wiring

    def register_channel(self, channel_id: str, channel: Any) -> None:
        """The channel's extension is active: it gets traffic, and what waited for it."""
        self.channels[channel_id] = channel
        self.notices.channel_up(channel_id)

    def unregister_channel(self, channel_id: str) -> None:
        """The channel's extension is no longer active: nothing is sent to it."""
        self.channels.pop(channel_id, None)

    def subscribe(self) -> None:
        """Subscribe the kernel's handlers to the system topics (those of this
        process's share of the work: ``Scale.subscribe``)."""
        senders = (self.outbox.subscribe, self.notices.subscribe)
        self.scale.subscribe(self.bus, senders, self._turn_handlers())
        self.notices.start()  # what waits for a channel wired before the loop ran

    def _turn_handlers(self) -> list[TurnHandler]:
        """(topic, handler, subscriber id, concurrency) of the turn side."""
        handlers: list[TurnHandler] = [
            (
                SystemTopics.USER_MESSAGE,
                self.handle_user_message,
                ROUTER_SUBSCRIBER,
                self.limits.concurrency,
            ),
            (SystemTopics.TURN_CANCEL, self._on_cancel, "kernel.cancel", 8),
            (SystemTopics.AGENT_TASK, self._on_agent_task, "kernel.agent_task", 4),
            (
                SystemTopics.AGENT_BACKGROUND,
                self._on_agent_background,
                "kernel.agent_background",
                4,
            ),
        ]
        return handlers + self.consent.handlers()

    # ------------------------------------------------------------ user messages

    async def handle_user_message(self, event: Event) -> None:
        """One ``user.message``: a command or a turn, answered exactly once."""
        message = read_system_payload(UserMessage, event, subscriber=ROUTER_SUBSCRIBER)
        if message is None:
            return
        text, user_id, channel_id = message.text, message.user_id, message.channel_id
        key = self.conversations.key(channel_id, user_id)
        with self.conversations.held(key):
            command = parse_command(text)
            if command is not None:
                async with self.conversations.command_lock(key):
                    await self._answer_command(event, command, message, key)
                return
            if not text.strip() and not message.files:
                return
            async with self.scale.turn_lock(key, (event.id, channel_id, user_id)):
                session = await self._live_session(key, channel_id, user_id)
                # a turn paused on questions (under the lock: one may have paused meanwhile)
                waiting = self.consent.waiting()
                turn = self.household.turn(message, session.session_id, message_key(event))
                if waiting and await self._was_an_answer(event, text, turn, session):
                    return
                await self._run_turn(
                    event, text, turn, session, key, message.origin, waiting, message.files
                )

    async def _was_an_answer(
        self, event: Event, text: str, turn: TurnContext, session: ConversationSession
    ) -> bool:
        """Open questions in this conversation get the message first: an answer is
        recorded with no reply (the resumed turn replies); anything else denies them."""
        if event.attempt > 1 or not await self.consent.answered(message_key(event), text, turn):
            return False
        assert turn.channel_id is not None and turn.user_id is not None
        await session.commit_turn(
            StoredReply(message_key(event), turn.channel_id, turn.user_id, ""), []
        )
        return True

    async def _live_session(self, key: str, channel_id: str, user_id: str) -> ConversationSession:
        """The conversation's session; a fresh one when the conversation has been
        quiet longer than ``turns.session_idle_timeout_s`` (the old one expires)."""
        session = await self.conversations.session(key)
        idle_limit = self.limits.session_idle_timeout_s
        if idle_limit is None:
            return session
        last = await session.last_activity()
        if last is None or time.time() - last <= idle_limit:
            return session
        await self.conversations.start_new(key)
        ended = self.household.resolve(
            TurnContext(channel_id=channel_id, user_id=user_id, session_id=session.session_id)
        )
        await self.runner.hooks.session_ended(ended, "expired")
        log.info("conversation %s was idle over %g s: new session", key, idle_limit)
        return await self.conversations.session(key)

    async def _answer_command(
        self, event: Event, command: ParsedCommand, message: UserMessage, key: str
    ) -> None:
        channel_id, user_id = message.channel_id, message.user_id
        session = await self.conversations.session(key)
        stored = await _recorded(session, event)
        if stored is None:
            turn = self.household.turn(message, session.session_id, message_key(event))
            reply = await self.commands.run(command, turn, timeout_s=self.limits.command_timeout_s)
            stored = await session.commit_turn(
                StoredReply(message_key(event), channel_id, user_id, reply), []
            )
        await self._deliver_once(event, session, stored, origin=message.origin)

    async def _run_turn(
        self,
        event: Event,
        text: str,
        turn: TurnContext,
        session: ConversationSession,
        key: str,
        origin: str | None = None,
        waiting: bool = True,
        files: str | None = None,
    ) -> None:
        """Run, record and deliver the turn of a message (``key``: its conversation;
        ``waiting``: some turn may be paused on questions, this one too; ``files``:
        the ids of the files it came with, ADR 0096)."""
        assert turn.user_id is not None and turn.channel_id is not None
        # a first delivery cannot have a recorded reply (``_recorded``): no read
        stored = None if event.attempt <= 1 else await _recorded(session, event)
        stream: OpenStream | None = None
        usage = None  # a reply recorded before (a redelivery) goes without its usage
        result: TurnResult | None = None
        kept: list[KeptFile] = []
        if stored is None:
            if waiting and event.attempt > 1 and await self.consent.holds(message_key(event)):
                return  # delivered again while its questions are open: they stand
            # its channel is another node's
            elsewhere = self.shared and self.scale.answered_elsewhere(origin)
            channel = None if elsewhere else self.channels.get(turn.channel_id)
            callbacks = None
            if channel is not None and isinstance(channel, StreamingChannelProvider):
                await self.outbox.in_order(turn.channel_id, turn.user_id)
                stream = await self.outbox.open_stream(channel, turn.user_id)
                if stream is not None and stream.live:
                    callbacks = channel_callbacks(channel, turn.user_id, self.hints, turn)
            started = time.monotonic()
            # a spent budget refuses (ADR 0061); an admitted turn holds its estimate
            # until it ends, however it ends (ADR 0075)
            refused = await self.spending.before_turn(turn, text)
            budgeted = self.spending.budgeted  # no budget: nothing held, nothing to tell
            collected: list[Artifact] = []  # what the turn's tools attach (ADR 0096)
            collecting = COLLECTING.set(collected)
            parts = None  # the pictures the message came with, as the model sees them
            try:
                if refused is not None:
                    ran: TurnResult | None = TurnResult(refused, [], "blocked")
                else:
                    if files and self.offering is not None:
                        text, parts = await self.offering.offer(turn, files, text)
                    warmer = self.warmer if self.warmer and self.warmer.reads_anew() else None
                    if warmer is not None and channel is not None and callbacks is not None:
                        await channel.on_stream_status(turn.user_id, READING)
                    work = self.runner.run(text, turn, session, callbacks, parts)
                    if warmer is not None:  # a server that loads is waited for
                        work = warmer.after_ready(work, self.limits.timeout_s)
                    ran = await self.running.run(key, work)
                result = ran if ran is not None else await self._cancelled(event, turn, started)
                if result.paused is not None:
                    if stream is not None:
                        await self.outbox.end_stream(stream)
                        stream = None
                    if await self.consent.pause(event.id, turn, result):
                        return
                answer = result.reply
                if collected and self.files is not None:
                    kept, problems = await self.files.keep(turn, collected)
                    answer = "\n\n".join([answer, *problems]) if problems else answer
                reply = StoredReply(
                    message_key(event), turn.channel_id, turn.user_id, answer, result.followup
                )
                # its pictures were for this turn: the history keeps their names, not bytes
                items = for_history(result.items) if parts else result.items
                stored = await session.commit_turn(reply, items, result.records)
            finally:
                COLLECTING.reset(collecting)
                if budgeted:
                    await self.spending.end_turn(turn)
            usage = result.usage
            answered = budgeted and result.status == "answered"
            notice = await self.spending.after_turn(turn) if answered else None
            if notice is not None:
                await self.notices.notify_user(notice, key=f"budget-notice:{message_key(event)}")
        elif not stored.sent and self.files is not None:  # recorded, not sent: its files too
            kept = await self.files.of_turn(turn)
        if kept and self.files is not None:  # a file channel's, before the reply ends
            await self.files.send(self.channels.get(turn.channel_id), turn.user_id, kept)
        await self._deliver_once(event, session, stored, stream, origin, usage)
        if kept and self.files is not None:  # any other channel's, a line after the reply
            await self.files.tell(self.channels.get(turn.channel_id), turn.user_id, kept)
        if result is not None:  # the turn's end, off the reply's path (ADR 0065)
            await self.runner.tell_end(turn, result)

    async def _deliver_once(
        self,
        event: Event,
        session: ConversationSession,
        stored: StoredReply,
        stream: OpenStream | None = None,
        origin: str | None = None,
        usage: TurnUsage | None = None,
    ) -> None:
        """Hand the recorded reply over once: a message delivered again after its
        process died between sending and the bus hearing it was done is not answered
        twice (the soak of issue 41 saw two copies). Only a crash between the send and
        ``mark_sent`` (one small write) can still send it again."""
        if stored.sent:
            if stream is not None:
                await self.outbox.end_stream(stream)
            log.info("reply to %s was sent before; not sent again", stored.message_key)
            return
        await self.outbox.deliver(event.id, stored, stream, origin, usage)
        await session.mark_sent(stored.message_key)

    async def _on_cancel(self, event: Event) -> None:
        """The user stopped their turn; a channel may only stop its own users' turns."""
        cancel = read_system_payload(TurnCancel, event, subscriber="kernel.cancel")
        if cancel is None:
            return
        if event.source != cancel.channel_id:
            log.warning("%s may not cancel turns on %s", event.source, cancel.channel_id)
            return
        key = self.conversations.key(cancel.channel_id, cancel.user_id)
        if not self.running.cancel(key):
            log.info("nothing to cancel for %s", key)

    async def _cancelled(self, event: Event, turn: TurnContext, started: float) -> TurnResult:
        """A turn the user stopped: its end for the hooks, its mark in the journal."""
        elapsed_ms = (time.monotonic() - started) * 1000
        await self.runner.ended(turn, TurnOutcome("cancelled", CANCELLED_REPLY, elapsed_ms))
        await self.bus.publish(
            SystemTopics.TURN_CANCELLED,
            "kernel",
            {
                "message_key": message_key(event),
                "channel_id": turn.channel_id,
                "user_id": turn.user_id,
                "after_ms": round(elapsed_ms),
            },
        )
        log.info("turn %s cancelled by the user after %.0f ms", message_key(event), elapsed_ms)
        return TurnResult(CANCELLED_REPLY, [], "cancelled")

    # ------------------------------------------------------------ proactive

    async def notify_user(
        self,
        text: str,
        channel_id: str | None = None,
        *,
        user_id: str | None = None,
        key: str | None = None,
        source: str = KERNEL_SOURCE,
    ) -> None:
        """A proactive message, where its channel lives (``Notices.notify_user``)."""
        await self.notices.notify_user(text, channel_id, user_id=user_id, key=key, source=source)

    async def _on_agent_task(self, event: Event) -> None:
        task = read_system_payload(AgentTask, event, subscriber="kernel.agent_task")
        if task is None or not task.prompt:
            return
        reply = await self.invoke_agent(task.prompt, source=event.source)
        key = f"agent-task-reply:{event.id}"
        await self.notify_user(reply, task.channel_id, user_id=task.user_id, key=key)

    async def _on_agent_background(self, event: Event) -> None:
        task = read_system_payload(AgentBackground, event, subscriber="kernel.agent_background")
        if task is not None and task.prompt and self.background is not None:
            await self.background(task.prompt, event.source, task.correlation_id or str(event.id))
        elif task is not None and task.prompt:
            reply = await self.invoke_agent(task.prompt, source=event.source)
            log.info("background task from %s done: %.200s", event.source, reply)

    # ------------------------------------------------------------ agent gateway

    async def invoke_agent(self, prompt: str, *, source: str) -> str:
        """One stateless orchestrator run (context chain in the instructions), under the
        turn deadline."""
        return await self.runner.run_stateless(prompt, source=source)

    async def invoke_agent_streamed(
        self,
        prompt: str,
        *,
        source: str,
        on_chunk: Callable[[str], Awaitable[None]] | None,
        on_tool_call: Callable[[str], Awaitable[None]] | None,
    ) -> str:
        return await self.runner.run_stateless_streamed(
            prompt, source=source, on_chunk=on_chunk, on_tool_call=on_tool_call
        )

    async def enrich_prompt(self, prompt: str, agent_id: str | None) -> str:
        return await self.context.enrich(prompt, TurnContext(agent_id=agent_id or "orchestrator"))


async def _recorded(session: ConversationSession, event: Event) -> StoredReply | None:
    """The recorded reply of a message delivered before. A first delivery
    (``attempt == 1``) cannot have one, so it skips the read; should one exist
    all the same, ``commit_turn`` keeps the first and returns it."""
    return None if event.attempt <= 1 else await session.recorded(message_key(event))


def message_key(event: Event) -> str:
    """The ledger key of a ``user.message``: its id, plus its time so that a journal
    started afresh (ids from 1 again) never matches an old reply in sessions.db."""
    return f"{event.id}@{event.created_at:.6f}"
