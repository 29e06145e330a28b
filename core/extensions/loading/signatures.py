"""Check an extension's protocol methods against the contract's signatures, at load.

``isinstance`` on a runtime-checkable Protocol only checks that the names
exist, so ``async def send_to_user(self, message)`` would load and then fail
on the first reply. Like pluggy's ``_verify_hook``, which checks a hook
implementation's arguments against its spec before registering it, this
module checks that each method accepts the arguments the kernel passes: every
parameter of the contract's method positionally (the kernel calls them that
way, defaults included) and every keyword-only one by name. Extra parameters
are fine when they have defaults; ``*args``/``**kwargs`` accept anything.
"""

from __future__ import annotations

import inspect
from typing import Any

from core.runtime.errors import HearthError

__all__ = ["SignatureError", "check_signatures", "expected_signature"]


class SignatureError(HearthError, TypeError):
    """A protocol method whose parameters do not match the contract; names all three."""

    def __init__(self, owner: str, protocol: str, method: str, found: str, expected: str) -> None:
        super().__init__(
            f"{owner}.{method}{found} does not match {protocol}.{method}: expected `{expected}`"
        )
        self.owner = owner
        self.protocol = protocol
        self.method = method
        self.expected = expected


def check_signatures(instance: Any, protocol: type) -> None:
    """Raise ``SignatureError`` for the first method of ``protocol`` that ``instance``
    cannot be called with the way the kernel calls it."""
    for name, spec in _protocol_methods(protocol):
        method = getattr(instance, name, None)
        if method is None or not callable(method):
            continue  # isinstance() already reported a missing member
        try:
            actual = inspect.signature(method)
        except (TypeError, ValueError):
            continue  # a builtin or C callable: nothing to inspect
        args, kwargs = _sample_call(spec)
        try:
            actual.bind(*args, **kwargs)
        except TypeError:
            raise SignatureError(
                type(instance).__qualname__,
                protocol.__name__,
                name,
                _found(instance, name, actual),
                expected_signature(protocol, name),
            ) from None


def expected_signature(protocol: type, name: str) -> str:
    """``async def send_to_user(self, user_id: str, message: str) -> None``."""
    spec = vars(protocol)[name]
    prefix = "async def" if inspect.iscoroutinefunction(spec) else "def"
    signature = inspect.signature(spec)
    params = ", ".join(_param_text(p) for p in signature.parameters.values())
    returns = signature.return_annotation
    tail = "" if returns is inspect.Signature.empty else f" -> {_annotation(returns)}"
    return f"{prefix} {name}({params}){tail}"


def _protocol_methods(protocol: type) -> list[tuple[str, inspect.Signature]]:
    return [
        (name, inspect.signature(value))
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    ]


def _sample_call(spec: inspect.Signature) -> tuple[list[object], dict[str, object]]:
    """Placeholder arguments shaped like the kernel's call (``self`` dropped)."""
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for param in list(spec.parameters.values())[1:]:
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            args.append(None)
        elif param.kind is param.KEYWORD_ONLY:
            kwargs[param.name] = None
    return args, kwargs


def _found(instance: Any, name: str, bound: inspect.Signature) -> str:
    """The implementation's parameters as written (with ``self`` for a plain method)."""
    func = inspect.getattr_static(type(instance), name, None)
    if inspect.isfunction(func):
        return str(inspect.signature(func))
    return str(bound)


def _param_text(param: inspect.Parameter) -> str:
    text = param.name
    if param.kind is param.VAR_POSITIONAL:
        text = "*" + text
    elif param.kind is param.VAR_KEYWORD:
        text = "**" + text
    if param.annotation is not inspect.Parameter.empty:
        text += f": {_annotation(param.annotation)}"
    if param.default is not inspect.Parameter.empty:
        text += f" = {param.default!r}"
    return text


def _annotation(annotation: object) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
