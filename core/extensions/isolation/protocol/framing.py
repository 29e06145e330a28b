"""Wire format between the kernel and a plugin host.

Framing: every message is a 4-byte big-endian unsigned length followed by
that many bytes of UTF-8 JSON (one object). Length-prefixed rather than
newline-delimited so the reader knows the size before it buffers anything:
a message over ``MAX_MESSAGE_BYTES`` is refused without reading it.

Messages follow JSON-RPC's shape without the ``jsonrpc`` member:
request ``{"id", "method", "params"}``, response ``{"id", "result"}`` or
``{"id", "error": {"type", "message"}}``, notification ``{"method", "params"}``.
``check_frame`` holds every frame to that shape before anything reads it
(ids are integers or short strings, methods short strings, params an object
or null); the payload of each method is checked by ``messages.py``.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from core.events.models import Event
from core.extensions.contract import (
    AgentInvocationContext,
    AgentResponse,
    RequestOption,
    TurnContext,
    UserRequest,
)
from core.extensions.isolation.protocol.wire import plain
from core.runtime.errors import HearthError

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_ID_CHARS = 128
MAX_METHOD_CHARS = 128
FRAME_KEYS = frozenset({"id", "method", "params", "result", "error"})
_HEADER = struct.Struct(">I")
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # one, not one a frame


class ProtocolError(HearthError):
    """The peer sent something that is not a valid frame; the channel is closed."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame; raises ``ProtocolError`` when it is too large or not JSON."""
    try:
        body = _JSON.encode(message).encode()
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
        message = json.loads(body.decode())
    except ValueError as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"frame is a {type(message).__name__}, not an object")
    return message


def check_frame(message: dict[str, Any]) -> None:
    """Raise ``ProtocolError`` unless ``message`` is a well-formed request,
    notification or response (a peer sending one is broken or hostile)."""
    extra = sorted(str(k)[:40] for k in message.keys() - FRAME_KEYS)
    if extra:
        raise ProtocolError(f"frame has unknown members {extra[:5]}")
    if "id" in message and not valid_id(message["id"]):
        raise ProtocolError(
            f"frame id must be an integer or a string of at most {MAX_ID_CHARS} characters, "
            f"got {type(message['id']).__name__}"
        )
    if "method" in message:
        method = message["method"]
        if not isinstance(method, str) or not 0 < len(method) <= MAX_METHOD_CHARS:
            raise ProtocolError(f"frame method must be a short string, got {_kind(method)}")
        if "result" in message or "error" in message:
            raise ProtocolError(f"request {method[:80]!r} carries a result or an error")
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            raise ProtocolError(f"params of {method[:80]!r} must be an object, got {_kind(params)}")
        return
    if not isinstance(message.get("id"), int):
        raise ProtocolError("a response needs the integer id of a call")
    if ("result" in message) == ("error" in message):
        raise ProtocolError("a response needs exactly one of result and error")
    if "error" in message:
        error = message["error"]
        if not (
            isinstance(error, dict)
            and isinstance(error.get("type"), str)
            and isinstance(error.get("message"), str)
            and error.keys() <= {"type", "message", "denied"}
        ):
            raise ProtocolError("error must be an object {type: string, message: string}")


def valid_id(value: Any) -> bool:
    """Call ids: integers (not booleans) or strings of at most ``MAX_ID_CHARS``."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and len(value) <= MAX_ID_CHARS)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# ------------------------------------------------------------ contract data on the wire


def turn_to_wire(turn: TurnContext | None) -> dict[str, Any] | None:
    return plain(turn) if turn is not None else None


def turn_from_wire(data: Any) -> TurnContext:
    return TurnContext(**data) if isinstance(data, dict) else TurnContext()


def request_from_wire(data: Any) -> UserRequest:
    """A ``UserRequest`` sent by the kernel (``plain``: options as lists of dicts)."""
    if not isinstance(data, dict):
        raise ValueError("a user request must be a JSON object")
    options = tuple(RequestOption(**option) for option in data.get("options") or ())
    return UserRequest(**{**data, "options": options})


def invocation_to_wire(context: AgentInvocationContext | None) -> dict[str, Any] | None:
    return plain(context) if context is not None else None


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
    wire: dict[str, Any] = plain(event)
    return wire


def event_from_wire(data: dict[str, Any]) -> Event:
    return Event(**data)
