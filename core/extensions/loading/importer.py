"""Import an extension directory as its own package under a private name.

Each directory becomes package ``hearth_ext.<id>`` so relative imports inside
it work and two extensions may both ship a ``main.py``. The directory may be
anywhere (``paths.extensions`` is configurable).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

PACKAGE_ROOT = "hearth_ext"


def package_name(ext_id: str) -> str:
    return f"{PACKAGE_ROOT}.{ext_id}"


def import_entrypoint(ext_id: str, ext_dir: Path, entrypoint: str) -> type[Any]:
    """Return the class named by ``module:Class`` inside ``ext_dir``.

    Raises ``ImportError`` / ``AttributeError`` with the extension's own
    message; the loader turns them into a one-line status reason.
    """
    module_name, class_name = entrypoint.split(":", 1)
    _ensure_root()
    pkg = package_name(ext_id)
    _forget(pkg)
    spec = importlib.util.spec_from_file_location(
        pkg, ext_dir / "__init__.py", submodule_search_locations=[str(ext_dir)]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - defensive
        raise ImportError(f"cannot create a package for {ext_dir}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[pkg] = package
    if (ext_dir / "__init__.py").is_file():
        spec.loader.exec_module(package)
    module_file = ext_dir / (module_name.replace(".", "/") + ".py")
    if not module_file.is_file() and not (ext_dir / module_name.replace(".", "/")).is_dir():
        raise ImportError(f"entrypoint module {module_name!r} not found ({module_file})")
    module = importlib.import_module(f"{pkg}.{module_name}")
    try:
        cls = getattr(module, class_name)
    except AttributeError:
        raise AttributeError(
            f"entrypoint class {class_name!r} not found in module {module_name!r}"
        ) from None
    if not isinstance(cls, type):
        raise TypeError(f"entrypoint {entrypoint!r} is not a class")
    return cls


def _ensure_root() -> None:
    if PACKAGE_ROOT not in sys.modules:
        root = types.ModuleType(PACKAGE_ROOT)
        root.__path__ = []
        sys.modules[PACKAGE_ROOT] = root


def _forget(pkg: str) -> None:
    """Drop a previous import of the same extension (restart within a process)."""
    for name in [n for n in sys.modules if n == pkg or n.startswith(pkg + ".")]:
        del sys.modules[name]


def imported_modules(ext_id: str) -> dict[str, types.ModuleType]:
    """The modules of the extension's package now in ``sys.modules`` (a reload
    keeps them, to put them back if the new code fails: ADR 0032)."""
    pkg = package_name(ext_id)
    return {n: m for n, m in sys.modules.items() if n == pkg or n.startswith(pkg + ".")}


def restore_modules(ext_id: str, modules: dict[str, types.ModuleType]) -> None:
    """Put back what ``imported_modules`` returned, dropping whatever replaced it."""
    _forget(package_name(ext_id))
    sys.modules.update(modules)
