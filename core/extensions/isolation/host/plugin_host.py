"""The plugin host: the child process that runs one isolated extension.

Started by the kernel as ``python -I -B -c BOOTSTRAP <project root> <fd>``
(``-I`` ignores the environment and user site; the project root is passed
explicitly). It speaks the framed RPC of ``protocol.py`` on fd ``<fd>``.
Order matters: limits are set and the working directory changed *before*
the extension is imported, so its import-time code is already confined.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import resource
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from core.extensions.access.state_scope import serving
from core.extensions.contract import HOST_ABI_VERSION, Command, TurnContext
from core.extensions.contract.channels import USAGE_KEYWORD, takes_usage
from core.extensions.contract.files import COLLECTING, Artifact
from core.extensions.contract.hook_specs import HOOK_SPECS
from core.extensions.isolation.host.client_context import (
    ClientContext,
    ForwardingLogHandler,
    serving_call,
)
from core.extensions.isolation.host.limits import HostLimits, apply_limits
from core.extensions.isolation.protocol.artifacts import ARTIFACTS, artifacts_to_wire
from core.extensions.isolation.protocol.framing import (
    event_from_wire,
    invocation_from_wire,
    request_from_wire,
    turn_from_wire,
)
from core.extensions.isolation.protocol.hook_wire import (
    HOOK_METHODS,
    encode_hook_result,
    hook_args_from_wire,
)
from core.extensions.isolation.protocol.messages import (
    HOST_REQUESTS,
    CallToolParams,
    CommandParams,
    Empty,
    EventParams,
    InvokeParams,
    LifecycleParams,
    LoadParams,
    PingResult,
    Ready,
    StreamParams,
    Wire,
    decode,
)
from core.extensions.isolation.protocol.rpc import RpcPeer
from core.extensions.isolation.protocol.wire import plain
from core.extensions.loading.capabilities import PROTOCOLS, Capability, detect_capabilities
from core.extensions.loading.importer import import_entrypoint

_PR_SET_PDEATHSIG = 1
STREAM_LIMIT = 1024 * 1024
USAGE_METHODS = frozenset({"send_to_user", "on_stream_end"})  # may carry a turn's usage


class HostServer:
    """Answers the kernel's requests for one extension instance."""

    def __init__(self) -> None:
        self.peer: RpcPeer | None = None
        self.ext: Any = None
        self.ctx: ClientContext | None = None
        self.allowed: set[str] = set()
        self.tools: dict[str, Any] = {}
        self.commands: dict[str, Command] = {}

    async def handle(self, method: str, params: Any) -> Any:
        """Serve one request: only ``HOST_REQUESTS``, with their typed payload."""
        payload: Wire = decode(HOST_REQUESTS, method, params)
        return await getattr(self, f"rpc_{method}")(payload)

    def notified(self, method: str, params: Any) -> None:
        raise LookupError(f"unknown notification {method[:80]!r}")

    # ------------------------------------------------------------ setup

    async def rpc_ping(self, params: Empty) -> dict[str, Any]:
        """Liveness, with the CPU time used so far (all threads) for the kernel's judgement."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return PingResult(usage.ru_utime + usage.ru_stime, time.monotonic()).to_wire()

    async def rpc_load(self, load: LoadParams) -> dict[str, Any]:
        """Import the extension and say the host ABI this host speaks (ADR 0086); a
        kernel speaking another one is refused before any extension code runs."""
        assert self.peer is not None
        if load.abi_version != HOST_ABI_VERSION:
            raise RuntimeError(
                f"the kernel speaks host ABI {load.abi_version}, this plugin host "
                f"ABI {HOST_ABI_VERSION}; refusing to load {load.ext_id!r}"
            )
        apply_limits(HostLimits.from_wire(load.limits))
        os.chdir(load.data_dir)
        self.ctx = ClientContext(self.peer, load)
        _route_logging(self.peer)
        code_dir = Path(load.code_dir or load.ext_dir)  # what the kernel hashed (ADR 0073)
        cls = import_entrypoint(load.ext_id, code_dir, load.entrypoint)
        self.ext = cls()
        return Ready(HOST_ABI_VERSION).to_wire()

    async def rpc_initialize(self, params: Empty) -> dict[str, Any]:
        await self.ext.initialize(self.ctx)
        capabilities = detect_capabilities(self.ext)
        by_name = {proto.__name__: methods for proto, methods in PROTOCOLS.items()}
        self.allowed = {m for name in capabilities for m in by_name[name]}
        return self._describe(capabilities)

    def _describe(self, capabilities: list[Capability]) -> dict[str, Any]:
        ext = self.ext
        described: dict[str, Any] = {"capabilities": [str(c) for c in capabilities]}
        if Capability.TOOL in capabilities:
            self.tools = {t.name: t for t in (_check_tool(t) for t in ext.get_tools())}
            described["tools"] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "params_json_schema": t.params_json_schema,
                    "strict_json_schema": bool(getattr(t, "strict_json_schema", True)),
                    "side_effects": _side_effects_of(t),
                }
                for t in self.tools.values()
            ]
        if Capability.COMMAND in capabilities:
            self.commands = {c.name: c for c in ext.get_commands()}
            described["commands"] = [
                {"name": c.name, "description": c.description} for c in self.commands.values()
            ]
        if Capability.AGENT in capabilities:
            described["agent"] = plain(ext.get_agent_descriptor())
        if Capability.CONTEXT in capabilities:
            described["context_priority"] = int(ext.context_priority)
        if Capability.SETUP in capabilities:
            described["setup_schema"] = list(ext.get_setup_schema())
        for spec in HOOK_SPECS:  # data a hook point's owner reports (a tag hook's patterns)
            if spec.capability in capabilities:
                for attribute in spec.attributes:
                    described[attribute] = [str(p) for p in getattr(ext, attribute) or ()]
        return described

    # ------------------------------------------------------------ calls

    async def rpc_lifecycle(self, params: LifecycleParams) -> Any:
        name = params.name
        try:
            result = getattr(self.ext, name)()
            if asyncio.iscoroutine(result):
                result = await result
        finally:
            if name == "destroy" and self.ctx is not None:  # its life in this host ends
                await self.ctx.shared_services.aclose()
        return bool(result) if name == "health_check" else None

    async def rpc_invoke(self, params: InvokeParams) -> Any:
        name, args = params.name, list(params.args)
        if name not in self.allowed:
            raise LookupError(f"{name!r} is not a method of a protocol this extension implements")
        if name in HOOK_METHODS:
            hook_args = hook_args_from_wire(name, args)
            current = next((a for a in hook_args if isinstance(a, TurnContext)), None)
            with serving(current), serving_call(params.served):  # the turn it serves
                result = await getattr(self.ext, name)(*hook_args)
            return encode_hook_result(name, result)
        turn = None
        if name == "get_context":
            args[1] = turn = turn_from_wire(args[1])
        elif name == "invoke":
            invocation = invocation_from_wire(args[1] if len(args) > 1 else None)
            args, turn = [args[0], invocation], invocation.turn if invocation else None
        elif name == "ask_user" and len(args) == 2:
            args[1] = request_from_wire(args[1])
        method = getattr(self.ext, name)
        extra: dict[str, Any] = {}
        if name in USAGE_METHODS and len(args) == 3:  # the turn's usage (ChannelProxy)
            usage = args.pop()
            if takes_usage(method) and isinstance(usage, dict):
                extra[USAGE_KEYWORD] = usage
        with serving(turn), serving_call(params.served):  # state and questions: this turn
            result = await method(*args, **extra)
        if name == "invoke":
            return plain(result)
        if name == "on_setup_complete":
            return list(result)
        return _jsonable(result)

    async def rpc_call_tool(self, params: CallToolParams) -> Any:
        from agents.tool_context import ToolContext

        tool = self.tools.get(params.name)
        if tool is None:
            raise LookupError(f"unknown tool {params.name!r}")
        turn = turn_from_wire(params.turn)
        context = ToolContext(
            context=turn,
            tool_name=tool.name,
            tool_call_id=params.call_id or "isolated",
            tool_arguments=params.args or "{}",
        )
        collected: list[Artifact] = []  # what the tool attaches (ADR 0096)
        collecting = COLLECTING.set(collected)
        try:
            with serving(turn), serving_call(params.served):
                result = _jsonable(await tool.on_invoke_tool(context, params.args or "{}"))
        finally:
            COLLECTING.reset(collecting)
        if not collected:
            return result
        return {ARTIFACTS: artifacts_to_wire(collected), "result": result}

    async def rpc_command(self, params: CommandParams) -> str | None:
        command = self.commands.get(params.name)
        if command is None:
            raise LookupError(f"unknown command {params.name!r}")
        turn = turn_from_wire(params.turn)
        with serving(turn), serving_call(params.served):
            reply = await command.handler(params.args, turn)
        return None if reply is None else str(reply)

    async def rpc_event(self, params: EventParams) -> None:
        assert self.ctx is not None
        handler = self.ctx.handlers.get(params.handler)
        if handler is None:
            raise LookupError(f"no event handler {params.handler!r} in this host")
        await handler(event_from_wire(params.event))

    async def rpc_stream(self, params: StreamParams) -> None:
        assert self.ctx is not None
        on_chunk, on_tool_call = self.ctx.streams.get(params.stream, (None, None))
        callback = on_chunk if params.kind == "chunk" else on_tool_call
        if callback is not None:
            await callback(params.text)


def _side_effects_of(tool: Any) -> bool | None:
    """What the tool declares (``core.extensions.sdk.side_effects``); ``None``: nothing."""
    value = getattr(tool, "side_effects", None)
    return value if isinstance(value, bool) else None


def _check_tool(tool: Any) -> Any:
    if not all(hasattr(tool, a) for a in ("name", "params_json_schema", "on_invoke_tool")):
        raise TypeError(
            f"tool {tool!r} is not a FunctionTool; only function tools can cross the "
            "process boundary"
        )
    from core.extensions.tool_failures import propagate_failures  # only hosts with tools pay for it

    return propagate_failures(tool)  # the kernel side reports the error to the model


def _jsonable(value: Any) -> Any:
    """Tool and method results as JSON: as they are when possible, else ``str()``."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _route_logging(peer: RpcPeer) -> None:
    handler = ForwardingLogHandler(peer)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the kernel dies (limits-only mode)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


async def _serve(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=STREAM_LIMIT)
    server = HostServer()
    peer = RpcPeer(reader, writer, on_request=server.handle, on_notification=server.notified)
    server.peer = peer
    await peer.serve()


def main(fd: int) -> None:
    """Serve until the kernel closes the channel, then exit at once (plugin threads too)."""
    _die_with_parent()
    code = 0
    try:
        asyncio.run(_serve(fd))
    except BaseException as exc:
        print(f"plugin host failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
