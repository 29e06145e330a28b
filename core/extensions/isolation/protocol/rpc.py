"""Request/response correlation over one framed stream, used by both sides.

Each side can call the other while serving calls from it (a tool call may
emit an event mid-way). Incoming requests run at once up to their first wait,
then as tasks, at most ``max_inflight`` at a time: when that many are
running the reader stops
reading, the socket buffer fills and the peer's writes block — a flood of
messages costs bounded memory and the reader yields to the event loop after
every message, so it never starves the rest of the process.

Every frame is checked (``check_frame``) before it is used: a malformed one
ends the channel with a ``protocol error`` reason (the kernel then replaces
the host). ``serve`` never raises: whatever goes wrong becomes its reason.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from core.extensions.isolation.protocol.errors import (
    CallTimeoutError,
    PeerClosedError,
    error_to_wire,
    remote_error,
)
from core.extensions.isolation.protocol.framing import (
    ProtocolError,
    check_frame,
    encode,
    read_message,
    valid_id,
)
from core.extensions.isolation.protocol.messages import Notice
from core.extensions.isolation.protocol.ratelimit import LogLimiter
from core.runtime import Resumed, escape_control

RequestHandler = Callable[[str, Any], Awaitable[Any]]
NotificationHandler = Callable[[str, Any], None]

CANCEL = Notice.CANCEL
DEFAULT_MAX_INFLIGHT = 32

log = logging.getLogger("core.isolation.rpc")


class RpcPeer:
    """One end of the channel: ``call``/``notify`` out, ``serve`` in."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_request = on_request
        self._on_notification = on_notification
        self._slots = asyncio.Semaphore(max_inflight)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._serving: dict[Any, asyncio.Task[None]] = {}
        self._closed_reason: str | None = None
        self.refusals = LogLimiter(log, "refused notifications", rate_per_s=1.0, burst=20.0)

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    # ------------------------------------------------------------ outgoing

    async def call(self, method: str, params: Any = None, *, deadline: float | None = None) -> Any:
        """Call ``method`` on the peer; its exception comes back as ``RemoteError``.

        Raises ``CallTimeoutError`` after ``deadline`` s (the peer is told to
        cancel) and ``PeerClosedError`` when the channel ends first.
        """
        if self._closed_reason is not None:
            raise PeerClosedError(self._closed_reason)
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            async with asyncio.timeout(deadline):
                await self._send({"id": call_id, "method": method, "params": params})
                return await future
        except TimeoutError:
            self._cancel_remote(call_id)
            raise CallTimeoutError(method, deadline or 0.0) from None
        except asyncio.CancelledError:
            self._cancel_remote(call_id)
            raise
        finally:
            self._pending.pop(call_id, None)

    async def notify(self, method: str, params: Any = None) -> None:
        if self._closed_reason is None:
            await self._send({"method": method, "params": params})

    def notify_nowait(self, method: str, params: Any = None) -> None:
        """Queue a notification without waiting for the buffer to drain (sync callers)."""
        if self._closed_reason is None:
            self._writer.write(encode({"method": method, "params": params}))

    def _cancel_remote(self, call_id: int) -> None:
        if self._closed_reason is None and not self._writer.is_closing():
            self._writer.write(encode({"method": CANCEL, "params": {"id": call_id}}))

    async def _send(self, message: dict[str, Any]) -> None:
        self._writer.write(encode(message))
        await self._writer.drain()

    # ------------------------------------------------------------ incoming

    async def serve(self) -> str:
        """Read until the stream ends; returns why it ended. Fails pending calls."""
        reason = "channel closed"
        try:
            while (message := await read_message(self._reader)) is not None:
                check_frame(message)
                await self._dispatch(message)
                await asyncio.sleep(0)
        except ProtocolError as exc:
            reason = f"protocol error: {exc}"
        except (ConnectionError, OSError) as exc:
            reason = f"channel error: {exc}"
        except Exception as exc:  # a bug here must end the channel, never the watcher
            log.exception("RPC channel failed")
            reason = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            self.close(reason)
        return reason

    async def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        call_id = message.get("id")
        if method is None:
            self._resolve(call_id, message)
        elif call_id is None:
            self._notified(str(method), message.get("params"))
        elif call_id in self._serving:
            await self._send(_error(call_id, LookupError(f"request id {call_id!r} is in use")))
        else:
            await self._slots.acquire()
            answer = self._answer(call_id, str(method), message.get("params"))
            # Run to its first suspension at once: most requests (a hook, a ping) are
            # answered without one, and skip a task and a turn of the event loop. One
            # that waits goes on as a task, in the same context (a context variable set
            # before it waited is reset in the context that set it).
            context = contextvars.copy_context()
            try:
                waiting_on = context.run(answer.send, None)
            except StopIteration:
                return
            resumed = _resume(answer, waiting_on)
            self._serving[call_id] = asyncio.create_task(resumed, context=context)

    def _resolve(self, call_id: Any, message: dict[str, Any]) -> None:
        future = self._pending.get(call_id) if isinstance(call_id, int) else None
        if future is None or future.done():
            return  # the caller gave up (timeout or cancel) — drop the late answer
        error = message.get("error")
        if isinstance(error, dict):
            future.set_exception(
                remote_error(
                    str(error.get("type")), str(error.get("message", "")), error.get("denied")
                )
            )
        else:
            future.set_result(message.get("result"))

    def _notified(self, method: str, params: Any) -> None:
        if method == CANCEL:
            call_id = params.get("id") if isinstance(params, dict) else None
            task = self._serving.get(call_id) if valid_id(call_id) else None
            if task is not None:
                task.cancel()
            return
        try:
            self._on_notification(method, params)
        except Exception as exc:  # a peer's mistake (or attack): one short line, rate-limited
            self.refusals.log(
                logging.WARNING,
                "notification %r refused: %s: %s",
                method[:80],
                type(exc).__name__,
                escape_control(str(exc)[:200]),
            )

    async def _answer(self, call_id: Any, method: str, params: Any) -> None:
        try:
            result = await self._on_request(method, params)
            reply: dict[str, Any] = {"id": call_id, "result": result}
            try:
                frame = encode(reply)
            except ProtocolError as exc:
                frame = encode(_error(call_id, exc, f"result of {method}"))
        except asyncio.CancelledError:
            return  # cancelled by the caller, who is no longer waiting
        except Exception as exc:
            frame = encode(_error(call_id, exc))
        finally:
            self._serving.pop(call_id, None)
            self._slots.release()
        if self._closed_reason is None:
            self._writer.write(frame)
            try:
                await self._writer.drain()
            except (ConnectionError, OSError):
                pass

    # ------------------------------------------------------------ shutdown

    def close(self, reason: str) -> None:
        """Fail every pending call with ``PeerClosedError(reason)``; cancel served calls."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        self.refusals.flush()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(PeerClosedError(reason))
        for task in self._serving.values():
            task.cancel()
        self._writer.close()


async def _resume(coro: Coroutine[Any, Any, None], waiting_on: Any) -> None:
    """The rest of ``coro``, already run up to where it waits on ``waiting_on``."""
    await Resumed(coro, waiting_on)


def _error(call_id: Any, exc: BaseException, where: str | None = None) -> dict[str, Any]:
    message = " ".join(str(exc).split())
    if where:
        message = f"{where}: {message}"
    return {"id": call_id, "error": error_to_wire(exc, message)}
