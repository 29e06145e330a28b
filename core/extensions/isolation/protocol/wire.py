"""Typed wire payloads: frozen dataclasses checked strictly by pydantic.

``Wire.from_wire`` accepts exactly the JSON a payload's fields describe — no
unknown keys, no missing required ones, no coercion (``"1"`` is not an int,
``true`` is not an int) — and names the method, the key and what came
instead. The check is pydantic's (strict, unknown keys forbidden), on a
``TypedDict`` made once per payload from its fields; the error is turned into a
``FrameError`` sentence. The payloads stay dataclasses, built from what passed.
pydantic is loaded on the first payload with fields, not at import: the plugin
host imports this before the extension and answers its first ping without it.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NotRequired,
    Self,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from core.runtime.errors import HearthError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

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
    elif not isinstance(data, dict):
        raise FrameError(f"{where}: params must be an object, got {_kind(data)}")
    if not known and not data:
        return {}  # ``ping``: the host answers it before pydantic is loaded
    return _validator(known)(data, where)


_VALIDATORS: dict[int, tuple[FieldHints, Callable[[dict[str, Any], str], dict[str, Any]]]] = {}


def _validator(known: FieldHints) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    """pydantic's check of a payload with the ``known`` fields, made once per field
    table (tables live as long as their payload class or context call). pydantic
    is imported here, on the first payload with fields: a plugin host answers its
    first ping without it (spawn to ready, ADR 0012)."""
    entry = _VALIDATORS.get(id(known))
    if entry is None or entry[0] is not known:
        from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
        from typing_extensions import TypedDict

        shape: Any = TypedDict(  # type: ignore[misc]  # a table known at run time
            "Payload",
            {
                name: hint if required else NotRequired[hint]
                for name, (hint, required) in known.items()
            },
        )
        strict: Any = with_config(ConfigDict(strict=True, extra="forbid"))(shape)
        adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(strict)

        def validate(data: dict[str, Any], where: str) -> dict[str, Any]:
            try:
                return adapter.validate_python(data)
            except ValidationError as exc:
                raise _frame_error(known, where, exc.errors(include_url=False)) from None

        entry = _VALIDATORS[id(known)] = (known, validate)
    return entry[1]


def _frame_error(known: FieldHints, where: str, errors: list[ErrorDetails]) -> FrameError:
    """pydantic's error as a sentence naming ``where``, the key and what came."""
    # an unknown key first (pydantic lists errors in field order), as before
    error: ErrorDetails = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        return FrameError(f"{where}: unknown key {str(loc[0])[:40]!r}")
    if kind == "missing":
        return FrameError(f"{where}: missing key {loc[0]!r}")
    path, hint, value = f"{where}: {loc[0]}", known[str(loc[0])][0], error["input"]
    for step in loc[1:]:  # down lists and objects, to the union or value at fault
        origin, arms = _shape(hint)
        if origin is list and isinstance(step, int):
            path, hint = f"{path}[{step}]", arms[0]
        elif origin is dict and isinstance(step, str):
            path, hint = f"{path}.{step}", arms[1]
        else:
            break
    origin, arms = _shape(hint)
    if origin is Literal:
        return FrameError(f"{path} must be one of {list(arms)}, got {str(value)[:40]!r}")
    return FrameError(f"{path} must be {_wanted(hint)}, got {_kind(value)}")


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


def _wanted(tp: Any) -> str:
    origin, _ = _shape(tp)
    if origin in (Union, types.UnionType):
        return _name(tp)
    if origin is list:
        return "a list"
    if origin is dict:
        return "an object"
    return _name(tp)


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
