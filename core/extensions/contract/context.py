"""The ``ExtensionContext`` protocol: what the kernel offers an extension
(re-exported by ``contract``, the module extensions import)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from core.events.models import Event
from core.extensions.contract.data import (
    AgentDescriptor,
    AgentInvocationContext,
    AgentResponse,
    Leadership,
    McpAnswer,
    McpOp,
    StateScope,
    StoreLocation,
)
from core.extensions.contract.files import KeptFile
from core.extensions.contract.hook_declaration import CONVERSATIONS
from core.extensions.contract.permissions import Permission, needs
from core.extensions.contract.status import KernelStatus

__all__ = ["AgentExtensionContext", "EventHandler", "ExtensionContext", "SharedServices"]

EventHandler = Callable[[Event], Awaitable[None]]
T = TypeVar("T")

# The manifest's boolean permissions (SPEC §6), each said once: its key, what the
# grant request asks the user (in this order), what the docs say it guards beyond
# the methods below that declare it with ``@needs`` (issue 42, ADR 0084).
NOTIFY = Permission("notify", None, "reaches the user", default=True)
USER_MESSAGES = Permission(
    "user_messages",
    "speaks as you (user messages)",
    "speaks as the user on its own channel: channels",
)
AGENT = Permission(
    "agent",
    "drives the assistant and reads what it is told (agent)",
    "drives the agent with its tools, reads the user's memories",
)
STATUS = Permission(
    "status",
    "reads Hearth's status, recent events and dead letters",
    "the kernel's status, events and dead letters, ADR 0024",
)
CONTROL = Permission(
    "control",
    "may restart or stop Hearth and requeue failed events",
    "restarts, stops or reloads the kernel's parts, requeues failed events",
)
CONVERSATIONS_PERMISSION = Permission(
    CONVERSATIONS,
    "reads and can change your conversations",
    "sees or changes turns; also, checked at load: turn hooks and guardrails, i.e. "
    "every `@hook_point` protocol in `core/extensions/contract/hooks.py`, "
    "`ContextProvider`, `PostProcessor`/`PostProcessorProvider`, `prompt_additions`",
)
MCP_SERVER = Permission(
    "mcp_server",
    "serves your memories, reminders and kv to MCP clients (mcp_server)",
    "lists and calls the person's memory, reminder and kv tools for an MCP client "
    "of its own channel, ADR 0059",
)


class SharedServices(Protocol):
    """``context.services`` (SPEC §9, seed 004): heavy objects created once and
    shared — an embedding model, a connection pool — instead of one per user.

    One instance per key for the kernel's lifetime (an isolated extension: its
    plugin host's, as objects cannot cross the process boundary), created on
    the first call; concurrent first callers wait for one creation; a factory
    that raises is not remembered (the next call tries again). A sync factory
    runs in a worker thread, an async one on the loop. At teardown every
    service's ``shutdown()``, ``aclose()`` or ``close()`` (the first it has) is
    called, newest first. Keys are shared by every extension: namespace them
    (``"memory:embeddings:…"``).
    """

    async def get_or_create(
        self, key: str, factory: Callable[[], Awaitable[T]] | Callable[[], T]
    ) -> T: ...


class ExtensionContext(Protocol):
    """What the kernel offers an extension (seed 002, "ExtensionContext API").

    The kernel's implementation lives in ``core.extensions.context.kernel_context``; an
    isolated extension gets an RPC client with the same members.
    """

    extension_id: str
    logger: logging.Logger

    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def services(self) -> SharedServices:
        """The shared service registry (``SharedServices``)."""
        ...

    @property
    def data_dir(self) -> Path: ...
    @property
    def storage(self) -> StoreLocation:
        """Where this extension's databases go (``Store.at``): ``data_dir`` or PostgreSQL."""
        ...

    @property
    def extension_dir(self) -> Path:
        """This extension's own directory: ``<paths.extensions>/<id>/``."""
        ...

    def get_config(self, key: str, default: Any = None) -> Any: ...
    def get_secret(self, name: str) -> str | None: ...
    def get_extension(self, ext_id: str) -> Any | None: ...

    async def emit(
        self,
        topic: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> int: ...
    def subscribe_event(self, topic: str, handler: EventHandler) -> None: ...
    @needs(NOTIFY, "notify the user")
    async def notify_user(
        self, text: str, channel_id: str | None = None, *, user_id: str | None = None
    ) -> None:
        """A proactive message on ``channel_id`` (default: ``channels.default``): to
        ``user_id`` (the address a ``TurnContext`` carries, e.g. a Telegram chat) when
        given, else to the channel's own default target."""
        ...

    @needs(AGENT, "request an agent task")
    async def request_agent_task(self, prompt: str, channel_id: str | None = None) -> None: ...
    @needs(AGENT, "request a background agent task")
    async def request_agent_background(
        self, prompt: str, correlation_id: str | None = None
    ) -> None: ...

    @needs(AGENT, "invoke the agent")
    async def invoke_agent(self, prompt: str) -> str: ...
    @needs(AGENT, "invoke the agent")
    async def invoke_agent_streamed(
        self,
        prompt: str,
        on_chunk: Callable[[str], Awaitable[None]] | None = None,
        on_tool_call: Callable[[str], Awaitable[None]] | None = None,
    ) -> str: ...
    @needs(AGENT, "enrich a prompt with the user's context")
    async def enrich_prompt(self, prompt: str, agent_id: str | None = None) -> str: ...
    @needs(USER_MESSAGES, "speak as the user")
    async def on_user_message(
        self,
        text: str,
        user_id: str,
        channel_id: str | None = None,
        message_id: str | None = None,
        *,
        idempotency_key: str | None = None,
        sender_id: str | None = None,
        files: Sequence[str] = (),
    ) -> int:
        """Journal a ``user.message`` (channel defaults to this extension); ``sender_id``:
        who typed it when ``user_id`` is a group chat (only they answer its questions);
        ``files``: ids of files kept with ``keep_file`` that came with it (ADR 0096).
        Returns the event's id; 0 for ``/answer ID …`` to a ``secret`` question, which
        is answered in memory and never journaled (ADR 0048)."""
        ...

    @needs(USER_MESSAGES, "answer for the user")
    async def answer_request(
        self, request_id: str, answer: str, user_id: str, *, sender_id: str | None = None
    ) -> None:
        """Journal the answer (an option's value, or the text typed) to a ``UserRequest``
        this channel showed; the kernel checks conversation and sender. The answer
        to a ``secret`` one is handed over in memory instead, never journaled."""
        ...

    @needs(NOTIFY, "ask the user")
    @needs(CONVERSATIONS_PERMISSION, "ask the user in a turn")
    async def ui_request(
        self, kind: str, prompt: str, options: Sequence[str] = (), *, timeout_s: float | None = None
    ) -> str | None:
        """Ask the user of the turn being served and wait (seed 003): ``confirm`` gives
        ``"yes"``/``"no"``, ``select`` one of ``options``, ``input`` the text; ``None``
        after ``timeout_s`` (120 s). Outside a turn: ``NotAvailableError``."""
        ...

    async def list_commands(self) -> list[tuple[str, str]]:
        """Every slash command the kernel answers, as (name, description), by name."""
        ...

    @needs(STATUS, "read the kernel's status")
    async def kernel_status(self) -> KernelStatus:
        """Extensions, MCP servers, model, uptime, event counts, the newest events and
        dead letters (needs ``permissions.status``)."""
        ...

    @needs(CONTROL, "requeue a dead letter")
    async def requeue_dead_letter(self, event_id: int) -> int:
        """Put the dead deliveries of ``event_id`` back on the bus; how many (needs
        ``permissions.control``)."""
        ...

    @needs(MCP_SERVER, "serve MCP clients")
    async def mcp_request(
        self, op: McpOp, user_id: str, name: str | None = None, arguments: str = "{}"
    ) -> McpAnswer:
        """Hearth as an MCP server for a client this channel serves (ADR 0059): ``list``
        the person's tools, ``call`` tool ``name`` with ``arguments`` (a JSON object as
        text) or read ``resource`` ``name``, as the person whom ``user_id`` on this
        channel is — exactly as for a message of theirs (needs ``permissions.mcp_server``)."""
        ...

    async def leadership(self) -> Leadership:
        """Whether this kernel process is the one that fires schedules now: only the
        leader may (several processes on PostgreSQL, ADR 0036); always with SQLite."""
        ...

    async def list_post_processors(
        self, user_id: str, channel_id: str | None = None
    ) -> list[tuple[str, str]]:
        """The ``#names`` ``user_id`` has activated on ``channel_id`` (default: this
        extension's channel), as (name, description): for autocompletion."""
        ...

    async def describe_post_processors(
        self, user_id: str, channel_id: str | None = None
    ) -> dict[str, Any]:
        """What a settings page shows (issue 46): ``{"activated": [{name, processor,
        default_param, description, output_target, available}], "available": [{name,
        display_name, description, category, version, keywords, display_order,
        parameters, output_schema, output_target, builtin, owner}]}`` for the person
        ``user_id`` is on ``channel_id`` (default: this extension's channel)."""
        ...

    async def kept_file(
        self, user_id: str, file_id: str, channel_id: str | None = None
    ) -> KeptFile | None:
        """The file ``file_id`` kept for the person ``user_id`` is on ``channel_id``
        (default: this extension's channel), ADR 0096; ``None`` when that person has
        no such file: one person never reaches another's, whatever the id."""
        ...

    async def keep_file(
        self,
        user_id: str,
        name: str,
        mime_type: str,
        path: str,
        channel_id: str | None = None,
    ) -> KeptFile:
        """Keep a file the person ``user_id`` sent (an upload, a photo), written by
        the channel at ``path`` (in its data dir; the kernel copies it, the channel
        may remove it): a ``ValueError`` naming ``files.max_bytes`` when it is larger
        (ADR 0096)."""
        ...

    async def held_notices(self, channel_id: str, user_id: str) -> list[str]:
        """What this extension sent to ``user_id`` on ``channel_id`` (``notify_user``, or
        its manifest's ``notify_user`` subscription) that waits for that channel to be
        loaded, oldest first (ADR 0076): e.g. a member's reminder due while their
        channel was down. Only this extension's own notifications."""
        ...

    @needs(CONTROL, "restart Hearth")
    def request_restart(self) -> None: ...
    @needs(CONTROL, "shut Hearth down")
    def request_shutdown(self) -> None: ...

    # State (SPEC §9): JSON values in the kernel's store, so an extension keeps
    # what it needs across turns (and restarts) without files of its own. Scope
    # "session" (the default) is this extension's state in the session of the
    # turn being served — outside a turn it raises ``StateScopeError``; scope
    # "extension" is this extension's own across sessions. Keys expire after
    # ``state.ttl_s`` without a read or write; the least recently used keys are
    # evicted beyond ``state.max_bytes_per_extension``.

    async def get_state(
        self, key: str, default: Any = None, *, scope: StateScope = "session"
    ) -> Any:
        """The value stored under ``key`` (as JSON gives it back), else ``default``;
        reading refreshes the key's expiry."""
        ...

    async def set_state(self, key: str, value: Any, *, scope: StateScope = "session") -> None:
        """Store ``value`` (JSON only: anything else is a ``TypeError`` naming the key).
        Refused with ``StateLimitError`` when the session's share would pass
        ``state.max_bytes_per_session``."""
        ...

    async def delete_state(self, key: str, *, scope: StateScope = "session") -> None:
        """Forget ``key`` (nothing happens when it is not there)."""
        ...

    async def clear_state(self, *, scope: StateScope = "session") -> None:
        """Forget every key of the scope: the current session's, or the extension-wide ones."""
        ...


class AgentExtensionContext(ExtensionContext, Protocol):
    """The context of an extension with an ``agent:`` manifest section.

    In-process only: a model router cannot cross a process boundary.
    """

    @property
    def agent_id(self) -> str: ...
    @property
    def agent_model(self) -> str | None: ...
    @property
    def model_router(self) -> Any: ...
    @property
    def resolved_tools(self) -> list[Any]: ...
    @property
    def resolved_instructions(self) -> str: ...
    @property
    def agent_descriptor(self) -> AgentDescriptor: ...

    async def run_agent(
        self,
        task: str,
        context: AgentInvocationContext | None = None,
        *,
        extra_tools: Sequence[Any] = (),
    ) -> AgentResponse:
        """Run the manifest's agent (instructions, ``uses_tools``, model, limits)
        with ``extra_tools`` added; never raises: failures are ``status="error"``."""
        ...
