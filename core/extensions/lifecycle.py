"""Bounded lifecycle calls: every call into an extension has a deadline."""

from __future__ import annotations

import asyncio
import inspect
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
    try:
        async with asyncio.timeout(timeout_s):
            result = func(*args)
            if inspect.isawaitable(result):
                result = await result
            return result
    except TimeoutError:
        raise LifecycleTimeoutError(extension_id, method, timeout_s) from None


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
