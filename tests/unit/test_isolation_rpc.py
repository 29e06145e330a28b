"""The framed RPC channel between kernel and plugin host, over a real socket pair."""

from __future__ import annotations

import asyncio
import contextvars
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from core.extensions.errors import PermissionDeniedError
from core.extensions.isolation.protocol.errors import CallTimeoutError, PeerClosedError, RemoteError
from core.extensions.isolation.protocol.framing import (
    MAX_MESSAGE_BYTES,
    ProtocolError,
    read_message,
)
from core.extensions.isolation.protocol.rpc import RpcPeer

SERVING: contextvars.ContextVar[str] = contextvars.ContextVar("serving", default="nobody")


class Server:
    """A peer whose methods record what happened to them."""

    def __init__(self) -> None:
        self.running = 0
        self.max_running = 0
        self.cancelled = 0
        self.notes: list[Any] = []

    async def handle(self, method: str, params: Any) -> Any:
        if method == "echo":
            return params
        if method == "fail":
            raise ValueError("boom")
        if method == "refuse":
            raise PermissionDeniedError("ext", "emit topic 'x'")
        if method == "scoped":  # like a hook serving a turn: set, wait, read, reset
            token = SERVING.set(params["who"])
            try:
                await asyncio.sleep(params["s"])
                return SERVING.get()
            finally:
                SERVING.reset(token)
        if method == "slow":
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            try:
                await asyncio.sleep(params["s"])
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            finally:
                self.running -= 1
            return "slept"
        raise LookupError(method)

    def notified(self, method: str, params: Any) -> None:
        self.notes.append((method, params))


@asynccontextmanager
async def pair(max_inflight: int = 32) -> AsyncIterator[tuple[RpcPeer, Server, RpcPeer]]:
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_unix_connection(sock=a)
    rb, wb = await asyncio.open_unix_connection(sock=b)
    server = Server()

    async def nothing(method: str, params: Any) -> Any:
        raise LookupError(method)

    client = RpcPeer(ra, wa, on_request=nothing, on_notification=lambda m, p: None)
    remote = RpcPeer(
        rb, wb, on_request=server.handle, on_notification=server.notified, max_inflight=max_inflight
    )
    tasks = [asyncio.create_task(client.serve()), asyncio.create_task(remote.serve())]
    try:
        yield client, server, remote
    finally:
        client.close("test over")
        remote.close("test over")
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_calls_results_errors_and_notifications_cross_the_channel():
    async with pair() as (client, server, _):
        assert await client.call("echo", {"a": [1, "ü"]}) == {"a": [1, "ü"]}
        with pytest.raises(RemoteError) as failed:
            await client.call("fail")
        assert type(failed.value).__name__ == "ValueError" and str(failed.value) == "boom"
        with pytest.raises(PermissionDeniedError, match="not permitted to emit topic 'x'"):
            await client.call("refuse")
        await client.notify("hello", {"n": 1})
        await client.call("echo")  # ordered after the notification
        assert server.notes == [("hello", {"n": 1})]


async def test_a_call_past_its_deadline_fails_and_is_cancelled_remotely():
    async with pair() as (client, server, _):
        with pytest.raises(CallTimeoutError, match="slow did not answer within 0.1 s"):
            await client.call("slow", {"s": 30}, deadline=0.1)
        for _ in range(100):
            if server.cancelled:
                break
            await asyncio.sleep(0.01)
        assert server.cancelled == 1 and server.running == 0


async def test_incoming_calls_are_bounded_by_max_inflight():
    async with pair(max_inflight=4) as (client, server, _):
        results = await asyncio.gather(*(client.call("slow", {"s": 0.02}) for _ in range(40)))
        assert results == ["slept"] * 40
        assert server.max_running == 4


async def test_calls_answered_at_once_or_after_waiting_keep_their_own_context():
    # a request runs to its first wait inside the reader, then goes on as a task:
    # a context variable set before the wait is still its own after it, and resets
    async with pair() as (client, _, _remote):
        waited = [client.call("scoped", {"who": f"turn-{i}", "s": 0.01 * i}) for i in range(5)]
        answered = await asyncio.gather(*waited, client.call("echo", {"n": 1}))
        assert answered == [*(f"turn-{i}" for i in range(5)), {"n": 1}]
        assert await client.call("scoped", {"who": "again", "s": 0}) == "again"
    assert SERVING.get() == "nobody"


async def test_pending_calls_fail_when_the_peer_goes_away():
    async with pair() as (client, _, remote):
        pending = asyncio.create_task(client.call("slow", {"s": 30}))
        await asyncio.sleep(0.05)
        remote.close("host died")
        with pytest.raises(PeerClosedError):
            await pending


async def test_an_oversized_frame_is_refused_before_it_is_read():
    reader = asyncio.StreamReader()
    reader.feed_data(struct.pack(">I", MAX_MESSAGE_BYTES + 1) + b"{}")
    with pytest.raises(ProtocolError, match="exceeds"):
        await read_message(reader)
    garbage = asyncio.StreamReader()
    garbage.feed_data(struct.pack(">I", 3) + b"[1]")
    with pytest.raises(ProtocolError, match="not an object"):
        await read_message(garbage)
