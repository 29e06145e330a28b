"""Architecture rules checked on every run.

Extensions import nothing from ``core`` but ``core.extensions.contract`` and
the extension library ``core.extensions.sdk`` (what makes out-of-process
isolation possible); the kernel never imports an extension; modules stay small.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import PROJECT_ROOT

ALLOWED_CORE_IMPORTS = ("core.extensions.contract", "core.extensions.sdk")
MAX_MODULE_LINES = 500
# modules allowed to be longer, with the most lines each may have: a figure here
# is only ever lowered, and an entry is removed once its module fits the default
MODULE_SIZE_EXCEPTIONS: dict[str, int] = {}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
            found.append((node.lineno, node.module))
    return found


def _allowed_for_extensions(name: str) -> bool:
    return name.split(".")[0] != "core" or any(
        name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED_CORE_IMPORTS
    )


def test_extensions_import_only_the_contract_and_the_library_from_core():
    violations = [
        f"{path.relative_to(PROJECT_ROOT)}:{line}: imports {name}"
        for path in sorted((PROJECT_ROOT / "sandbox" / "extensions").rglob("*.py"))
        for line, name in _imports(path)
        if not _allowed_for_extensions(name)
    ]
    assert not violations, "\n".join(violations)


def test_the_boundary_rule_admits_exactly_the_two_packages():
    assert _allowed_for_extensions("core.extensions.contract")
    assert _allowed_for_extensions("core.extensions.sdk.timemath")
    assert _allowed_for_extensions("aiosqlite")
    for refused in (
        "core.extensions.context.kernel_context",
        "core.extensions.sdkx",
        "core.events",
        "core",
    ):
        assert not _allowed_for_extensions(refused), refused


def test_core_never_imports_sandbox():
    violations = [
        f"{path.relative_to(PROJECT_ROOT)}:{line}: imports {name}"
        for path in sorted((PROJECT_ROOT / "core").rglob("*.py"))
        for line, name in _imports(path)
        if name.split(".")[0] in ("sandbox", "hearth_ext")
    ]
    assert not violations, "\n".join(violations)


def _python_files() -> list[Path]:
    return sorted(
        path
        for top in ("core", "sandbox/extensions", "tests", "bench")
        for path in (PROJECT_ROOT / top).rglob("*.py")
    )


def test_modules_stay_small():
    """Modules hold one job each; a size over the default is a sign to split, and
    the listed exceptions may only shrink (never the formatter silenced to fit)."""
    big = []
    for path in sorted((PROJECT_ROOT / "core").rglob("*.py")):
        name = str(path.relative_to(PROJECT_ROOT))
        limit = MODULE_SIZE_EXCEPTIONS.get(name, MAX_MODULE_LINES)
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > limit:
            big.append(f"{name}: {n} lines (at most {limit})")
    assert not big, "split these modules:\n" + "\n".join(big)


def test_size_exceptions_name_modules_that_need_them():
    """An exception whose module now fits the default (or is gone) is removed."""
    stale = [
        name
        for name in MODULE_SIZE_EXCEPTIONS
        if not (PROJECT_ROOT / name).exists()
        or len((PROJECT_ROOT / name).read_text(encoding="utf-8").splitlines()) <= MAX_MODULE_LINES
    ]
    assert not stale, f"remove these from MODULE_SIZE_EXCEPTIONS: {stale}"


def test_the_formatter_is_never_silenced():
    marker = "fmt: " + "skip"  # split, so this file does not match itself
    found = [
        f"{path.relative_to(PROJECT_ROOT)}:{number}"
        for path in _python_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if marker in line or "fmt: " + "off" in line
    ]
    assert not found, "format these lines instead of skipping them:\n" + "\n".join(found)


def test_every_exception_of_the_kernel_derives_from_the_one_root():
    """Each package's base error derives from ``HearthError`` (a built-in kind such
    as ``ValueError`` may stay as a second base), so none can be forgotten."""
    import builtins

    builtin_errors = {
        name
        for name in dir(builtins)
        if isinstance(getattr(builtins, name), type)
        and issubclass(getattr(builtins, name), BaseException)
    }
    loose = [
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: {node.name}"
        for path in sorted((PROJECT_ROOT / "core").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and node.name != "HearthError"
        and node.bases
        and all(isinstance(b, ast.Name) and b.id in builtin_errors for b in node.bases)
    ]
    assert not loose, "derive these from core.runtime.errors.HearthError:\n" + "\n".join(loose)


def test_every_exception_class_in_the_kernel_is_a_hearth_error_once_imported():
    """The same rule on the classes themselves, which the source scan cannot see
    through: a base imported from a library (``agents``, ``asyncio``, ``pydantic``)
    or an alias. Every module of ``core`` is imported and each exception class it
    defines must have ``HearthError`` among its ancestors."""
    import importlib
    import inspect
    import pkgutil

    import core
    from core.runtime.errors import HearthError

    loose = []
    for info in pkgutil.walk_packages(core.__path__, "core."):
        module = importlib.import_module(info.name)
        loose.extend(
            f"{info.name}.{name} ({', '.join(base.__name__ for base in cls.__bases__)})"
            for name, cls in vars(module).items()
            if inspect.isclass(cls)
            and cls.__module__ == info.name
            and issubclass(cls, BaseException)
            and not issubclass(cls, HearthError)
        )
    assert not loose, "derive these from core.runtime.errors.HearthError:\n" + "\n".join(loose)
