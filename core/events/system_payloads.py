"""Typed payloads of the system topics (SPEC §3), shared by publishers and the kernel.

A system-topic payload used to be a dict read with ``payload.get("text")``, so a
misspelled key silently dropped a message. Each topic now has one frozen pydantic
model (strict: no coercion; unknown keys refused), its errors turned into
``SystemPayloadError`` naming topic and key. Publishers build it
(``to_payload()`` gives the journaled JSON object, same shape as before), the
bus refuses a payload that does not fit its topic's model at publish
(``check_system_payload``: unknown key, missing key or wrong type, named in the
error), and the kernel's handlers read events back with ``read_system_payload``,
which logs a payload that no longer fits (journaled by an older kernel, or
written by another process) once and drops it with a clear line instead of
guessing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from core.events.errors import SystemPayloadError
from core.events.models import Event
from core.events.topics import SystemTopics

__all__ = [
    "SYSTEM_PAYLOADS",
    "AgentBackground",
    "AgentTask",
    "KernelReload",
    "KernelReloadResult",
    "McpRequest",
    "McpResponse",
    "SystemPayload",
    "TurnCancel",
    "TurnResume",
    "UiAnswer",
    "UserMessage",
    "UserNotify",
    "check_system_payload",
    "read_system_payload",
]

log = logging.getLogger(__name__)

_P = TypeVar("_P", bound="SystemPayload")


class _OmitIfNone:
    """Marker of an optional field left out of the JSON while unset."""


# ``str | None`` that is absent from the journaled JSON while ``None``
OmittedIfNone = Annotated[str | None, _OmitIfNone()]

# the order in which pydantic's errors are reported: an unknown key first (a
# misspelling also makes the key it was meant to be missing), then a missing one
_FIRST = {"extra_forbidden": 0, "missing": 1}


class SystemPayload(BaseModel):
    """Base of the system-topic models: pydantic, strict (no coercion: an int is no
    string), unknown keys refused, frozen; JSON in and out.

    Every field is ``str`` (required) or ``str | None`` (optional, default
    ``None``); construction checks the types, so a model that exists is valid,
    and a misfit raises ``SystemPayloadError`` naming the topic and the key.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    TOPIC: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _payload_error(type(self), exc) from None

    @classmethod
    def from_payload(cls: type[_P], payload: Mapping[str, Any], *, strict: bool = True) -> _P:
        """The model of ``payload``; ``SystemPayloadError`` names the key at fault.

        ``strict=False`` ignores keys the model does not know: for custom topics
        routed to a kernel handler (manifest ``events.subscribes``), whose
        payloads carry their own extra keys.
        """
        if type(payload) is not dict and not isinstance(payload, Mapping):
            raise SystemPayloadError(cls.TOPIC, "", f"must be a JSON object, got {payload!r}")
        if not strict:
            known = cls.model_fields
            payload = {key: value for key, value in payload.items() if key in known}
        try:
            return cls(**payload)  # the construction names the key at fault
        except TypeError:  # "keywords must be strings": named here (not looked for first)
            key = next((key for key in payload if type(key) is not str), None)
            if key is None:
                raise
            raise SystemPayloadError(cls.TOPIC, str(key), "is not a text key") from None

    def to_payload(self) -> dict[str, Any]:
        """The JSON object that is journaled (optional fields included as ``null``,
        but for those marked ``OmittedIfNone``). Read field by field: the fields are
        strings, and ``model_dump`` costs four times as much on every publish."""
        out: dict[str, Any] = {}
        for name, omit_if_none in _specs(type(self)):
            value = getattr(self, name)
            if value is None and omit_if_none:
                continue
            out[name] = value
        return out


def _payload_error(model: type[SystemPayload], exc: ValidationError) -> SystemPayloadError:
    """pydantic's error as the sentence the bus and the handlers log: the key at fault
    and what was wrong with it."""
    errors = exc.errors(include_url=False)
    error: ErrorDetails = min(errors, key=lambda e: _FIRST.get(e["type"], 2))
    key = str(error["loc"][0]) if error["loc"] else ""
    field = model.model_fields.get(key)
    if error["type"] == "missing":
        return SystemPayloadError(model.TOPIC, key, "is required")
    if error["type"] == "extra_forbidden" or field is None:
        expected = ", ".join(model.model_fields)
        return SystemPayloadError(model.TOPIC, key, f"is unknown (known keys: {expected})")
    if error["type"] == "string_type":
        wanted = "a string" if field.is_required() else "a string or null"
        got = type(error["input"]).__name__
        return SystemPayloadError(model.TOPIC, key, f"must be {wanted}, got {got}")
    return SystemPayloadError(model.TOPIC, key, error["msg"])


_SPECS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _specs(model: type[SystemPayload]) -> tuple[tuple[str, bool], ...]:
    """``(name, omit_if_none)`` per field of ``model``, in order (found once per model)."""
    specs = _SPECS.get(model)
    if specs is None:
        specs = _SPECS[model] = tuple(
            (name, any(isinstance(mark, _OmitIfNone) for mark in spec.metadata))
            for name, spec in model.model_fields.items()
        )
    return specs


class UserMessage(SystemPayload):
    """``user.message``: a user wrote to the assistant through a channel."""

    TOPIC: ClassVar[str] = SystemTopics.USER_MESSAGE
    text: str
    user_id: str
    channel_id: str
    message_id: str | None = None
    # who typed it when ``user_id`` addresses a group (left out of the JSON while unset)
    sender_id: OmittedIfNone = None
    # the kernel process (node) whose channel received it, with several processes (ADR 0036)
    origin: OmittedIfNone = None
    # the ids of the files it came with, comma-separated (kept per person, ADR 0096)
    files: OmittedIfNone = None


class UserNotify(SystemPayload):
    """``system.user.notify``: a proactive message for the user.

    ``user_id`` (optional, left out of the JSON while unset) names the user it is
    for, so a channel serving several users can reach the right one.
    """

    TOPIC: ClassVar[str] = SystemTopics.USER_NOTIFY
    text: str
    channel_id: str | None = None
    user_id: OmittedIfNone = None


class AgentTask(SystemPayload):
    """``system.agent.task``: run the orchestrator on ``prompt`` and tell the user.

    ``user_id`` (optional, as for ``UserNotify``) is who the answer is for: a
    scheduled agent task answers the user and chat that set it.
    """

    TOPIC: ClassVar[str] = SystemTopics.AGENT_TASK
    prompt: str
    channel_id: str | None = None
    user_id: OmittedIfNone = None


class AgentBackground(SystemPayload):
    """``system.agent.background``: run the orchestrator on ``prompt``, log the result."""

    TOPIC: ClassVar[str] = SystemTopics.AGENT_BACKGROUND
    prompt: str
    correlation_id: str | None = None


class UiAnswer(SystemPayload):
    """``system.ui.answer``: the user answered question ``request_id`` on a channel
    (``ExtensionContext.answer_request``); ``sender_id`` as for ``UserMessage``."""

    TOPIC: ClassVar[str] = SystemTopics.UI_ANSWER
    request_id: str
    answer: str
    channel_id: str
    user_id: str
    sender_id: OmittedIfNone = None


class TurnResume(SystemPayload):
    """``system.turn.resume``: every question of the turn paused for ``message_key``
    is answered; the kernel resumes it (published by the kernel only)."""

    TOPIC: ClassVar[str] = SystemTopics.TURN_RESUME
    message_key: str
    conversation: str


class KernelReload(SystemPayload):
    """``system.kernel.reload``: reload extension ``ext_id`` (``main.py extensions
    reload``, ADR 0032). ``expires_at`` (``time.time()`` as text): a kernel that
    sees the request later — it was not running when asked — ignores it."""

    TOPIC: ClassVar[str] = SystemTopics.KERNEL_RELOAD
    request_id: str
    ext_id: str
    expires_at: str


class KernelReloadResult(SystemPayload):
    """``system.kernel.reload.result``: how request ``request_id`` goes; ``outcome``
    is ``accepted`` (at once: a kernel is running), then ``reloaded`` or ``failed``;
    ``text`` is the sentence for the user."""

    TOPIC: ClassVar[str] = SystemTopics.KERNEL_RELOAD_RESULT
    request_id: str
    ext_id: str
    outcome: str
    text: str


class McpRequest(SystemPayload):
    """``system.kernel.mcp.request``: an MCP client (``main.py mcp``, ADR 0059) asks the
    running kernel. ``op``: ``list`` (the tools), ``call`` (tool ``name`` with
    ``arguments``, a JSON object as text) or ``ask`` (one turn; ``arguments`` is the
    text). ``client`` names the MCP client; its identity is ``mcp:CLIENT``.
    ``expires_at`` as for ``KernelReload``."""

    TOPIC: ClassVar[str] = SystemTopics.KERNEL_MCP_REQUEST
    request_id: str
    client: str
    op: str
    expires_at: str
    name: str | None = None
    arguments: str | None = None


class McpResponse(SystemPayload):
    """``system.kernel.mcp.response``: the answer to request ``request_id``: ``text``
    (a tool's result or the turn's reply), ``error`` when it failed, ``tools`` (a
    JSON list) for ``list``."""

    TOPIC: ClassVar[str] = SystemTopics.KERNEL_MCP_RESPONSE
    request_id: str
    text: str
    error: str | None = None
    tools: str | None = None


class TurnCancel(SystemPayload):
    """``system.turn.cancel``: stop the turn being answered for ``user_id`` on the
    channel ``channel_id`` (published by that channel, e.g. on Ctrl-C)."""

    TOPIC: ClassVar[str] = SystemTopics.TURN_CANCEL
    channel_id: str
    user_id: str


SYSTEM_PAYLOADS: dict[str, type[SystemPayload]] = {
    model.TOPIC: model
    for model in (
        UserMessage,
        UserNotify,
        AgentTask,
        AgentBackground,
        UiAnswer,
        TurnResume,
        KernelReload,
        KernelReloadResult,
        McpRequest,
        McpResponse,
        TurnCancel,
    )
}


def check_system_payload(topic: str, payload: Mapping[str, Any]) -> None:
    """Raise ``SystemPayloadError`` if ``topic`` is a system topic and ``payload`` does not fit."""
    model = SYSTEM_PAYLOADS.get(topic)
    if model is not None:
        model.from_payload(payload)


def read_system_payload(
    model: type[_P], event: Event, *, strict: bool = True, subscriber: str = "kernel"
) -> _P | None:
    """The typed payload of a delivered ``event``, or ``None`` after one error line.

    The bus checks system payloads at publish, so ``None`` means an event
    journaled before that check or by another writer: retrying cannot fix it,
    so it is logged once (naming event, topic, source and field) and dropped.
    """
    try:
        return model.from_payload(event.payload, strict=strict)
    except SystemPayloadError as exc:
        log.error(
            "%s: dropping event %d on %r from %r: %s",
            subscriber,
            event.id,
            event.topic,
            event.source,
            exc,
        )
        return None
