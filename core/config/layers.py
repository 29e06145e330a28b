"""The layers settings are read from, and which one set a key (ADR 0045).

From the bottom: the models' defaults, the base file (the project's tracked
``settings.yaml``, or the file given with ``--settings``), the base file's
local layer (``settings.local.yaml`` beside it, git-ignored: what the user and
``main.py setup`` chose), then ``HEARTH__SECTION__KEY`` environment
variables. Keeping the user's choices out of the tracked file means a
``git pull`` that changes a default never conflicts with them, while the new
default is still seen wherever the user did not choose otherwise.

Layers merge key by key: a mapping in a higher layer changes only the keys
it names; any other value (a list, a scalar, ``null``) replaces the lower one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from core.runtime.errors import HearthError

__all__ = [
    "ENV_PREFIX",
    "Layer",
    "SettingsError",
    "changed_keys",
    "env_keys",
    "local_layer_path",
    "merge",
    "origin",
    "read_layer",
    "validated",
]

ENV_PREFIX = "HEARTH__"
KeyPath = tuple[str, ...]
T = TypeVar("T")
_MISSING = object()


class SettingsError(HearthError):
    """The settings file is unreadable or invalid; the message names file and key."""


@dataclass(frozen=True)
class Layer:
    """One file's settings as read (``data`` is empty when the file is absent)."""

    path: Path
    data: Mapping[str, Any] = field(default_factory=dict)


def local_layer_path(base: Path) -> Path:
    """The local layer beside ``base``: ``settings.yaml`` -> ``settings.local.yaml``,
    ``prod.yaml`` -> ``prod.local.yaml``. A base that is itself a local layer has
    no further one (it is returned)."""
    if base.stem.endswith(".local"):
        return base
    return base.with_name(f"{base.stem}.local{base.suffix or '.yaml'}")


def read_layer(path: Path, *, required: bool = False) -> Layer:
    """The mapping in the YAML file at ``path``; an absent file is an empty layer
    unless ``required``. Raises ``SettingsError`` naming the file."""
    if not path.is_file():
        if required:
            raise SettingsError(f"{path}: settings file not found")
        return Layer(path)
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: not valid YAML: {exc}") from exc
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise SettingsError(f"{path}: top level must be a mapping, got {type(loaded).__name__}")
    return Layer(path, loaded)


def merge(lower: Mapping[str, Any], upper: Mapping[str, Any]) -> dict[str, Any]:
    """``upper`` over ``lower``: mappings merge key by key, anything else replaces."""
    merged = dict(lower)
    for key, value in upper.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = merge(below, value)
        else:
            merged[key] = value
    return merged


def env_keys(environ: Mapping[str, str] | None = None) -> dict[KeyPath, str]:
    """Key path -> variable name of every ``HEARTH__SECTION__KEY`` variable set
    (names are case-insensitive, as pydantic-settings reads them)."""
    env = os.environ if environ is None else environ
    found: dict[KeyPath, str] = {}
    for name in env:
        if name.upper().startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            found[tuple(name[len(ENV_PREFIX) :].lower().split("__"))] = name
    return found


def _depth(data: Mapping[str, Any], keys: KeyPath) -> tuple[int, bool]:
    """How many of ``keys`` ``data`` holds, and whether it sets the whole path (it
    holds it, or a list or scalar on the way that sets everything below)."""
    node: Any = data
    for depth, key in enumerate(keys):
        if not isinstance(node, Mapping):
            return depth, depth > 0
        if key not in node:
            return depth, False
        node = node[key]
    return len(keys), True


def origin(
    keys: KeyPath, layers: tuple[Layer, ...], environ: Mapping[str, str] | None = None
) -> str | None:
    """Where the value at ``keys`` comes from: the environment variable's name or
    the highest layer's file that sets it; ``None``: only the defaults do."""
    for env_path, name in env_keys(environ).items():
        if keys[: len(env_path)] == env_path:
            return name
    for layer in reversed(layers):
        if _depth(layer.data, keys)[1]:
            return str(layer.path)
    return None


def _nearest(keys: KeyPath, layers: tuple[Layer, ...]) -> Layer | None:
    """The highest layer holding the most of ``keys`` (for an error's file)."""
    best: Layer | None = None
    best_depth = 0
    for layer in layers:
        depth = _depth(layer.data, keys)[0]
        if depth and depth >= best_depth:
            best, best_depth = layer, depth
    return best


def leaves(data: Mapping[str, Any], prefix: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """Every (key path, value) below mappings; lists and scalars are leaves."""
    for key, value in data.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping):
            yield from leaves(value, path)
        else:
            yield path, value


def validated(model: Callable[..., T], layers: tuple[Layer, ...]) -> T:
    """``model`` built from ``layers`` merged (lowest first); an error names the
    file (or environment variable) that set each offending key."""
    data: dict[str, Any] = {}
    for layer in layers:
        data = merge(data, layer.data)
    try:
        return model(**data)
    except ValidationError as exc:
        raise SettingsError(_describe(exc, layers)) from exc


def _describe(exc: ValidationError, layers: tuple[Layer, ...]) -> str:
    parts = []
    for err in exc.errors():
        keys = tuple(str(p) for p in err["loc"])
        where = origin(keys, layers) if keys else None
        if where is None:  # a key missing, or the top level: the file nearest to it
            fallback = next((layer for layer in reversed(layers) if layer.data), layers[0])
            where = str((_nearest(keys, layers) or fallback).path)
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {'.'.join(keys) or '(top level)'}: {message}")
    return "; ".join(parts)


def changed_keys(
    current: Mapping[str, Any],
    defaults: Mapping[str, Any],
    layers: tuple[Layer, ...],
    *,
    tracked: Path,
) -> list[tuple[str, str]]:
    """(dotted key, where it was set) of every leaf of ``current`` that is not its
    value in ``defaults`` and was not set by the ``tracked`` file (which ships
    the defaults). Keys and places only: a value may be a secret."""
    tracked_layers = tuple(layer for layer in layers if layer.path.resolve() == tracked)
    found = []
    for keys, value in leaves(current):
        node: Any = defaults
        for key in keys:
            node = node.get(key, _MISSING) if isinstance(node, Mapping) else _MISSING
        if node == value:
            continue
        where = origin(keys, layers)
        if where is None or where not in {str(layer.path) for layer in tracked_layers}:
            found.append((".".join(keys), where or "derived"))
    return found
