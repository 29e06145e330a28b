"""Typed wire payloads: frozen dataclasses checked strictly against their annotations.

``Wire.from_wire`` accepts exactly the JSON a payload's fields describe — no
unknown keys, no missing required ones, no coercion (``"1"`` is not an int,
``true`` is not an int) — and names the method, the key and what came
instead. Small on purpose: the plugin host imports it before the extension.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Literal, Self, Union, get_args, get_origin, get_type_hints

from core.runtime.errors import HearthError

__all__ = ["FieldHints", "FrameError", "Wire", "check_fields", "decode", "plain", "rebuilder"]

# each field's type hint and whether it is required
FieldHints = Mapping[str, tuple[Any, bool]]


class FrameError(HearthError, ValueError):
    """A payload does not match its method's model (names method, key and value)."""


class Wire:
    """Base of every payload: ``to_wire()`` out, ``from_wire(data)`` in (strict)."""

    def to_wire(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_wire(cls, data: Any, where: str | None = None) -> Self:
        return cls(**check_fields(_fields(cls), data, where or cls.__name__))


def check_fields(known: FieldHints, data: Any, where: str) -> dict[str, Any]:
    """The values of ``data``, a JSON object with exactly the ``known`` fields (the
    required ones present), each of its hint's type; else ``FrameError`` naming
    ``where``, the key and what came instead. Absent optional fields are left out."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrameError(f"{where}: params must be an object, got {_kind(data)}")
    unknown = [k for k in data if k not in known]
    if unknown:
        raise FrameError(f"{where}: unknown key {str(unknown[0])[:40]!r}")
    values: dict[str, Any] = {}
    for name, (hint, required) in known.items():
        if name not in data:
            if required:
                raise FrameError(f"{where}: missing key {name!r}")
            continue
        values[name] = _check(data[name], hint, f"{where}: {name}")
    return values


_FIELDS: dict[type, dict[str, tuple[Any, bool]]] = {}


def _fields(cls: type) -> dict[str, tuple[Any, bool]]:
    """Each field's type hint and whether it is required, worked out once per class
    (``get_type_hints`` and ``fields`` are slow for a call on every frame)."""
    known = _FIELDS.get(cls)
    if known is None:
        hints = get_type_hints(cls)
        known = _FIELDS[cls] = {
            f.name: (hints[f.name], f.default is MISSING and f.default_factory is MISSING)
            for f in fields(cls)  # type: ignore[arg-type]
        }
    return known


@functools.cache
def _shape(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """``get_origin`` and ``get_args`` of a type hint, once per hint."""
    return get_origin(tp), get_args(tp)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check(value: Any, tp: Any, where: str) -> Any:
    """``value`` if it is of type ``tp`` (JSON types only), else ``FrameError``."""
    origin, arms = _shape(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in arms:  # an optional left empty: the common case
            return None
        for arm in arms:
            try:
                return _check(value, arm, where)
            except FrameError:
                continue
        raise FrameError(f"{where} must be {_name(tp)}, got {_kind(value)}")
    if origin is Literal:
        if value in arms and isinstance(value, str):
            return value
        raise FrameError(f"{where} must be one of {list(arms)}, got {str(value)[:40]!r}")
    if origin is list:
        if not isinstance(value, list):
            raise FrameError(f"{where} must be a list, got {_kind(value)}")
        (item,) = arms
        return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise FrameError(f"{where} must be an object, got {_kind(value)}")
        _, item = arms
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


def plain(value: Any) -> Any:
    """Contract data as JSON values: a dataclass as a dict of its fields, dicts, tuples
    and lists item by item, anything else as it is.

    ``dataclasses.asdict`` does the same but deep-copies every leaf: on the hot path
    of an isolated hook (a ``TurnContext`` out on every call) it cost more than all
    the rest of the frame's encoding. The frame is encoded at once, so no copy is
    needed.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: plain(item) for key, item in value.items()}
    if kind is tuple or kind is list:
        return [plain(item) for item in value]
    names = _FIELD_NAMES.get(kind)
    if names is None:
        if not is_dataclass(value) or isinstance(value, type):
            return value
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(value))
    return {name: plain(getattr(value, name)) for name in names}


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _same(value: Any) -> Any:
    return value


def rebuilder(tp: Any) -> Callable[[Any], Any]:
    """The inverse of ``plain`` for a value of type ``tp``: a function that rebuilds
    contract dataclasses, tuples and floats from the JSON ``plain`` made of them
    (the kernel's answers to context calls, ADR 0050). Worked out once per type, so
    a call pays only for what its value holds; JSON values come back as they are."""
    origin, arms = _shape(tp)
    if isinstance(tp, type) and is_dataclass(tp):
        hints = get_type_hints(tp)
        parts = [(f.name, rebuilder(hints[f.name])) for f in fields(tp) if f.init]
        return lambda data: tp(*[part(data[name]) for name, part in parts])
    if origin is tuple:
        if len(arms) == 2 and arms[1] is Ellipsis:
            each = rebuilder(arms[0])
            return lambda data: tuple(each(item) for item in data)
        parts_in_order = [rebuilder(arm) for arm in arms]
        return lambda data: tuple(p(v) for p, v in zip(parts_in_order, data, strict=True))
    if origin is list:
        item = rebuilder(arms[0])
        return _same if item is _same else lambda data: [item(v) for v in data]
    if origin is dict:
        value = rebuilder(arms[1])
        return _same if value is _same else lambda data: {k: value(v) for k, v in data.items()}
    if origin in (Union, types.UnionType):
        others = [arm for arm in arms if arm is not type(None)]
        inner = rebuilder(others[0]) if len(others) == 1 else _same
        return _same if inner is _same else lambda data: None if data is None else inner(data)
    return float if tp is float else _same


def decode(registry: Mapping[str, type[Wire]], method: str, params: Any) -> Wire:
    """The typed payload of ``method``; ``LookupError`` when the method is unknown."""
    model = registry.get(method)
    if model is None:
        raise LookupError(f"unknown method {method[:80]!r}")
    return model.from_wire(params, method)
