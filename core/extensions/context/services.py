"""What the kernel lends every ``KernelContext``: settings, bus, state, agents, and
its status operations (filled in by the runner)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from core.extensions.context.agent_gateway import AgentGateway
from core.extensions.context.shared_services import ServiceRegistry
from core.extensions.context.ui_gateway import UiGateway
from core.extensions.contract.data import Leadership, McpAnswer
from core.extensions.contract.files import KeptFile
from core.extensions.contract.status import KernelStatus

if TYPE_CHECKING:
    from core.config import Settings
    from core.events import EventBus
    from core.state import StateStore

__all__ = ["KernelOperations", "KernelServices", "McpService"]


async def _none_described() -> dict[str, Any]:
    return {"activated": [], "available": []}


async def _none_listed() -> list[tuple[str, str]]:
    return []


async def _none_held() -> list[str]:
    return []


async def _no_file() -> KeptFile | None:
    return None


class KernelOperations(Protocol):
    """The kernel's status and the one act on it (``core.kernel.status``)."""

    async def status(self) -> KernelStatus: ...
    async def requeue(self, event_id: int) -> int: ...


class McpService(Protocol):
    """Hearth as an MCP server for clients a channel extension serves
    (``core.kernel.mcp_desk.McpDesk.serve``, ADR 0059)."""

    async def serve(
        self, channel_id: str, user_id: str, op: str, name: str | None, arguments: str
    ) -> McpAnswer: ...


@dataclass
class KernelServices:
    """Kernel objects shared by every context (filled in by the runner)."""

    settings: Settings
    bus: EventBus
    get_instance: Callable[[str], Any | None]
    request_restart: Callable[[str], None]
    request_shutdown: Callable[[], None]
    secrets: Mapping[str, str]
    state: StateStore
    agents: AgentGateway = field(default_factory=AgentGateway)
    ui: UiGateway = field(default_factory=UiGateway)  # questions to the user (ADR 0021)
    list_commands: Callable[[], list[tuple[str, str]]] = list
    # (channel id, user id) -> that conversation's activated post-processors
    list_post_processors: Callable[[str, str], Awaitable[list[tuple[str, str]]]] = (
        lambda _channel, _user: _none_listed()
    )
    # (channel id, user id) -> that person's activations and the catalog with metadata
    describe_post_processors: Callable[[str, str], Awaitable[dict[str, Any]]] = (
        lambda _channel, _user: _none_described()
    )
    # (extension id, channel id, user id) -> what that extension sent there that waits
    # for the channel (ADR 0076)
    held_notices: Callable[[str, str, str], Awaitable[list[str]]] = lambda _ext, _channel, _user: (
        _none_held()
    )
    # (channel id, user id, file id) -> that person's kept file (ADR 0096)
    kept_file: Callable[[str, str, str], Awaitable[KeptFile | None]] = (
        lambda _channel, _user, _file: _no_file()
    )
    # (channel id, user id, name, MIME type, path) -> the upload kept for that person
    keep_file: Callable[[str, str, str, str, str], Awaitable[KeptFile]] | None = None
    # whether an extension gets traffic now (the kernel's wiring); events for
    # one that is not are dropped, not handed to it
    is_wired: Callable[[str], bool] = field(default=lambda _ext_id: True)
    # context.services: one registry for the kernel's lifetime (closed by Kernel.stop)
    shared: ServiceRegistry = field(default_factory=ServiceRegistry)
    operations: KernelOperations | None = None
    # reload one extension from its files (ADR 0032): (reloaded, sentence for the user)
    reload_extension: Callable[[str], Awaitable[tuple[bool, str]]] | None = None
    # this process's name among several on one PostgreSQL (None: the only one, ADR 0036)
    node: str | None = None
    # whether this process fires schedules now (ADR 0036); one process always does
    leadership: Callable[[], Leadership] = field(default=lambda: Leadership(True))
    # the MCP desk, for ``context.mcp_request`` (ADR 0059)
    mcp: McpService | None = None
