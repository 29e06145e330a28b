"""The ``ctx.*`` calls between a plugin host and the kernel, derived from the contract.

``ExtensionContext`` (``context_protocol``) is the one declaration of the
context API (ADR 0050). Each method it declares becomes the RPC method
``ctx.<name>``: its payload is a JSON object of the method's arguments by name,
each checked strictly against the type hint it has in the protocol
(``wire.check_fields``: ``Sequence[str]`` travels as a list), and its answer is
the result as ``plain`` JSON, rebuilt in the host from the return hint
(``wire.rebuilder``). A coroutine method is a request; a plain one (which
returns nothing) is a notification. The host builds a forwarding method per
call (``client_context``), the kernel serves exactly these names with the
extension's ``KernelContext`` (``kernel_side``): no other attribute of it can be
reached from a plugin host.

What does not follow from a signature is declared below, once: the members
the host answers itself, and the calls whose payload drops an argument (a
callback stays in the host) or adds one (what an in-process call finds in its
task's context: the served call's token, the turn's session). A method whose
arguments cannot cross as JSON and that is declared in neither table fails
here, at import, naming it. Light: the plugin host imports it before the
extension.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Union, get_args, get_origin, get_type_hints

from core.extensions.contract.context import ExtensionContext
from core.extensions.isolation.protocol.wire import FieldHints, check_fields, rebuilder

__all__ = [
    "CONTEXT_CALLS",
    "CONTEXT_CALLS_BY_NAME",
    "HOST_SERVED",
    "RESHAPED",
    "ContextCall",
    "Reshape",
    "derive_calls",
]

# members of ``ExtensionContext`` the plugin host answers itself, from what the
# kernel sent at load (config, declared secrets, ``depends_on``); a subscription is
# checked there and registered with the kernel by the ``ctx.subscribe`` notice
HOST_SERVED: Final = frozenset({"get_config", "get_secret", "get_extension", "subscribe_event"})


@dataclass(frozen=True, slots=True)
class Reshape:
    """How a call's payload differs from its signature: ``stays`` are arguments kept
    in the host (callbacks, a default), ``adds`` fields (name, type hint) the host
    adds; an added field whose hint admits ``None`` may be left out."""

    stays: tuple[str, ...] = ()
    adds: tuple[tuple[str, Any], ...] = ()


# the session of the turn the host serves when the call is made (state is the
# session's, and the kernel must not use its own task's)
_SESSION: Final = ("session_id", str | None)
RESHAPED: Final[Mapping[str, Reshape]] = {
    # the callbacks stay in the host; the kernel streams to its id (``stream`` requests)
    "invoke_agent_streamed": Reshape(("on_chunk", "on_tool_call"), (("stream", int),)),
    # the token of the kernel's call being served: the kernel asks in that turn (ADR 0043)
    "ui_request": Reshape(adds=(("served", str | None),)),
    "get_state": Reshape(("default",), (_SESSION,)),  # answered found/value (``StateValue``)
    "set_state": Reshape(adds=(_SESSION,)),
    "delete_state": Reshape(adds=(_SESSION,)),
    "clear_state": Reshape(adds=(_SESSION,)),
}


@dataclass(frozen=True, slots=True)
class ContextCall:
    """One context method as it crosses the process boundary."""

    name: str  # the protocol's method
    function: Callable[..., Any]  # as the protocol declares it
    method: str  # the RPC method, ``ctx.<name>``
    notice: bool  # a notification: sent without waiting, nothing answered
    fields: FieldHints  # the payload's fields: type hint, required
    defaults: Mapping[str, Any]  # of the optional fields, as the signature gives them
    positional: tuple[str, ...]  # the arguments a caller may pass by position, in order
    result: Callable[[Any], Any]  # the host's view of the kernel's answer

    def decode(self, params: Any) -> dict[str, Any]:
        """The kernel's side: a host's payload as keyword arguments, checked strictly
        (``FrameError`` naming the method, the key and what came), defaults filled."""
        return {**self.defaults, **check_fields(self.fields, params, self.method)}

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The host's side: an extension's arguments as the payload, refused with the
        ``TypeError`` the call itself would raise."""
        values = dict(self.defaults)
        if args:
            if len(args) > len(self.positional):
                raise TypeError(
                    f"{self.name}() takes {len(self.positional)} positional arguments "
                    f"but {len(args)} were given"
                )
            values.update(zip(self.positional, args, strict=False))
        for key, value in kwargs.items():
            if key not in self.fields or key in self.positional[: len(args)]:
                raise TypeError(f"{self.name}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        if len(values) < len(self.fields):
            missing = [name for name in self.fields if name not in values]
            raise TypeError(f"{self.name}() missing required argument(s): {', '.join(missing)}")
        return values


def derive_calls(protocol: type = ExtensionContext) -> dict[str, ContextCall]:
    """Every method ``protocol`` declares (its own, not a base's), but those the host
    serves, as calls by RPC method name."""
    calls: dict[str, ContextCall] = {}
    for name, function in vars(protocol).items():
        if inspect.isfunction(function) and not name.startswith("_") and name not in HOST_SERVED:
            call = _derive(f"{protocol.__name__}.{name}", name, function)
            calls[call.method] = call
    return calls


def _derive(where: str, name: str, function: Callable[..., Any]) -> ContextCall:
    hints = get_type_hints(function)
    reshape = RESHAPED.get(name, Reshape())
    fields: dict[str, tuple[Any, bool]] = {}
    defaults: dict[str, Any] = {}
    positional: list[str] = []
    for param in list(inspect.signature(function).parameters.values())[1:]:
        if param.name in reshape.stays:
            continue
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise TypeError(f"{where}: *{param.name} cannot cross the process boundary")
        required = param.default is param.empty
        fields[param.name] = (_wire_hint(where, param.name, hints[param.name]), required)
        if not required:
            defaults[param.name] = param.default
        if param.kind is param.POSITIONAL_OR_KEYWORD:
            positional.append(param.name)
    for extra, hint in reshape.adds:
        optional = type(None) in get_args(hint)
        fields[extra] = (hint, not optional)
        if optional:
            defaults[extra] = None
    notice = not inspect.iscoroutinefunction(function)
    if notice and hints.get("return") is not type(None):
        raise TypeError(f"{where}: a method that is not async must return None (a notification)")
    result = rebuilder(hints.get("return", Any))
    return ContextCall(
        name, function, f"ctx.{name}", notice, fields, defaults, tuple(positional), result
    )


_JSON_SCALARS = (str, int, float, bool, type(None))


def _wire_hint(where: str, argument: str, hint: Any) -> Any:
    """The type an argument has on the wire (a sequence is a list); ``TypeError``
    naming the method and argument when it cannot cross as JSON."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any or hint in _JSON_SCALARS or origin is Literal:
        return hint
    if origin in (Union, types.UnionType):
        return Union[tuple(_wire_hint(where, argument, arm) for arm in args)]  # noqa: UP007
    if origin in (list, Sequence):
        return list[_wire_hint(where, argument, args[0])]  # type: ignore[misc]
    if origin is dict and args[0] is str:
        return dict[str, _wire_hint(where, argument, args[1])]  # type: ignore[misc]
    raise TypeError(
        f"{where}: argument {argument!r} ({hint}) cannot cross the process boundary as "
        f"JSON; serve the method in the plugin host (HOST_SERVED) or reshape its payload "
        f"(RESHAPED in {__name__})"
    )


# worked out once, at import: the per-call path only looks them up
CONTEXT_CALLS: Final[Mapping[str, ContextCall]] = types.MappingProxyType(derive_calls())
CONTEXT_CALLS_BY_NAME: Final[Mapping[str, ContextCall]] = types.MappingProxyType(
    {call.name: call for call in CONTEXT_CALLS.values()}
)
