"""Shared services: one instance per key, created lazily, closed at teardown (seed 004).

``context.services.get_or_create(key, factory)`` lets extensions share a heavy
resource — an embedding model, a connection pool — instead of loading one
each. The registry lives as long as the kernel (in a plugin host: as long as
the host; an object cannot cross the process boundary):

- the first call for a key runs ``factory``; every call for that key after
  it, and every call made while it runs, gets the same instance (one creation,
  however many callers arrive at once);
- a synchronous factory runs in a worker thread (loading a model must not
  freeze the event loop); an ``async`` one — or a sync one returning an
  awaitable — is awaited on the loop;
- a factory that raises is not remembered: its callers get the error and the
  next call tries again;
- a caller cancelled while the factory runs does not cancel the creation the
  other callers wait for;
- ``aclose()`` shuts the services down in reverse creation order, each with
  its ``shutdown()``, ``aclose()`` or ``close()`` (the first it has), under a
  deadline; a failure is logged and the others still close.

Keys are global to the registry: name them after what they hold
(``"memory:embeddings:openai:text-embedding-3-small"``), so two extensions
asking for the same thing share it. Importing this module loads nothing
heavy: plugin hosts use it too.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from core.runtime.errors import HearthError

__all__ = ["ExtensionServices", "ServiceRegistry", "ServicesClosedError"]

log = logging.getLogger("core.services")

T = TypeVar("T")
CLOSERS = ("shutdown", "aclose", "close")


class ServicesClosedError(HearthError, RuntimeError):
    """``get_or_create`` after teardown began: nothing new is created then."""

    def __init__(self, key: str) -> None:
        super().__init__(f"shared service {key!r}: the registry is shut down")
        self.key = key


class ServiceRegistry:
    """The instances behind ``context.services`` (one registry per kernel or host)."""

    def __init__(self, *, shutdown_timeout_s: float = 10.0) -> None:
        self.shutdown_timeout_s = shutdown_timeout_s
        self._services: dict[str, Any] = {}  # key -> instance, in creation order
        self._creating: dict[str, asyncio.Task[Any]] = {}
        self._closed = False

    def keys(self) -> list[str]:
        """The keys of the services created so far, oldest first."""
        return list(self._services)

    async def get_or_create(
        self, key: str, factory: Callable[[], Any], *, requester: str = "kernel"
    ) -> Any:
        """The instance for ``key``, running ``factory`` only when there is none."""
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"a shared service key must be a non-empty string, got {key!r}")
        if key in self._services:
            return self._services[key]
        if self._closed:
            raise ServicesClosedError(key)
        task = self._creating.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._create(key, factory, requester), name=f"shared-service:{key}"
            )
            task.add_done_callback(_retrieve)
            self._creating[key] = task
        return await asyncio.shield(task)

    async def _create(self, key: str, factory: Callable[[], Any], requester: str) -> Any:
        try:
            value = await _build(factory)
        except Exception as exc:
            log.warning(
                "shared service %r (asked by %s) could not be created: %s: %s",
                key,
                requester,
                type(exc).__name__,
                exc,
            )
            raise
        finally:
            self._creating.pop(key, None)
        if self._closed:  # teardown began meanwhile: nobody will shut it down later
            await self._shut_down(key, value)
            raise ServicesClosedError(key)
        self._services[key] = value
        log.info("shared service %r created (asked by %s)", key, requester)
        return value

    async def aclose(self) -> None:
        """Teardown: stop creating, then shut every service down, newest first."""
        self._closed = True
        for task in list(self._creating.values()):
            task.cancel()
        if self._creating:
            await asyncio.wait(list(self._creating.values()), timeout=self.shutdown_timeout_s)
        while self._services:
            key, value = self._services.popitem()
            await self._shut_down(key, value)

    async def _shut_down(self, key: str, value: Any) -> None:
        closers = (getattr(value, name, None) for name in CLOSERS)
        closer = next((c for c in closers if callable(c)), None)
        if closer is None:
            return
        try:
            async with asyncio.timeout(self.shutdown_timeout_s):
                if inspect.iscoroutinefunction(closer):
                    await closer()
                else:
                    result = await asyncio.to_thread(closer)
                    if inspect.isawaitable(result):
                        await result
        except Exception as exc:
            log.error(
                "shared service %r: %s() failed: %s: %s",
                key,
                closer.__name__,
                type(exc).__name__,
                exc or f"took longer than {self.shutdown_timeout_s:g} s",
            )


class ExtensionServices:
    """``context.services`` of one extension: the shared registry, with the
    extension named in what it logs."""

    def __init__(self, registry: ServiceRegistry, extension_id: str) -> None:
        self._registry = registry
        self._extension_id = extension_id

    async def get_or_create(
        self, key: str, factory: Callable[[], Awaitable[T]] | Callable[[], T]
    ) -> T:
        """The one instance for ``key``; see the module docstring for the rules."""
        value: T = await self._registry.get_or_create(key, factory, requester=self._extension_id)
        return value


async def _build(factory: Callable[[], Any]) -> Any:
    """Run ``factory``: async ones on the loop, sync ones in a worker thread."""
    if _is_async(factory):
        return await factory()
    value = await asyncio.to_thread(factory)
    if inspect.isawaitable(value):
        value = await value
    return value


def _is_async(factory: Callable[[], Any]) -> bool:
    call = getattr(factory, "__call__", None)  # noqa: B004 (an object with async __call__)
    return inspect.iscoroutinefunction(factory) or inspect.iscoroutinefunction(call)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A failed creation nobody awaits any more must not warn "never retrieved"."""
    if not task.cancelled():
        task.exception()
