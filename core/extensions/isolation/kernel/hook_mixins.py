"""One proxy mixin per hook point (SPEC §9), built from the spec table (``hook_specs``).

Each mixin's method has its protocol's signature and forwards the call: it
sends the arguments (``hook_wire.hook_args_to_wire``) and decodes the host's
tagged answer strictly (``decode_hook_result``): an answer the hook cannot
return raises ``HookResultError``, which the kernel's ``HookCaller``
contains like any failing hook. The deadline is the ``HookCaller``'s
(``hooks.timeout_s``); when it cancels a call the host is told to cancel too
and a late answer is dropped (``rpc.py``). A hook's ``attributes`` (a tag
hook's patterns) were reported by the host at initialize.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from core.extensions.contract.hook_specs import HOOK_SPECS, HookSpec
from core.extensions.isolation.kernel.proxy_core import ProxyCore
from core.extensions.isolation.protocol.hook_wire import decode_hook_result, hook_args_to_wire

__all__ = ["HOOK_MIXINS", "hook_mixin"]


async def forward(proxy: ProxyCore, name: str, *args: Any) -> Any:
    """Call hook ``name`` in the host; the decoded value is one ``name`` may return."""
    data = await proxy.call_method(name, *hook_args_to_wire(name, args))
    return decode_hook_result(proxy.ext_id, name, data)


def _forwarder(spec: HookSpec) -> Callable[..., Coroutine[Any, Any, Any]]:
    name = spec.method

    async def method(self: ProxyCore, *args: Any) -> Any:
        return await forward(self, name, *args)

    contract = getattr(spec.protocol, name)
    method.__name__ = name
    method.__qualname__ = f"{spec.capability.removesuffix('Hook')}Proxy.{name}"
    method.__doc__ = f"``{spec.capability}.{name}`` forwarded to the plugin host."
    method.__signature__ = inspect.signature(contract)  # type: ignore[attr-defined]
    return method


def _reported(attribute: str) -> property:
    def value(self: ProxyCore) -> Sequence[str]:
        return tuple(self.described.get(attribute, ()))

    return property(value)


def hook_mixin(spec: HookSpec) -> type[ProxyCore]:
    """The proxy mixin for ``spec``: its method forwarded, its attributes as reported."""
    body: dict[str, Any] = {spec.method: _forwarder(spec), "__module__": __name__}
    body.update({attribute: _reported(attribute) for attribute in spec.attributes})
    name = spec.capability.removesuffix("Hook") + "Proxy"
    return type(name, (ProxyCore,), body)


HOOK_MIXINS: dict[str, type[ProxyCore]] = {spec.capability: hook_mixin(spec) for spec in HOOK_SPECS}
