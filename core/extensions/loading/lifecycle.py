"""Bounded lifecycle calls: every call into an extension has a deadline.

Synchronous extension code (``health_check``, module import, constructor)
runs in a daemon worker thread so the deadline can cut it off: the kernel
stops waiting and marks the extension ``error``; a thread that never returns
is abandoned (daemon threads never hold up the process's exit, unlike the
default executor's, which ``asyncio.run`` joins).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from core.extensions.errors import LifecycleTimeoutError


async def call_with_timeout(
    extension_id: str, instance: Any, method: str, timeout_s: float, *args: Any
) -> Any:
    """Call ``instance.method(*args)`` (sync or async) within ``timeout_s``.

    Raises ``LifecycleTimeoutError`` naming the method and the limit; the
    extension's own exception propagates unchanged.
    """
    func = getattr(instance, method)
    if not inspect.iscoroutinefunction(func):
        result = await call_in_thread(extension_id, method, timeout_s, func, *args)
        if not inspect.isawaitable(result):
            return result
        func = _returning(result)
    try:
        async with asyncio.timeout(timeout_s):
            return await func(*args)
    except TimeoutError:
        raise LifecycleTimeoutError(extension_id, method, timeout_s) from None


def _returning(awaitable: Any) -> Callable[..., Any]:
    async def wait(*_: Any) -> Any:
        return await awaitable

    return wait


async def call_in_thread(
    extension_id: str, what: str, timeout_s: float, func: Callable[..., Any], *args: Any
) -> Any:
    """Run synchronous extension code in a daemon thread within ``timeout_s``.

    Raises ``LifecycleTimeoutError`` naming ``what`` when the deadline passes.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            value, ok = func(*args), True
        except BaseException as exc:  # handed to the waiting coroutine
            value, ok = exc, False
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop closed while the call ran
            pass

    name = f"ext-{extension_id}-{what}"
    threading.Thread(target=work, name=name, daemon=True).start()
    try:
        async with asyncio.timeout(timeout_s):
            return await asyncio.shield(future)
    except TimeoutError:
        raise LifecycleTimeoutError(extension_id, what, timeout_s) from None


def describe_exception(exc: BaseException) -> str:
    """One line: ``Type: message`` (the message alone for our own errors)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, LifecycleTimeoutError):
        return text
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def failure_reason(stage: str, exc: BaseException) -> str:
    """``<stage> failed: Type: message``; a timeout already names its method."""
    if isinstance(exc, LifecycleTimeoutError):
        return str(exc)
    return f"{stage} failed: {describe_exception(exc)}"
