"""Wire format between the kernel and a plugin host.

Framing: every message is a 4-byte big-endian unsigned length followed by
that many bytes of UTF-8 JSON (one object). Length-prefixed rather than
newline-delimited so the reader knows the size before it buffers anything:
a message over ``MAX_MESSAGE_BYTES`` is refused without reading it.

Messages follow JSON-RPC's shape without the ``jsonrpc`` member:
request ``{"id", "method", "params"}``, response ``{"id", "result"}`` or
``{"id", "error": {"type", "message"}}``, notification ``{"method", "params"}``.
"""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import asdict
from typing import Any

from core.events.models import Event
from core.extensions.contract import AgentInvocationContext, AgentResponse, TurnContext

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame; the channel is closed."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame; raises ``ProtocolError`` when it is too large or not JSON."""
    try:
        body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"message is not JSON-serializable: {exc}") from exc
    if len(body) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _HEADER.pack(len(body)) + body


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or ``None`` at a clean end of stream."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ProtocolError("stream ended inside a frame header") from None
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"frame of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ProtocolError("stream ended inside a frame") from None
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"frame is a {type(message).__name__}, not an object")
    return message


# ------------------------------------------------------------ contract data on the wire


def turn_to_wire(turn: TurnContext | None) -> dict[str, Any] | None:
    return asdict(turn) if turn is not None else None


def turn_from_wire(data: Any) -> TurnContext:
    return TurnContext(**data) if isinstance(data, dict) else TurnContext()


def invocation_to_wire(context: AgentInvocationContext | None) -> dict[str, Any] | None:
    return asdict(context) if context is not None else None


def invocation_from_wire(data: Any) -> AgentInvocationContext | None:
    if not isinstance(data, dict):
        return None
    turn = data.get("turn")
    return AgentInvocationContext(**{**data, "turn": turn_from_wire(turn) if turn else None})


def response_from_wire(data: Any) -> AgentResponse:
    if not isinstance(data, dict):
        return AgentResponse(status="error", content="", error=f"bad agent response {data!r}")
    return AgentResponse(**data)


def event_to_wire(event: Event) -> dict[str, Any]:
    return asdict(event)


def event_from_wire(data: dict[str, Any]) -> Event:
    return Event(**data)
