"""The state calls of ``KernelContext`` (SPEC §9, ADR 0022), kept apart so the
context stays one screenful per concern.

Every call reaches the kernel's one store under this extension's own id, in
the session of the turn being served (``state_scope.state_session``), so an
extension can neither read another's state nor another session's.
"""

from __future__ import annotations

from typing import Any

from core.extensions.access.state_scope import state_session
from core.extensions.context.services import KernelServices
from core.extensions.contract import StateScope

__all__ = ["ContextStateCalls"]


class ContextStateCalls:
    """``get_state``, ``set_state``, ``delete_state``, ``clear_state`` of a context
    that has an ``extension_id`` and the kernel's services."""

    extension_id: str
    _services: KernelServices

    async def get_state(
        self, key: str, default: Any = None, *, scope: StateScope = "session"
    ) -> Any:
        return await self._services.state.get(self.extension_id, state_session(scope), key, default)

    async def set_state(self, key: str, value: Any, *, scope: StateScope = "session") -> None:
        await self._services.state.set(self.extension_id, state_session(scope), key, value)

    async def delete_state(self, key: str, *, scope: StateScope = "session") -> None:
        await self._services.state.delete(self.extension_id, state_session(scope), key)

    async def clear_state(self, *, scope: StateScope = "session") -> None:
        await self._services.state.clear(self.extension_id, state_session(scope))
