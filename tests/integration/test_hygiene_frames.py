"""Strict frames and typed payloads on the plugin-host channel (issue 11 item 11).

A hostile host writes raw frames onto its socket: every malformed one is
refused (an error reply, or the channel is closed and the host replaced),
the kernel keeps serving and the extension comes back.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any

import pytest
from test_isolation_hostile import answers_quickly, command, isolated, running_kernel, settings

from conftest import ext_code
from core.extensions.isolation.protocol.context_calls import CONTEXT_CALLS
from core.extensions.isolation.protocol.framing import ProtocolError, check_frame
from core.extensions.isolation.protocol.messages import (
    HOST_REQUESTS,
    KERNEL_NOTIFICATIONS,
    FrameError,
    HostMethod,
    Notice,
    decode,
)
from core.extensions.isolation.protocol.rpc import RpcPeer
from support.harness import wait_for

FORGER = ext_code(
    """
    def get_commands(self):
        from core.extensions.contract import Command
        import asyncio, json, os, struct

        def raw(frame):
            body = frame.encode() if isinstance(frame, str) else json.dumps(frame).encode()
            self.ctx._peer._writer.write(struct.pack(">I", len(body)) + body)

        async def forge(args, turn):
            frame = json.loads(args) if args.startswith(("{", "[")) else args
            asyncio.get_running_loop().call_soon(raw, frame)  # after this reply is written
            return "sent"

        async def ask(args, turn):
            method, params = json.loads(args)
            try:
                return repr(await self.ctx._peer.call(method, params))
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        async def alive(args, turn):
            return f"alive in {os.getpid()}"

        return [Command("forge", "raw frame", forge), Command("ask", "raw call", ask),
                Command("alive", "pid", alive)]
    """
)

MALFORMED = [
    {"id": [1], "method": "ctx.emit", "params": {}},  # the frame that killed the watcher
    {"id": {"a": 1}, "method": "ctx.list_commands"},
    {"id": True, "method": "ctx.list_commands"},
    {"id": 1, "method": 5},
    {"id": 1, "method": "ctx.emit", "params": [1, 2]},
    {"method": "log", "params": "text"},
    {"id": 1, "method": "ctx.emit", "params": {}, "result": 1},
    {"id": "x", "result": 1},
    {"id": 7},
    {"id": 7, "result": 1, "error": {"type": "E", "message": "m"}},
    {"id": 7, "error": "boom"},
    {"method": "log", "params": {}, "extra": 1},
    [1, 2, 3],
    "not json at all",
]


async def test_malformed_frames_close_the_channel_and_the_host_is_replaced(
    make_ext, settings_file, caplog: pytest.LogCaptureFixture
) -> None:
    make_ext("forger", FORGER, isolated())
    async with running_kernel(settings(settings_file)) as kernel:
        record = kernel.loader.records["forger"]
        instance = kernel.loader.instance("forger")
        for n, frame in enumerate(MALFORMED, start=1):
            pid = instance.host_pid
            arg = frame if isinstance(frame, str) else json.dumps(frame)
            assert await command(kernel, f"/forge {arg}") == "sent"
            await wait_for(lambda n=n: _protocol_errors(caplog) >= n, 20)
            await answers_quickly(kernel)
            await wait_for(
                lambda p=pid: (
                    instance.host_pid not in (None, p)
                    and record.status.value == "active"
                    and record.error is None
                ),
                30,
            )
            assert (await command(kernel, "/alive")).startswith("alive in "), frame


def _protocol_errors(caplog: pytest.LogCaptureFixture) -> int:
    return sum(
        "killed: its channel ended (protocol error: " in r.getMessage()
        and "restarted" in r.getMessage()
        for r in caplog.records
    )


async def test_ill_typed_payloads_get_an_error_reply_and_the_host_stays(
    make_ext, settings_file
) -> None:
    make_ext("forger", FORGER, isolated({"permissions": {"emit": ["forger.*"]}}))
    async with running_kernel(settings(settings_file)) as kernel:
        pid = kernel.loader.instance("forger").host_pid
        cases = {
            json.dumps(["ctx.emit", {"topic": ["x"], "payload": {}}]): (
                "ctx.emit: topic must be str, got list"
            ),
            json.dumps(["ctx.emit", {"topic": "forger.x"}]): "ctx.emit: missing key 'payload'",
            json.dumps(["ctx.emit", {"topic": "forger.x", "payload": {}, "sneaky": 1}]): (
                "ctx.emit: unknown key 'sneaky'"
            ),
            json.dumps(["ctx.invoke_agent_streamed", {"prompt": "p", "stream": True}]): (
                "stream must be int, got bool"
            ),
            json.dumps(["ctx.no_such_method", {}]): "unknown method 'ctx.no_such_method'",
            # members of the kernel's context that are not the contract's: never reached
            json.dumps(
                ["ctx.request_reload", {"ext_id": "x"}]
            ): "unknown method 'ctx.request_reload'",
            json.dumps(["ctx._publish", {}]): "unknown method 'ctx._publish'",
            json.dumps(
                ["ctx.get_extension", {"ext_id": "x"}]
            ): "unknown method 'ctx.get_extension'",
            json.dumps(["ctx.request_restart", {}]): "unknown method 'ctx.request_restart'",
            json.dumps(["load", {}]): "unknown method 'load'",
        }
        for args, expected in cases.items():
            reply = await command(kernel, f"/ask {args}")
            assert expected in reply, (args, reply)
        ok = json.dumps(["ctx.emit", {"topic": "forger.x", "payload": {"n": 1}}])
        assert (await command(kernel, f"/ask {ok}")).isdigit()
        assert kernel.loader.instance("forger").host_pid == pid


def test_every_method_has_a_payload_model_on_the_side_that_serves_it() -> None:
    assert set(HOST_REQUESTS) == {m.value for m in HostMethod}
    assert set(KERNEL_NOTIFICATIONS) == {n.value for n in Notice} - {Notice.CANCEL}
    emit = CONTEXT_CALLS["ctx.emit"]  # the context's calls: derived from its protocol
    params = {"topic": "a.b", "payload": {"x": 1}, "correlation_id": None, "idempotency_key": "k"}
    assert emit.decode(params) == params
    assert emit.decode({"topic": "a.b", "payload": {}}) == {
        **params,
        "payload": {},
        "idempotency_key": None,
    }
    with pytest.raises(FrameError, match="ctx.emit: payload must be an object, got list"):
        emit.decode({"topic": "a", "payload": []})
    with pytest.raises(LookupError, match="unknown method"):
        decode(KERNEL_NOTIFICATIONS, "ctx.nothing", {})


@pytest.mark.parametrize("frame", [f for f in MALFORMED if isinstance(f, dict)])
def test_check_frame_refuses_each_malformed_shape(frame: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError):
        check_frame(frame)


async def test_a_list_id_ends_serve_with_a_reason_instead_of_a_traceback() -> None:
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_unix_connection(sock=a)
    _, wb = await asyncio.open_unix_connection(sock=b)

    async def never(method: str, params: Any) -> Any:
        raise AssertionError("a malformed request must not reach the handler")

    peer = RpcPeer(ra, wa, on_request=never, on_notification=lambda m, p: None)
    body = json.dumps({"id": [1], "method": "ctx.emit", "params": {}}).encode()
    wb.write(struct.pack(">I", len(body)) + body)
    reason = await asyncio.wait_for(peer.serve(), 10)
    assert reason.startswith("protocol error: frame id must be an integer or a string")
    wb.close()


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        (
            "load",
            {
                "ext_id": "x",
                "ext_dir": "d",
                "entrypoint": "e",
                "data_dir": "d",
                "abi_version": 1,
                "subscribe": ["*", 2],
            },
            "load: subscribe[1] must be str, got int",
        ),
        (
            "load",
            {
                "ext_id": "x",
                "ext_dir": "d",
                "entrypoint": "e",
                "data_dir": "d",
                "abi_version": 1,
                "secrets": {"KEY": 7},
            },
            "load: secrets.KEY must be str or null, got int",
        ),
        ("lifecycle", {"name": "explode"}, "lifecycle: name must be one of ['start', 'stop'"),
        ("ping", [], "ping: params must be an object, got list"),
        ("call_tool", {"name": "t", "args": 1.5}, "call_tool: args must be str, got float"),
        ("event", {"handler": "1", "event": {}}, "event: handler must be int, got str"),
    ],
)
def test_a_frame_error_names_the_path_the_type_wanted_and_what_came(
    method: str, params: Any, expected: str
) -> None:
    with pytest.raises(FrameError) as err:
        decode(HOST_REQUESTS, method, params)
    assert str(err.value).startswith(expected)
