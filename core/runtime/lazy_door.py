"""A package door that imports a submodule only when one of its names is used (PEP 562).

``core.events``, ``core.agents`` and the other heavy packages export many
names from submodules that load the agents SDK, aiosqlite or the metrics
library; a light caller (the plugin host, ``main.py usage``) must not pay
for the rest (ADRs 0015, 0068). Each name is declared once, in the door's
``if TYPE_CHECKING:`` block, as ``from core.pkg.home import Name as Name``:
type checkers read those lines as explicit re-exports, and ``lazy_door``
reads the same lines (on first use, not at import) for where each name
lives and for ``__all__`` (ADR 0081).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.runtime.errors import HearthError

__all__ = ["DoorDeclarationError", "declared_homes", "lazy_door"]


class DoorDeclarationError(HearthError):
    """A door's ``TYPE_CHECKING`` block holds something other than ``from … import``
    lines; it can only happen to a developer editing a door."""


def declared_homes(package: str, source_file: str) -> dict[str, tuple[str, str]]:
    """Each name the door at ``source_file`` declares → (module, name there).

    Reads the module-level ``if TYPE_CHECKING:`` block; relative imports are
    resolved against ``package``."""
    path = Path(source_file)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=source_file)
    homes: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom) or statement.module is None:
                raise DoorDeclarationError(
                    f"{path}:{statement.lineno}: a lazy door's TYPE_CHECKING block holds only "
                    f"'from <module> import <Name> as <Name>' lines, not {ast.unparse(statement)!r}"
                )
            module = statement.module
            if statement.level:
                base = package.rsplit(".", statement.level - 1)[0]
                module = f"{base}.{module}"
            for alias in statement.names:
                homes[alias.asname or alias.name] = (module, alias.name)
    return homes


def lazy_door(
    package: str, namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` (whose globals are ``namespace``).

    A declared name is imported from its module on first use and cached in
    ``namespace``; ``__all__`` is the sorted declared names."""
    homes: dict[str, tuple[str, str]] = {}

    def declared() -> dict[str, tuple[str, str]]:
        if not homes:
            homes.update(declared_homes(package, namespace["__file__"]))
        return homes

    def getattr_(name: str) -> Any:
        if name == "__all__":
            value: Any = sorted(declared())
        else:
            home = declared().get(name)
            if home is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(home[0]), home[1])
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *declared()})

    return getattr_, dir_
