"""The kernel's status as an extension sees it (``ExtensionContext.kernel_status``).

What ``/status`` says, as data: uptime, model, every extension with its status
and error, MCP servers, event counts, and the newest events and dead letters
of the journal (topics and outcomes, never payloads). Frozen dataclasses with
JSON in and out, so an isolated extension gets the same object over RPC.
Reading it needs the manifest's ``permissions.status`` (ADR 0024).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "DeadLetterState",
    "DeliveryState",
    "EventState",
    "ExtensionState",
    "KernelStatus",
    "McpServerState",
]


@dataclass(frozen=True, slots=True)
class ExtensionState:
    """``status``: active, error, skipped or disabled; ``wired``: getting traffic now."""

    id: str
    status: str
    wired: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class McpServerState:
    name: str
    state: str  # connecting, connected, reconnecting (attempt N, next in Ms), failed
    detail: str


@dataclass(frozen=True, slots=True)
class DeliveryState:
    subscriber: str
    status: str  # pending, inflight, done, dead
    attempt: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class EventState:
    id: int
    topic: str
    source: str
    created_at: float
    deliveries: tuple[DeliveryState, ...] = ()


@dataclass(frozen=True, slots=True)
class DeadLetterState:
    """One delivery the bus gave up on; ``requeue_dead_letter(event_id)`` retries it."""

    event_id: int
    subscriber: str
    topic: str
    source: str
    attempt: int
    error: str | None
    created_at: float
    failed_at: float


@dataclass(frozen=True, slots=True)
class KernelStatus:
    uptime_s: float
    model: str
    extensions: tuple[ExtensionState, ...]
    mcp_servers: tuple[McpServerState, ...]
    event_counts: dict[str, int]
    recent_events: tuple[EventState, ...]
    dead_letters: tuple[DeadLetterState, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelStatus:
        """The inverse of ``to_json`` (``KeyError``/``TypeError`` on anything else)."""
        return cls(
            uptime_s=float(data["uptime_s"]),
            model=str(data["model"]),
            extensions=tuple(ExtensionState(**e) for e in data["extensions"]),
            mcp_servers=tuple(McpServerState(**m) for m in data["mcp_servers"]),
            event_counts={str(k): int(v) for k, v in data["event_counts"].items()},
            recent_events=tuple(
                EventState(
                    **{**e, "deliveries": tuple(DeliveryState(**d) for d in e["deliveries"])}
                )
                for e in data["recent_events"]
            ),
            dead_letters=tuple(DeadLetterState(**d) for d in data["dead_letters"]),
        )
