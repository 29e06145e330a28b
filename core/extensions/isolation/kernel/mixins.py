"""One proxy mixin per contract protocol, and the class built from them.

The kernel detects capabilities with ``isinstance``, so a proxy must have
exactly the methods of the protocols its host reported — no more. Each
mixin forwards its protocol's methods over RPC; data the protocol returns
synchronously (tool schemas, commands, the agent descriptor, the context
priority, the setup schema, the tag patterns) was reported by the host at
initialize. The hooks' mixins are in ``hook_mixins.py``.
"""

from __future__ import annotations

import functools
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from core.extensions.access.served_calls import served_token
from core.extensions.contract import (
    AgentDescriptor,
    AgentInvocationContext,
    AgentResponse,
    Command,
    RenderHint,
    TurnContext,
    UserRequest,
    attach,
)
from core.extensions.contract.files import COLLECTING
from core.extensions.contract.render import ToolPhase
from core.extensions.isolation.kernel.hook_mixins import HOOK_MIXINS
from core.extensions.isolation.kernel.proxy_core import ProxyCore
from core.extensions.isolation.protocol.artifacts import ARTIFACTS, artifacts_from_wire
from core.extensions.isolation.protocol.errors import IsolationError, RemoteError
from core.extensions.isolation.protocol.framing import (
    invocation_to_wire,
    response_from_wire,
    turn_to_wire,
)
from core.extensions.isolation.protocol.messages import CallToolParams, CommandParams, HostMethod
from core.extensions.isolation.protocol.wire import plain
from core.extensions.loading.capabilities import Capability
from core.extensions.sdk import side_effects
from core.extensions.tool_failures import describe_tool_error, tool_failure_text


class ToolProxy(ProxyCore):
    _tools: list[FunctionTool] | None = None

    def get_tools(self) -> list[Any]:
        if self._tools is None:
            self._tools = [self._make_tool(spec) for spec in self.described.get("tools", [])]
        return list(self._tools)

    def _make_tool(self, spec: dict[str, Any]) -> FunctionTool:
        name = str(spec["name"])

        async def on_invoke(ctx: ToolContext[Any], args: str) -> Any:
            turn = ctx.context if isinstance(ctx.context, TurnContext) else None
            call_id = getattr(ctx, "tool_call_id", None)
            served = served_token(self.ext_id)
            params = CallToolParams(name, args, turn_to_wire(turn), call_id, served).to_wire()
            try:
                answer = await self.remote(HostMethod.CALL_TOOL, params)
            except RemoteError as exc:  # the tool itself raised: what, as in-process
                return tool_failure_text(name, describe_tool_error(exc))
            except IsolationError as exc:  # the boundary failed: timeout, host gone
                return tool_failure_text(name, str(exc))
            if isinstance(answer, dict) and ARTIFACTS in answer:  # files it attached
                if COLLECTING.get() is not None:  # a turn that sends them (not a workflow's)
                    try:
                        artifacts = artifacts_from_wire(answer[ARTIFACTS])
                    except ValueError as exc:  # a guest's own JSON (wasm): its call fails
                        return tool_failure_text(name, f"its files: {exc}")
                    for artifact in artifacts:
                        attach(artifact)
                return answer.get("result")
            return answer

        tool = FunctionTool(
            name=name,
            description=str(spec.get("description") or ""),
            params_json_schema=dict(spec["params_json_schema"]),
            on_invoke_tool=on_invoke,
            strict_json_schema=bool(spec.get("strict_json_schema", True)),
        )
        declared = spec.get("side_effects")
        if isinstance(declared, bool):  # consent: what the tool says of itself
            side_effects(tool, declared)
        return tool


class ChannelProxy(ProxyCore):
    # ``usage`` travels as a third argument; the host passes it on only to a
    # method that takes it (``channel_protocols.takes_usage``)
    async def send_to_user(
        self, user_id: str, message: str, usage: dict[str, int] | None = None
    ) -> None:
        await self.call_method("send_to_user", user_id, message, *_usage_arg(usage))

    async def send_message(self, message: str) -> None:
        await self.call_method("send_message", message)


class StreamingChannelProxy(ProxyCore):
    async def on_stream_start(self, user_id: str) -> bool | None:
        started = await self.call_method("on_stream_start", user_id)
        return started if isinstance(started, bool) else None  # False: no live text

    async def on_stream_chunk(self, user_id: str, chunk: str) -> None:
        await self.call_method("on_stream_chunk", user_id, chunk)

    async def on_stream_status(self, user_id: str, status: str) -> None:
        await self.call_method("on_stream_status", user_id, status)

    async def on_stream_end(
        self, user_id: str, full_text: str, usage: dict[str, int] | None = None
    ) -> None:
        await self.call_method("on_stream_end", user_id, full_text, *_usage_arg(usage))


def _usage_arg(usage: dict[str, int] | None) -> list[dict[str, int]]:
    return [] if usage is None else [{str(k): int(v) for k, v in usage.items()}]


class InteractiveChannelProxy(ProxyCore):
    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        await self.call_method("ask_user", user_id, plain(request))

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        await self.call_method("close_request", user_id, request_id, outcome)


class AgentProxy(ProxyCore):
    def get_agent_descriptor(self) -> AgentDescriptor:
        return AgentDescriptor(**self.described["agent"])

    async def invoke(
        self, task: str, context: AgentInvocationContext | None = None
    ) -> AgentResponse:
        data = await self.call_method("invoke", task, invocation_to_wire(context))
        return response_from_wire(data)


class SchedulerProxy(ProxyCore):
    async def execute_task(self, task_name: str) -> dict[str, Any] | None:
        result = await self.call_method("execute_task", task_name)
        return result if isinstance(result, dict) else None


class ServiceProxy(ProxyCore):
    async def run_background(self) -> None:
        await self.call_method("run_background", deadline=None)


class ContextProxy(ProxyCore):
    @property
    def context_priority(self) -> int:
        return int(self.described.get("context_priority", 100))

    async def get_context(self, prompt: str, turn_context: TurnContext) -> str | None:
        result = await self.call_method("get_context", prompt, turn_to_wire(turn_context))
        return None if result is None else str(result)


class SetupProxy(ProxyCore):
    def get_setup_schema(self) -> list[dict[str, Any]]:
        return list(self.described.get("setup_schema", []))

    async def apply_config(self, name: str, value: str) -> None:
        await self.call_method("apply_config", name, value)

    async def on_setup_complete(self) -> tuple[bool, str]:
        ok, message = await self.call_method("on_setup_complete")
        return bool(ok), str(message)


class CommandProxy(ProxyCore):
    def get_commands(self) -> list[Command]:
        return [
            Command(str(c["name"]), str(c.get("description", "")), self._command(str(c["name"])))
            for c in self.described.get("commands", [])
        ]

    def _command(self, name: str) -> Any:
        async def handler(args: str, turn: TurnContext) -> str | None:
            served = served_token(self.ext_id)
            params = CommandParams(name, args, turn_to_wire(turn), served).to_wire()
            reply = await self.remote(HostMethod.COMMAND, params)
            return None if reply is None else str(reply)

        return handler


class StatusProxy(ProxyCore):
    async def status_lines(self) -> list[str]:
        result = await self.call_method("status_lines")
        return [str(line) for line in result or []]


class ToolRendererProxy(ProxyCore):
    async def render_tool(
        self, tool: str, phase: ToolPhase, arguments: str, result: str | None
    ) -> RenderHint | None:
        answer = await self.call_method("render_tool", tool, phase, arguments, result)
        if not isinstance(answer, dict):
            return None
        fields = tuple((str(n), str(v)) for n, v in answer.get("fields") or ())
        return RenderHint(
            answer.get("kind", "text"),
            str(answer.get("text", "")),
            str(answer.get("title", "")),
            fields,
        )


MIXINS: dict[str, type[ProxyCore]] = {
    Capability.TOOL: ToolProxy,
    Capability.CHANNEL: ChannelProxy,
    Capability.STREAMING_CHANNEL: StreamingChannelProxy,
    Capability.INTERACTIVE_CHANNEL: InteractiveChannelProxy,
    Capability.AGENT: AgentProxy,
    Capability.SCHEDULER: SchedulerProxy,
    Capability.SERVICE: ServiceProxy,
    Capability.CONTEXT: ContextProxy,
    Capability.SETUP: SetupProxy,
    Capability.COMMAND: CommandProxy,
    Capability.STATUS: StatusProxy,
    Capability.TOOL_RENDERER: ToolRendererProxy,
    **HOOK_MIXINS,
}


@functools.cache
def proxy_class(base: type, capabilities: tuple[str, ...]) -> type:
    """``base`` plus the mixin of each reported protocol (unknown names are refused)."""
    unknown = [c for c in capabilities if c not in MIXINS]
    if unknown:
        raise IsolationError(f"host reported unknown protocols: {', '.join(unknown)}")
    mixins = tuple(MIXINS[c] for c in capabilities)
    name = "Isolated" + "".join(c.removesuffix("Provider") for c in capabilities)
    return type(name, (base, *mixins), {"__module__": base.__module__})
