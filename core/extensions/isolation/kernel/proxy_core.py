"""What every proxy mixin relies on: one call into the plugin host.

Its own module so that the mixins of the contract's providers
(``mixins.py``) and of its hooks (``hook_mixins.py``) share it without
importing each other.
"""

from __future__ import annotations

from typing import Any

from core.extensions.access.served_calls import served_token
from core.extensions.isolation.protocol.messages import HostMethod, InvokeParams

__all__ = ["DEFAULT", "ProxyCore"]

DEFAULT = object()  # "the per-call deadline from settings"


class ProxyCore:
    """Implemented by ``IsolatedExtension``; the mixins add the protocols' methods."""

    ext_id: str
    described: dict[str, Any]

    async def remote(self, method: str, params: Any, *, deadline: Any = DEFAULT) -> Any:
        raise NotImplementedError

    async def call_method(self, name: str, *args: Any, deadline: Any = DEFAULT) -> Any:
        """Call protocol method ``name`` of the extension in the host."""
        params = InvokeParams(name, list(args), served_token(self.ext_id)).to_wire()
        return await self.remote(HostMethod.INVOKE, params, deadline=deadline)
