"""The context API is declared once (issue 27, ADR 0050): ``ExtensionContext``.

The isolated client's forwarding methods, the kernel's dispatcher of the
``ctx.*`` calls and their wire payloads are derived from the protocol; the
kernel's ``KernelContext`` and the SDK's ``FakeContext`` are checked against it
here, member by member, so a method one of them forgets fails a test naming
it. A method added to the protocol and to ``KernelContext`` works in process
and through a real plugin host with nothing else written.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from test_isolation_hostile import command, isolated, running_kernel, settings

from conftest import ext_code
from core.extensions.access.state_scope import serving
from core.extensions.context.kernel_context import KernelContext
from core.extensions.contract import ExtensionContext, TurnContext
from core.extensions.isolation.host.client_context import ClientContext
from core.extensions.isolation.kernel import kernel_side
from core.extensions.isolation.kernel.kernel_side import ContextServer
from core.extensions.isolation.protocol.context_calls import (
    CONTEXT_CALLS,
    HOST_SERVED,
    RESHAPED,
    derive_calls,
)
from core.extensions.isolation.protocol.messages import LoadParams
from core.extensions.isolation.protocol.rpc import RpcPeer
from core.extensions.sdk.testing import FakeContext
from support.harness import wait_for

IMPLEMENTATIONS = (KernelContext, ClientContext, FakeContext)
MEMBERS = [name for name in vars(ExtensionContext) if not name.startswith("_")]


def _shape(function: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """Each parameter's name, kind, default and resolved type hint (``self`` aside),
    and the result's hint."""
    hints = get_type_hints(function)
    parameters = list(inspect.signature(function).parameters.values())[1:]
    returns = ("return", None, None, hints.get("return"))
    return [(p.name, p.kind, p.default, hints.get(p.name)) for p in parameters] + [returns]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("member", MEMBERS)
def test_each_implementation_has_the_member_as_the_protocol_declares_it(
    implementation: type, member: str
) -> None:
    declared = vars(ExtensionContext)[member]
    found = inspect.getattr_static(implementation, member, None)
    where = f"{implementation.__name__}.{member}"
    assert found is not None, f"{where} is missing: ExtensionContext declares it"
    if isinstance(declared, property):
        assert isinstance(found, property), f"{where} must be a property"
        return
    assert _shape(found) == _shape(declared), f"{where} differs from ExtensionContext.{member}"
    assert inspect.iscoroutinefunction(found) == inspect.iscoroutinefunction(declared), where


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_each_implementation_has_the_protocols_attributes(
    implementation: type, tmp_path: Path
) -> None:
    instances = {
        FakeContext: lambda: FakeContext(tmp_path),
        ClientContext: lambda: ClientContext(None, LoadParams("x", "d", "m:E", str(tmp_path), 1)),  # type: ignore[arg-type]
    }
    if implementation not in instances:  # KernelContext: set in __init__, checked by mypy
        return
    instance = instances[implementation]()
    for attribute in ExtensionContext.__annotations__:
        assert hasattr(instance, attribute), f"{implementation.__name__}.{attribute} is missing"


def test_the_calls_are_the_protocols_methods_but_those_the_host_serves() -> None:
    methods = {n for n in MEMBERS if inspect.isfunction(vars(ExtensionContext)[n])}
    assert {call.name for call in CONTEXT_CALLS.values()} == methods - HOST_SERVED
    assert set(RESHAPED) <= methods - HOST_SERVED and HOST_SERVED <= methods
    assert all(method == f"ctx.{call.name}" for method, call in CONTEXT_CALLS.items())
    # the in-process-only agent members never become calls
    assert "ctx.run_agent" not in CONTEXT_CALLS


def test_a_method_whose_arguments_cannot_cross_fails_at_derivation_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def watch(self: Any, topic: str, on_change: Callable[[str], None]) -> None: ...

    monkeypatch.setattr(ExtensionContext, "watch", watch, raising=False)
    with pytest.raises(TypeError, match=r"ExtensionContext.watch: argument 'on_change'"):
        derive_calls()


# ---------------------------------------------------------------- every call, over RPC


def _sample(hint: Any) -> Any:
    """A value of type ``hint`` (a callback: none)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return args[0]
    if origin is Union or type(None) in args:
        return _sample(next(a for a in args if a is not type(None)))
    if origin is not None and "Callable" in repr(origin):
        return None
    if origin in (list, tuple) or "Sequence" in repr(origin):
        return [_sample(args[0])]
    if origin is dict:
        return {"k": 1}
    return {str: "text", int: 3, float: 0.5, bool: True}.get(hint, {"any": [1]})


def _arguments(name: str) -> tuple[list[Any], dict[str, Any]]:
    function = vars(ExtensionContext)[name]
    hints = get_type_hints(function)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in list(inspect.signature(function).parameters.values())[1:]:
        if param.kind is param.KEYWORD_ONLY:
            kwargs[param.name] = _sample(hints[param.name])
        else:
            args.append(_sample(hints[param.name]))
    return args, kwargs


async def _connected(
    served: Any, calls: Any = None, client_class: type = ClientContext, data_dir: str = "/tmp"
) -> tuple[Any, list[RpcPeer]]:
    """A client context in "the host" and a ``ContextServer`` serving ``served``,
    over a real RPC channel (framing, JSON, strict decoding)."""
    a, b = socket.socketpair()
    host_side = await asyncio.open_unix_connection(sock=a)
    kernel_side_streams = await asyncio.open_unix_connection(sock=b)
    clients: list[Any] = []

    async def stream(stream_id: int, kind: str, text: str) -> None:
        on_chunk, on_tool_call = clients[0].streams[stream_id]
        callback = on_chunk if kind == "chunk" else on_tool_call
        if callback is not None:
            await callback(text)

    server = ContextServer(
        served,
        subscribe=lambda *a: None,
        stream=stream,
        logger=logging.getLogger("test"),
        calls=calls,
    )

    async def refuse(method: str, params: Any) -> Any:
        raise LookupError(method)

    host = RpcPeer(*host_side, on_request=refuse, on_notification=lambda m, p: None)
    kernel = RpcPeer(
        *kernel_side_streams, on_request=server.handle, on_notification=server.notified
    )
    load = LoadParams("test_ext", "d", "m:E", data_dir, 1, control=True)
    clients.append(client_class(host, load))
    return clients[0], [host, kernel]


RECORDS = (
    "emitted",
    "notifications",
    "user_messages",
    "answers",
    "ui_requests",
    "agent_tasks",
    "requeued",
    "state",
    "restarts_requested",
    "shutdowns_requested",
)


async def test_every_call_through_the_client_does_what_the_call_in_process_does(
    tmp_path: Path,
) -> None:
    """Each method of the protocol, with arguments of its declared types, called on
    an isolated client served by a ``FakeContext`` behind the kernel's dispatcher,
    answers and records exactly what the same call on a ``FakeContext`` does."""
    local, remote = FakeContext(tmp_path / "a"), FakeContext(tmp_path / "b")
    for fake in (local, remote):
        fake.agent_reply, fake.commands = "done", [("help", "all commands")]
    client, peers = await _connected(remote)
    serving_tasks = [asyncio.create_task(p.serve()) for p in peers]
    try:
        with serving(TurnContext(session_id="s1")):
            for name in sorted(c.name for c in CONTEXT_CALLS.values()):
                args, kwargs = _arguments(name)
                expected = getattr(local, name)(*args, **kwargs)
                got = getattr(client, name)(*args, **kwargs)
                if inspect.isawaitable(expected):
                    expected, got = await expected, await got
                assert got == expected, name
            chunks: list[str] = []

            async def collect(text: str) -> None:
                chunks.append(text)

            # a callback stays in the host; the kernel streams to it by id
            assert await client.invoke_agent_streamed("p", on_chunk=collect) == "done"
            assert chunks == ["done"] and client.streams == {}
            await local.invoke_agent_streamed("p")
        await wait_for(lambda: remote.shutdowns_requested and remote.restarts_requested)
        for record in RECORDS:
            assert getattr(remote, record) == getattr(local, record), record
    finally:
        for task in serving_tasks:
            task.cancel()


async def test_the_dispatcher_reaches_nothing_but_the_protocols_calls() -> None:
    """A hostile host names any attribute of the kernel's context: each is refused
    before the context is touched (``request_reload`` is a ``KernelContext`` method
    the contract does not offer; ``get_extension`` would hand over an object)."""
    touched: list[str] = []

    class Watched:
        extension_id = "walled"

        def __getattr__(self, name: str) -> Any:
            touched.append(name)
            raise AttributeError(name)

    server = ContextServer(
        Watched(),  # type: ignore[arg-type]
        subscribe=lambda *a: None,
        stream=lambda *a: None,  # type: ignore[arg-type, return-value]
        logger=logging.getLogger("test"),
    )
    hostile = [
        *(f"ctx.{n}" for n in dir(KernelContext) if f"ctx.{n}" not in CONTEXT_CALLS),
        *(f"ctx.{n}" for n in HOST_SERVED),
        "ctx.run_agent",
        "ctx.request_restart",  # a notification, not a request
        "emit",
        "ctx.emit.__globals__",
    ]
    for method in hostile:
        with pytest.raises(LookupError, match="unknown method"):
            await server.handle(method, {})
    for method in ("ctx.emit", "ctx.request_reload", "ctx.get_secret"):
        with pytest.raises(LookupError):
            server.notified(method, {})
    assert touched == []


# ---------------------------------------------------------------- a new method


async def shout(self: Any, text: str, *, times: int = 1) -> list[str]:
    """The protocol's new method (as ``ExtensionContext`` would declare it)."""
    ...


async def kernel_shout(self: KernelContext, text: str, *, times: int = 1) -> list[str]:
    """``KernelContext``'s implementation: the one place that implements it."""
    return [f"{self.extension_id}: {text.upper()}"] * times


def shouter(name: str) -> str:
    return ext_code(
        f"""
        def get_commands(self):
            from core.extensions.contract import Command

            async def shout(args, turn):
                return repr(await self.ctx.shout(args, times=2))

            return [Command("{name}", "shout", shout)]
        """
    )


# the plugin host derives its calls at import, from the protocol it imports: the
# extension declares the method there first, as if the contract's source had it
IN_THE_HOST = """
from core.extensions.contract import ExtensionContext
from core.extensions.isolation.host import client_context
from core.extensions.isolation.protocol import context_calls


async def shout(self, text: str, *, times: int = 1) -> list[str]: ...


ExtensionContext.shout = shout
client_context.forwarding(client_context.ClientContext, context_calls.derive_calls())
"""


async def test_a_method_added_to_the_protocol_and_the_kernel_context_works_everywhere(
    make_ext, settings_file, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ExtensionContext, "shout", shout, raising=False)
    monkeypatch.setattr(KernelContext, "shout", kernel_shout, raising=False)
    # what the kernel derives at import, with the method in the protocol's source
    monkeypatch.setattr(kernel_side, "CONTEXT_CALLS", derive_calls())
    make_ext("inproc", shouter("shout_here"), {"isolation": "inprocess"})
    make_ext("walled", IN_THE_HOST + shouter("shout_there"), isolated())
    async with running_kernel(settings(settings_file)) as kernel:
        assert kernel.loader.records["walled"].error is None
        assert kernel.loader.instance("walled").host_pid is not None  # a real plugin host
        assert await command(kernel, "/shout_here hi") == repr(["inproc: HI"] * 2)
        assert await command(kernel, "/shout_there hi") == repr(["walled: HI"] * 2)
