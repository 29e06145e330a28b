"""MessageRouter: ``user.message`` events become turns; replies reach channels.

Turns of one conversation run in order (a per-conversation lock taken in
arrival order); different conversations run concurrently (the bus runs the
handler many at a time). Commands never wait for a turn. The bus delivery is
acknowledged only when the handler returns, i.e. after the reply was handed
to the channel — a crash mid-turn means the message is answered after
restart, never dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agents import Agent, Runner
from agents.memory import Session

from core.events import EventBus
from core.events.models import Event
from core.events.topics import SystemTopics
from core.extensions.contract import StreamingChannelProvider, TurnContext
from core.extensions.lifecycle import describe_exception
from core.kernel.commands import CommandRegistry, parse_command
from core.kernel.context_chain import ContextChain
from core.kernel.conversations import Conversations
from core.kernel.streaming import run_streamed_turn

log = logging.getLogger("core.kernel.router")

TURN_CONCURRENCY = 32
APOLOGY = "Sorry, I could not get an answer from the model this time ({reason}). Please try again."


class OrchestratorLike(Protocol):
    def agent(self, extra_instructions: str | None = None) -> Agent[Any]: ...


class MessageRouter:
    """Routes messages between channels, commands and the orchestrator."""

    def __init__(
        self,
        *,
        bus: EventBus,
        conversations: Conversations,
        commands: CommandRegistry,
        context: ContextChain,
        orchestrator: OrchestratorLike,
        default_channel: str,
        max_turns: int = 10,
        user_facing_errors: tuple[type[Exception], ...] = (),
    ) -> None:
        self.bus = bus
        self.conversations = conversations
        self.commands = commands
        self.context = context
        self.orchestrator = orchestrator
        self.default_channel = default_channel
        self.max_turns = max_turns
        self.user_facing_errors = user_facing_errors
        self.channels: dict[str, Any] = {}

    # ------------------------------------------------------------ wiring

    def register_channel(self, channel_id: str, channel: Any) -> None:
        self.channels[channel_id] = channel

    def subscribe(self) -> None:
        """Subscribe the kernel's handlers to the system topics."""
        self.bus.subscribe(
            SystemTopics.USER_MESSAGE,
            self.handle_user_message,
            "kernel.router",
            concurrency=TURN_CONCURRENCY,
        )
        self.bus.subscribe(
            SystemTopics.USER_NOTIFY, self._on_notify, "kernel.notify", concurrency=8
        )
        self.bus.subscribe(
            SystemTopics.AGENT_TASK, self._on_agent_task, "kernel.agent_task", concurrency=4
        )
        self.bus.subscribe(
            SystemTopics.AGENT_BACKGROUND,
            self._on_agent_background,
            "kernel.agent_background",
            concurrency=4,
        )

    # ------------------------------------------------------------ user messages

    async def handle_user_message(self, event: Event) -> None:
        payload = event.payload
        text = str(payload.get("text") or "")
        user_id = str(payload.get("user_id") or "user")
        channel_id = str(payload.get("channel_id") or self.default_channel)
        key = self.conversations.key(channel_id, user_id)
        turn = TurnContext(
            channel_id=channel_id, user_id=user_id, session_id=self.conversations.session_id(key)
        )
        command = parse_command(text)
        if command is not None:
            await self._send(channel_id, user_id, await self.commands.run(command, turn))
            return
        if not text.strip():
            return
        async with self.conversations.lock(key):
            session = self.conversations.session(key)
            turn = TurnContext(
                channel_id=channel_id, user_id=user_id, session_id=session.session_id
            )
            await self._run_turn(text, turn, session, self.channels.get(channel_id))

    async def _run_turn(self, text: str, turn: TurnContext, session: Session, channel: Any) -> None:
        assert turn.user_id is not None and turn.channel_id is not None
        streaming = channel is not None and isinstance(channel, StreamingChannelProvider)
        if streaming:
            await channel.on_stream_start(turn.user_id)
        try:
            agent = self.orchestrator.agent(await self.context.build(text, turn) or None)
            if streaming:
                await run_streamed_turn(agent, text, session, channel, turn, self.max_turns)
                return
            result = await Runner.run(
                agent, text, session=session, max_turns=self.max_turns, context=turn
            )
            reply = str(result.final_output or "")
        except self.user_facing_errors as exc:
            reply = str(exc)
        except Exception as exc:
            log.error(
                "turn for %s failed: %s", turn.session_id, describe_exception(exc), exc_info=True
            )
            reply = APOLOGY.format(reason=_short_reason(exc))
        if streaming:
            await channel.on_stream_end(turn.user_id, reply)
        else:
            await self._send(turn.channel_id, turn.user_id, reply)

    async def _send(self, channel_id: str, user_id: str, text: str) -> None:
        channel = self.channels.get(channel_id)
        if channel is None:
            log.warning(
                "no channel %r for a reply to %s; dropping: %.80s", channel_id, user_id, text
            )
            return
        await channel.send_to_user(user_id, text)

    # ------------------------------------------------------------ proactive

    async def notify_user(
        self, text: str, channel_id: str | None = None, *, user_id: str | None = None
    ) -> None:
        """Deliver a proactive message on the named or the default channel: to
        ``user_id`` there (``send_to_user``) when given, else to the channel's own
        default target (``send_message``). A user id belongs to its channel, so a
        fallback to the default channel drops it (ADR 0017)."""
        target = channel_id or self.default_channel
        channel = self.channels.get(target)
        if channel is None:
            channel, user_id = self.channels.get(self.default_channel), None
        if channel is None:
            log.warning("no channel %r for a notification; dropping: %.80s", target, text)
            return
        if user_id:
            await channel.send_to_user(user_id, text)
        else:
            await channel.send_message(text)

    async def _on_notify(self, event: Event) -> None:
        text = str(event.payload.get("text") or "")
        if text:
            payload = event.payload
            await self.notify_user(
                text, payload.get("channel_id"), user_id=notify_target_user(payload)
            )

    async def _on_agent_task(self, event: Event) -> None:
        prompt = str(event.payload.get("prompt") or "")
        if not prompt:
            return
        reply = await self.invoke_agent(prompt, source=event.source)
        payload = event.payload
        await self.notify_user(
            reply, payload.get("channel_id"), user_id=notify_target_user(payload)
        )

    async def _on_agent_background(self, event: Event) -> None:
        prompt = str(event.payload.get("prompt") or "")
        if prompt:
            reply = await self.invoke_agent(prompt, source=event.source)
            log.info("background task from %s done: %.200s", event.source, reply)

    # ------------------------------------------------------------ agent gateway

    async def invoke_agent(self, prompt: str, *, source: str) -> str:
        """One stateless orchestrator run (context chain in the instructions)."""
        turn = TurnContext(agent_id="orchestrator", channel_id=None, user_id=source)
        try:
            agent = self.orchestrator.agent(await self.context.build(prompt, turn) or None)
            result = await Runner.run(agent, prompt, max_turns=self.max_turns, context=turn)
            return str(result.final_output or "")
        except self.user_facing_errors as exc:
            return str(exc)
        except Exception as exc:
            log.error("agent run for %s failed: %s", source, describe_exception(exc), exc_info=True)
            return APOLOGY.format(reason=_short_reason(exc))

    async def invoke_agent_streamed(
        self,
        prompt: str,
        *,
        source: str,
        on_chunk: Callable[[str], Awaitable[None]] | None,
        on_tool_call: Callable[[str], Awaitable[None]] | None,
    ) -> str:
        from core.kernel.streaming import stream_text

        turn = TurnContext(agent_id="orchestrator", channel_id=None, user_id=source)
        agent = self.orchestrator.agent(await self.context.build(prompt, turn) or None)
        return await stream_text(agent, prompt, None, turn, self.max_turns, on_chunk, on_tool_call)

    async def enrich_prompt(self, prompt: str, agent_id: str | None) -> str:
        return await self.context.enrich(prompt, TurnContext(agent_id=agent_id or "orchestrator"))


def notify_target_user(payload: dict[str, Any]) -> str | None:
    """The optional ``user_id`` of a notification payload (who a reminder is for)."""
    value = payload.get("user_id")
    return None if value is None or value == "" else str(value)


def _short_reason(exc: BaseException) -> str:
    text = describe_exception(exc)
    return text if len(text) <= 120 else text[:117] + "..."
