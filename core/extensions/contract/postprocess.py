"""Answer post-processors (SPEC §9, seed 000): the protocol and its two values.

A user who ends a message with ``#json`` or ``#decision:critical`` asks for
the answer to be turned into structured output after it is written. A
post-processor is an object with ``name``, ``output_target``,
``validate_param`` and ``async execute(context, param)``; an extension either
*is* one (the loader detects it with ``isinstance`` like every capability) or
offers several through ``get_post_processors()``. The values are frozen
dataclasses of JSON-friendly fields, so they can cross a process boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from core.events.topics import PostProcessTopics  # the contract offers it to extensions

__all__ = [
    "CATEGORIES",
    "OUTPUT_TARGETS",
    "OutputTarget",
    "PostProcessContext",
    "PostProcessResult",
    "PostProcessTopics",
    "PostProcessor",
    "PostProcessorProvider",
]

OutputTarget = Literal["silent", "chat_append", "status_panel"]
OUTPUT_TARGETS: tuple[OutputTarget, ...] = ("silent", "chat_append", "status_panel")
# what a processor's optional ``category`` may be (seed 000); none given: Custom
CATEGORIES = ("Transform", "Automation", "Export", "Visualization", "Custom")


@dataclass(frozen=True, slots=True)
class PostProcessResult:
    """What ``execute`` returns: the structured output and how it went.

    ``name`` is the processor's name; the kernel replaces it with the
    activation name the user typed (``#json2``). ``output_target`` ``None``
    means the processor's own ``output_target``. ``metadata`` gets
    ``execution_time_ms`` and ``param`` from the kernel. A processor that calls
    a model reports its usage in the token and cost fields, which the turn's
    totals include.
    """

    name: str
    content: Any
    content_type: str = "application/json"
    success: bool = True
    error: str | None = None
    output_target: OutputTarget | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON (what ``/last`` shows, the journal and webhooks get)."""
        return {
            "name": self.name,
            "content": self.content,
            "content_type": self.content_type,
            "success": self.success,
            "error": self.error,
            "output_target": self.output_target,
            "metadata": dict(self.metadata),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PostProcessResult:
        """The inverse of ``to_dict`` (a stored or journaled result)."""
        target = data.get("output_target")
        return cls(
            name=str(data["name"]),
            content=data.get("content"),
            content_type=str(data.get("content_type") or "application/json"),
            success=bool(data.get("success", True)),
            error=None if data.get("error") is None else str(data["error"]),
            output_target=target if target in OUTPUT_TARGETS else None,
            metadata=dict(data.get("metadata") or {}),
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            cost_usd=float(data.get("cost_usd") or 0.0),
        )


@dataclass(frozen=True, slots=True)
class PostProcessContext:
    """Everything a post-processor may look at (seed 000 ``ExtensionContext``).

    ``answer_text`` is the answer as the user got it (after output hooks);
    ``clean_query`` is what the model saw, ``original_query`` what the user
    typed, ``#`` tokens included. Tokens: ``turn_*`` are the model's usage for
    this turn; ``total_*`` add what earlier post-processors of the turn used
    (Hearth keeps no session-wide count). ``tools_used`` names every tool the
    model called, in order; ``collected_data`` holds their outputs (JSON
    parsed where it parses) and ``execution_trace`` the calls and outputs.
    ``previous_results`` holds the results of the processors that ran before
    this one in the same message, by activation name (serial chaining).
    ``profile_tag`` and ``profile_type`` keep the seed's fields: Hearth has no
    profiles, so the tag is ``None`` and the type ``tool_enabled``.
    """

    answer_text: str
    original_query: str
    clean_query: str
    session_id: str | None = None
    turn_id: str | None = None
    channel_id: str | None = None
    user_id: str | None = None
    provider: str | None = None
    model: str | None = None
    profile_tag: str | None = None
    profile_type: str = "tool_enabled"
    answered_at: str = ""  # ISO 8601 UTC, e.g. 2026-02-20T15:30:45Z
    turn_input_tokens: int = 0
    turn_output_tokens: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    tools_used: tuple[str, ...] = ()
    collected_data: tuple[Any, ...] = ()
    execution_trace: tuple[dict[str, Any], ...] = ()
    previous_results: Mapping[str, PostProcessResult] = field(default_factory=dict)


@runtime_checkable
class PostProcessor(Protocol):
    """Turns a finished answer into structured output, on request (``#name:param``).

    ``name``: lowercase, no spaces; what users activate and type.
    ``output_target``: ``silent`` (kept, published, shown by ``/last``),
    ``chat_append`` (shown under the answer) or ``status_panel`` (one status
    line). ``validate_param`` is called before ``execute`` with the param in
    effect (typed after ``:``, else the activation's default, else ``None``);
    a rejection is reported as the result's error and ``execute`` is not
    called. An exception, a rejection or a missed deadline never touches the
    answer.

    Optional metadata (plain attributes, read by ``/ext info``, the web page's
    panel and autocompletion): ``description``, ``display_name``, ``category``
    (one of ``CATEGORIES``), ``version``, ``keywords`` (strings),
    ``display_order`` (an int, smaller first), ``parameters`` (a dict:
    ``supported`` bool, ``description``, ``examples`` and ``allowed_values``
    lists of strings) and ``output_schema`` (a JSON Schema). The kernel
    refuses a param outside ``allowed_values`` (or any param when
    ``supported`` is false) before ``validate_param``, and a result whose
    content does not match ``output_schema`` becomes a failed one naming the
    mismatch.
    """

    name: str
    output_target: OutputTarget

    def validate_param(self, param: str | None) -> tuple[bool, str | None]: ...

    async def execute(
        self, context: PostProcessContext, param: str | None
    ) -> PostProcessResult: ...


@runtime_checkable
class PostProcessorProvider(Protocol):
    """An extension offering several post-processors (each a ``PostProcessor``)."""

    def get_post_processors(self) -> list[PostProcessor]: ...
