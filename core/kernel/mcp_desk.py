"""The running kernel's side of Hearth as an MCP server (ADR 0059, docs/mcp-server.md).

``main.py mcp`` is a front: it speaks MCP to the client and journals each
request on ``system.kernel.mcp.request``; this desk answers on
``system.kernel.mcp.response``. So the MCP client is one more channel of the
kernel, and trust, consent and per-person data are the kernel's own:

- the client is the person whose identity is ``mcp:CLIENT`` (settings
  ``people:``; with no ``people:`` section it is the owner, as on any channel
  the kernel has no allow-list for);
- ``call`` runs one of the person's own tools (memory, reminders, kv) as the
  orchestrator would — through the turn's hooks and the consent gate — with a
  ``TurnContext`` for that person. A direct call has no conversation to pause,
  so a tool whose policy is ``ask`` is refused with the reason, as for a
  scheduled run; a reminder set this way fires where the person reads
  (``McpDesk.home``);
- ``ask`` journals a ``user.message`` on the ``mcp`` channel from that person
  (user id ``CLIENT``: one conversation per client), so the router runs one
  ordinary turn; the next message the kernel sends to the client — the
  answer, or a consent question the person answers with their next ``ask``
  ("yes", "always", "no") — is the response (``McpChannel``).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents import FunctionTool, Tool
from agents.tool_context import ToolContext

from core.config import PersonSettings
from core.events import EventBus
from core.events.system_payloads import McpRequest, McpResponse, UserMessage, read_system_payload
from core.events.topics import SystemTopics
from core.extensions.contract import McpAnswer, TurnContext, split_reply_address
from core.extensions.loading import ExtensionRecord
from core.kernel.conversations.people import Household
from core.kernel.shaping.tool_stacking import StackedTools

__all__ = ["MCP_CHANNEL", "MCP_RESOURCES", "MCP_TOOLS", "McpChannel", "McpDesk", "mcp_listing"]

log = logging.getLogger("core.mcp_server")

MCP_CHANNEL = "mcp"
TELEGRAM_CHANNEL = "telegram_channel"
# a member's own chat, by identity prefix: where their reminders set over MCP fire
# (a Discord or Slack address is the member's id: their DM; a Matrix id, their direct room;
# an e-mail address, a new mail to them)
_HOME_CHANNELS = {
    "telegram": TELEGRAM_CHANNEL,
    "discord": "discord_channel",
    "slack": "slack_channel",
    "matrix": "matrix_channel",
    "email": "email_channel",
}
MCP_SUBSCRIBER = "kernel/mcp"
# the person's own tools an MCP client may call (kv_* by prefix); ``ask`` is the desk's
MCP_TOOLS = ("recall", "remember", "forget", "schedule_once", "list_schedules", "cancel_schedule")
KV_PREFIX = "kv_"
UNREAD_KEPT = 20  # messages for a client kept while none of its asks waits
# resources (the person's memories and reminders): the tool whose result is each one
MCP_RESOURCES = {
    "memories": ("list_memories", '{"limit": 100}'),
    "reminders": ("list_schedules", "{}"),
}


def exposed(name: str) -> bool:
    return name in MCP_TOOLS or name.startswith(KV_PREFIX)


def mcp_listing(
    stacked: StackedTools, records: Mapping[str, ExtensionRecord]
) -> list[dict[str, Any]]:
    """The exposed tools as a front lists them: name, description, schema and the
    ``effect`` the providing extension's manifest declares (``tools.<name>.effect``;
    ``None``: not said). Only declarations: the running kernel and ``main.py mcp``
    without one (extensions loaded apart) list the same rows (ADR 0074)."""
    rows = []
    for owner, tools in stacked.tools:
        record = records.get(owner)
        declared = record.manifest.tools if record is not None and record.manifest else {}
        for tool in tools:
            if isinstance(tool, FunctionTool) and exposed(tool.name):
                said = declared.get(tool.name)
                rows.append(
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "schema": tool.params_json_schema,
                        "effect": said.effect if said is not None else None,
                    }
                )
    return sorted(rows, key=lambda row: row["name"])


class McpChannel:
    """The ``mcp`` channel in the router. What the kernel sends to a client answers that
    client's oldest ``ask`` still waiting; what comes when none waits (the reply of
    a turn resumed by an approval) is kept, a few at most, and goes ahead of the
    next answer, so nothing the person should read is lost."""

    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._waiting: dict[str, deque[tuple[str, float]]] = {}
        self._unread: dict[str, deque[str]] = {}

    def expect(self, client: str, request_id: str, expires_at: float) -> None:
        """An ``ask`` of ``client`` waits for the next message sent to it (until the
        front gives up at ``expires_at``)."""
        self._waiting.setdefault(client, deque()).append((request_id, expires_at))

    def unread(self, client: str) -> list[str]:
        """What waits for ``client``'s next ``ask``."""
        return list(self._unread.get(client, ()))

    async def send_to_user(self, user_id: str, message: str) -> None:
        client, _ = split_reply_address(user_id)
        waiting = self._waiting.get(client, deque())
        while waiting and waiting[0][1] < time.time():
            waiting.popleft()  # that front gave up: its answer goes to the next ask
        if not waiting:
            self._unread.setdefault(client, deque(maxlen=UNREAD_KEPT)).append(message)
            return
        request_id, _ = waiting.popleft()
        earlier = self._unread.pop(client, deque())
        text = "\n\n".join([*earlier, message])
        await _respond(self._bus, McpResponse(request_id=request_id, text=text))

    async def send_message(self, message: str) -> None:
        log.info("mcp channel: a notification was dropped (MCP clients only ask)")


class McpDesk:
    """Answers the front's requests: list the tools, call one, or ask a turn."""

    def __init__(
        self,
        bus: EventBus,
        household: Household,
        tools: Callable[[], Sequence[Tool]],
        listing: Callable[[], list[dict[str, Any]]],
        people: Mapping[str, PersonSettings] | None = None,
    ) -> None:
        self._bus = bus
        self._household = household
        self._people = dict(people or {})
        self._tools = tools
        self._listing = listing
        self.channel = McpChannel(bus)

    def subscribe(self) -> None:
        self._bus.subscribe(
            SystemTopics.KERNEL_MCP_REQUEST, self._on_request, MCP_SUBSCRIBER, concurrency=8
        )

    async def _on_request(self, event: Any) -> None:
        request = read_system_payload(McpRequest, event, subscriber=MCP_SUBSCRIBER)
        if request is None:
            return
        try:
            if float(request.expires_at) < time.time():
                return  # the front gave up (no kernel was running): nothing to answer
        except ValueError:
            return
        try:
            response = await self._answer(request)
        except Exception as exc:  # an answer the client can read, never a dead request
            log.exception("mcp request %s (%s) failed", request.request_id, request.op)
            response = McpResponse(
                request_id=request.request_id, text="", error=f"{type(exc).__name__}: {exc}"
            )
        if response is not None:
            await _respond(self._bus, response)

    async def _answer(self, request: McpRequest) -> McpResponse | None:
        if request.op == "list":
            rows = self._listing()
            return McpResponse(request_id=request.request_id, text="", tools=json.dumps(rows))
        if request.op == "call":
            return await self._call(request, request.name or "", request.arguments or "{}")
        if request.op == "resource":
            tool_name, arguments = MCP_RESOURCES.get(request.name or "", ("", ""))
            if not tool_name:
                return McpResponse(
                    request_id=request.request_id, text="", error=f"no resource {request.name!r}"
                )
            return await self._call(request, tool_name, arguments)
        if request.op == "ask":
            await self._ask(request)
            return None  # the turn's reply is the response (``McpChannel``)
        return McpResponse(
            request_id=request.request_id, text="", error=f"unknown op {request.op!r}"
        )

    async def serve(
        self, channel_id: str, user_id: str, op: str, name: str | None, arguments: str
    ) -> McpAnswer:
        """A request of an MCP client that a channel extension serves in the kernel
        (``http_api``'s ``/mcp``, ADR 0059): the person is whoever ``user_id`` is on
        ``channel_id``, as for a message of theirs. ``ask`` is not here: the channel
        runs it as an ordinary message of its own."""
        try:
            if op == "list":
                return McpAnswer(tools=tuple(self._listing()))
            if op == "call":
                return await self._run(channel_id, user_id, name or "", arguments, False)
            if op == "resource":
                tool_name, listed = MCP_RESOURCES.get(name or "", ("", ""))
                if not tool_name:
                    return McpAnswer(error=f"no resource {name!r}")
                return await self._run(channel_id, user_id, tool_name, listed, True)
            return McpAnswer(error=f"unknown op {op!r} (list, call or resource)")
        except Exception as exc:  # an answer the client can read, as over the journal
            log.exception("mcp request of %s on %s (%s) failed", user_id, channel_id, op)
            return McpAnswer(error=f"{type(exc).__name__}: {exc}")

    def turn(self, client: str, request_id: str, channel_id: str = MCP_CHANNEL) -> TurnContext:
        """A direct call's context: the client's person, no conversation to pause in,
        and where what it schedules reaches them (``home``)."""
        person = self._household.person(channel_id, client)
        home_channel, home_user = self.home(client, person.name, person.is_owner, channel_id)
        return TurnContext(
            agent_id="mcp",
            channel_id=home_channel,
            user_id=home_user,
            turn_id=f"mcp:{request_id}",
            person=person.name,
            role=person.role,
        )

    def home(
        self, client: str, person: str, owner: bool, channel_id: str = MCP_CHANNEL
    ) -> tuple[str | None, str | None]:
        """Where a reminder set by a direct call fires: the owner's on the default
        channel; a member's on their own chat (Telegram, Discord, Slack) when ``people:``
        names one, else
        on the client's own channel — never on a channel that is someone else's."""
        if owner:
            return None, None
        for identity in self._people.get(person, PersonSettings()).identities:
            prefix, _, user_id = identity.partition(":")
            if prefix in _HOME_CHANNELS:
                return _HOME_CHANNELS[prefix], user_id
        return channel_id, client

    async def _call(self, request: McpRequest, name: str, raw: str) -> McpResponse:
        resource = request.op == "resource"
        answer = await self._run(
            MCP_CHANNEL, request.client, name, raw, resource, request.request_id
        )
        return McpResponse(request_id=request.request_id, text=answer.text, error=answer.error)

    async def _run(
        self,
        channel_id: str,
        client: str,
        name: str,
        raw: str,
        resource: bool,
        request_id: str | None = None,
    ) -> McpAnswer:
        tool = next(
            (t for t in self._tools() if isinstance(t, FunctionTool) and t.name == name), None
        )
        if tool is None or not (exposed(name) or resource):
            return McpAnswer(error=f"no tool {name!r} for MCP clients")
        request_id = request_id or uuid.uuid4().hex
        context = ToolContext(
            context=self.turn(client, request_id, channel_id),
            tool_name=name,
            tool_call_id=f"mcp-{request_id}",
            tool_arguments=raw,
        )
        result = await tool.on_invoke_tool(context, raw)
        return McpAnswer(str(result))

    async def _ask(self, request: McpRequest) -> None:
        self.channel.expect(request.client, request.request_id, float(request.expires_at))
        message = UserMessage(
            text=request.arguments or "",
            user_id=request.client,
            channel_id=MCP_CHANNEL,
            message_id=request.request_id,
        )
        await self._bus.publish(
            message.TOPIC, MCP_CHANNEL, message.to_payload(), idempotency_key=request.request_id
        )


async def _respond(bus: EventBus, response: McpResponse) -> None:
    await bus.publish(response.TOPIC, "kernel", response.to_payload())
