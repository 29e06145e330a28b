"""Delivering recorded replies: first attempt inline, retries through the journal.

A reply reaches this module only after it is recorded (``LedgerSession.
commit_turn``: the ledger row is the durable outbox entry, written in the
same transaction as the history). ``deliver`` makes the first attempt at
once, under ``turns.send_timeout_s``, while the turn still holds its
conversation's lock, so replies and streams of one conversation keep their
order. If that attempt fails, the reply is journaled as a ``system.reply``
event (idempotency key ``reply:<message event id>``) and the ``kernel.reply``
subscriber re-sends the *stored* text with the bus's retries and backoff —
the turn is never run again (ADR 0014).

The first attempt carries the turn's token usage to a channel whose reply
method takes ``usage=`` (``channel_protocols.takes_usage``); a retry does not
(the journal keeps the text alone).

A streaming channel whose stream for the message is open gets
``on_stream_end`` with the stored text; anything else, including a reply
this process re-sends after a restart or a retry, goes through
``send_to_user`` (another node's reply: see below). A
recorded follow-up (post-processor output, ADR 0023) is sent right after
the answer with ``send_to_user``; when only it failed, only it is retried
(its own ``system.reply``, key ``reply:<id>:followup``).

Where several kernel processes share the work (ADR 0036), the ``Scale`` seam
(ADR 0052) binds the retry topic to this node and forwards a reply whose
channel another node runs; with one process it forwards nothing. A reply
another node's turn forwarded here reaches a streaming channel as that
message's stream — ``on_stream_start``, then ``on_stream_end`` with the whole
text — as it would from a turn run here that streamed no text: a channel that
waits for the end of the stream (the CLI) knows it from a notification
(ADR 0070).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from core.agents.usage import TurnUsage
from core.events import EventBus
from core.events.models import Event
from core.extensions.contract import StreamingChannelProvider
from core.extensions.contract.channels import USAGE_KEYWORD, takes_usage
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.conversations.ledger import StoredReply
from core.kernel.scale.placement import REPLY_SUBSCRIBER
from core.kernel.scale.seam import Scale

__all__ = [
    "REPLY_SUBSCRIBER",
    "OpenStream",
    "ReplyOutbox",
    "reply_key",
    "reply_payload",
    "usage_fields",
]

log = logging.getLogger("core.kernel.turns.outbox")

AS_STREAM = "stream"  # payload flag: deliver as the message's stream (``reply_payload``)


def reply_key(message_id: int, part: str = "") -> str:
    """Idempotency key of the retried reply to the ``user.message`` event ``message_id``
    (``part`` ``followup``: of its follow-up alone)."""
    return f"reply:{message_id}:{part}" if part else f"reply:{message_id}"


def reply_payload(
    message_id: int,
    channel_id: str,
    user_id: str,
    text: str,
    followup: str | None = None,
    *,
    as_stream: bool = False,
) -> dict[str, Any]:
    """The payload of a journaled ``system.reply`` (what ``_resend`` sends);
    ``as_stream``: the reply of a turn another node ran, which a streaming channel
    gets as the message's stream (its end is how the CLI knows the reply)."""
    payload: dict[str, Any] = {
        "message_id": message_id,
        "channel_id": channel_id,
        "user_id": user_id,
        "text": text,
    }
    if followup:
        payload["followup"] = followup
    if as_stream:
        payload[AS_STREAM] = True
    return payload


def usage_fields(usage: TurnUsage) -> dict[str, int]:
    """A turn's usage as channels get it (plain numbers: it crosses the plug-in wire)."""
    return {
        "input_tokens": usage.input_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "requests": usage.requests,
    }


# whether a reply method takes ``usage=``, by its function: its signature is read
# once per method, not at every reply (``inspect.signature`` is the slow part)
_TAKES_USAGE: dict[Any, bool] = {}


def _with_usage(method: Any, usage: TurnUsage | None) -> dict[str, Any]:
    """``{"usage": ...}`` for a reply method that takes it, else nothing."""
    if usage is None:
        return {}
    function = getattr(method, "__func__", method)
    takes = _TAKES_USAGE.get(function)
    if takes is None:
        if len(_TAKES_USAGE) >= 256:  # reloads bring new functions: start over
            _TAKES_USAGE.clear()
        takes = _TAKES_USAGE[function] = takes_usage(method)
    return {USAGE_KEYWORD: usage_fields(usage)} if takes else {}


class OpenStream:
    """A stream started on a ``StreamingChannelProvider`` for one turn; ``live``:
    the channel shows text as it comes (else only the stream's end, the reply)."""

    def __init__(self, channel: Any, user_id: str, live: bool = True) -> None:
        self.channel = channel
        self.user_id = user_id
        self.live = live


class ReplyOutbox:
    """Sends recorded replies; journals the ones whose send failed and retries them."""

    def __init__(
        self,
        bus: EventBus,
        channel_for: Callable[[str], Any],
        *,
        send_timeout_s: float,
        scale: Scale,
    ) -> None:
        self._bus = bus
        self._channel_for = channel_for
        self._send_timeout_s = send_timeout_s
        self._scale = scale
        # one process alone (``LocalScale``): no other node's reply to wait for or to
        # forward to, so a reply asks the seam nothing (chosen once)
        self._shared = scale.placement.shared

    def channel(self, channel_id: str) -> Any:
        """The channel replies to ``channel_id`` go to now (``None``: not loaded here)."""
        return self._channel_for(channel_id)

    async def in_order(self, channel_id: str, user_id: str) -> None:
        """Before a reply or stream of this process reaches ``user_id``: the replies
        other nodes answered earlier are sent first (ADR 0036)."""
        await self._scale.replies_sent(channel_id, user_id, self._send_timeout_s)

    def subscribe(self) -> None:
        """Subscribe the retry handler (before the bus starts, like every kernel handler)."""
        topic, subscriber, concurrency = self._scale.reply_subscription
        self._bus.subscribe(
            topic, self._resend, subscriber, concurrency=concurrency, timeout=self._send_timeout_s
        )

    async def open_stream(self, channel: Any, user_id: str) -> OpenStream | None:
        """Start a stream; its end carries the recorded reply (``deliver``). Not
        ``live`` when ``on_stream_start`` returned ``False`` (nobody there reads text
        as it comes, ADR 0065): the turn then runs unstreamed.

        ``None`` when the channel cannot start one (it raised or passed
        ``send_timeout_s``): the turn then runs unstreamed and its reply is sent."""
        try:
            async with asyncio.timeout(self._send_timeout_s):
                started = await channel.on_stream_start(user_id)
        except Exception as exc:
            log.warning("stream for %s did not start (%s)", user_id, describe_exception(exc))
            return None
        return OpenStream(channel, user_id, live=started is not False)

    async def end_stream(self, stream: OpenStream) -> None:
        """End a live stream without a reply (the turn paused for an approval; its
        reply comes later through ``deliver``). Best effort: a failure is logged."""
        try:
            async with asyncio.timeout(self._send_timeout_s):
                await stream.channel.on_stream_end(stream.user_id, "")
        except Exception as exc:
            log.warning("stream for %s did not end (%s)", stream.user_id, describe_exception(exc))

    async def deliver(
        self,
        message_id: int,
        reply: StoredReply,
        stream: OpenStream | None = None,
        origin: str | None = None,
        usage: TurnUsage | None = None,
    ) -> None:
        """First attempt now; on failure journal what was not sent for the retrying
        subscriber. An empty reply (a message that answered a question) is not sent.
        A message journaled by another node (``origin``) is answered through it.
        ``usage``: the turn's tokens, for a channel that takes them."""
        if not reply.text and not reply.followup and stream is None:
            return
        if self._shared:
            channel_here = self._channel_for(reply.channel_id) is not None
            if await self._scale.forward_reply(message_id, reply, origin, channel_here):
                return
            if stream is None:
                await self.in_order(reply.channel_id, reply.user_id)
        answered = False
        try:
            async with asyncio.timeout(self._send_timeout_s):
                if stream is not None:
                    end = stream.channel.on_stream_end
                    await end(stream.user_id, reply.text, **_with_usage(end, usage))
                else:
                    await self._send(reply.channel_id, reply.user_id, reply.text, usage)
                answered = True
                if reply.followup:
                    await self._send(reply.channel_id, reply.user_id, reply.followup)
            return
        except Exception as exc:
            log.warning(
                "reply to message %d on %s failed (%s); it will be retried",
                message_id,
                reply.channel_id,
                describe_exception(exc),
            )
        where = (message_id, reply.channel_id, reply.user_id)
        if answered:
            await self._journal(*where, reply.followup or "", part="followup")
        else:
            await self._journal(*where, reply.text, reply.followup)

    async def _journal(
        self,
        message_id: int,
        channel_id: str,
        user_id: str,
        text: str,
        followup: str | None = None,
        *,
        part: str = "",
    ) -> None:
        """Journal a ``system.reply`` for this process's retrying subscriber (once per part)."""
        payload = reply_payload(message_id, channel_id, user_id, text, followup)
        topic, _subscriber, _concurrency = self._scale.reply_subscription
        await self._bus.publish(
            topic, "kernel", payload, idempotency_key=reply_key(message_id, part)
        )

    async def _resend(self, event: Event) -> None:
        payload = event.payload
        channel_id, user_id = str(payload["channel_id"]), str(payload["user_id"])
        text = str(payload["text"])
        if payload.get(AS_STREAM) and text:
            await self._send_as_stream(channel_id, user_id, text)
        else:
            await self._send(channel_id, user_id, text)
        followup = payload.get("followup")
        if followup:  # once the answer is sent, a failure retries the follow-up alone
            message_id = int(payload["message_id"])
            await self._journal(message_id, channel_id, user_id, str(followup), part="followup")

    async def _send_as_stream(self, channel_id: str, user_id: str, text: str) -> None:
        """Another node's turn's reply, as a stream here that carried no text: started,
        then ended with ``text``. A channel that does not stream, or whose stream does
        not start, is sent it whole."""
        channel = self._channel_for(channel_id)
        if isinstance(channel, StreamingChannelProvider):
            stream = await self.open_stream(channel, user_id)
            if stream is not None:
                await channel.on_stream_end(user_id, text)
                return
        await self._send(channel_id, user_id, text)

    async def _send(
        self, channel_id: str, user_id: str, text: str, usage: TurnUsage | None = None
    ) -> None:
        channel = self._channel_for(channel_id)
        if channel is None:
            log.warning(
                "no channel %r for a reply to %s; dropping: %.80s", channel_id, user_id, text
            )
            return
        send = channel.send_to_user
        await send(user_id, text, **_with_usage(send, usage))
