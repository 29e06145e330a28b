"""Typed wire payloads: frozen dataclasses checked strictly against their annotations.

``Wire.from_wire`` accepts exactly the JSON a payload's fields describe — no
unknown keys, no missing required ones, no coercion (``"1"`` is not an int,
``true`` is not an int) — and names the method, the key and what came
instead. Small on purpose: the plugin host imports it before the extension.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, Literal, Self, Union, get_args, get_origin, get_type_hints

__all__ = ["FrameError", "Wire", "decode"]


class FrameError(ValueError):
    """A payload does not match its method's model (names method, key and value)."""


class Wire:
    """Base of every payload: ``to_wire()`` out, ``from_wire(data)`` in (strict)."""

    def to_wire(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_wire(cls, data: Any, where: str | None = None) -> Self:
        where = where or cls.__name__
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise FrameError(f"{where}: params must be an object, got {_kind(data)}")
        hints = _hints(cls)
        known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
        unknown = [k for k in data if k not in known]
        if unknown:
            raise FrameError(f"{where}: unknown key {str(unknown[0])[:40]!r}")
        values: dict[str, Any] = {}
        for name, spec in known.items():
            if name not in data:
                if spec.default is MISSING and spec.default_factory is MISSING:
                    raise FrameError(f"{where}: missing key {name!r}")
                continue
            values[name] = _check(data[name], hints[name], f"{where}: {name}")
        return cls(**values)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = get_type_hints(cls)
    return hints


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check(value: Any, tp: Any, where: str) -> Any:
    """``value`` if it is of type ``tp`` (JSON types only), else ``FrameError``."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        for arm in get_args(tp):
            try:
                return _check(value, arm, where)
            except FrameError:
                continue
        raise FrameError(f"{where} must be {_name(tp)}, got {_kind(value)}")
    if origin is Literal:
        if value in get_args(tp) and isinstance(value, str):
            return value
        raise FrameError(f"{where} must be one of {list(get_args(tp))}, got {str(value)[:40]!r}")
    if origin is list:
        if not isinstance(value, list):
            raise FrameError(f"{where} must be a list, got {_kind(value)}")
        (item,) = get_args(tp)
        return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise FrameError(f"{where} must be an object, got {_kind(value)}")
        _, item = get_args(tp)
        return {k: _check(v, item, f"{where}.{k}") for k, v in value.items()}
    if tp is type(None):
        if value is None:
            return None
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(value, tp):
        return value
    raise FrameError(f"{where} must be {_name(tp)}, got {_kind(value)}")


def _name(tp: Any) -> str:
    if get_origin(tp) in (Union, types.UnionType):
        return " or ".join(_name(a) for a in get_args(tp))
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp))


def decode(registry: Mapping[str, type[Wire]], method: str, params: Any) -> Wire:
    """The typed payload of ``method``; ``LookupError`` when the method is unknown."""
    model = registry.get(method)
    if model is None:
        raise LookupError(f"unknown method {method[:80]!r}")
    return model.from_wire(params, method)
