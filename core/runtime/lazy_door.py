"""A package door that imports a submodule only when one of its names is used (PEP 562).

``core.events`` and ``core.metrics`` export many names from heavy submodules;
the plugin host and the extension contract import light parts of them and
must not pay for the rest (ADR 0015). ``lazy_door`` gives such a package its
``__getattr__`` and ``__dir__``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_door"]


def lazy_door(
    package: str, namespace: dict[str, Any], homes: Mapping[str, str], exported: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a name in ``homes`` is
    imported from ``<package>.<home>`` on first use and cached in ``namespace``."""

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *exported])

    return getattr_, dir_
