"""Every third-party import is declared in pyproject.toml, in the group that serves it.

The kernel (``core/``, ``main.py``) may import only ``[project] dependencies``:
it must run without the optional groups. An extension may add the group its
manifest names (``optional_group:``, ADR 0077); ``bench/`` runs on what
``make install`` installs (every group but ``dev``); tests also have ``dev``.
An import is mapped to its distribution through the installed venv
(``importlib.metadata.packages_distributions``), so ``telegram`` is
``python-telegram-bot`` and ``yaml`` is ``PyYAML``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import yaml

from conftest import PROJECT_ROOT

SCANNED = ("core", "main.py", "sandbox/extensions", "bench", "tests")
SKIPPED_DIRS = {".venv", "__pycache__", "data", "node_modules"}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(requirements: list[str]) -> set[str]:
    return {
        _normalized(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r).group(1)) for r in requirements
    }


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    groups = {g: _requirement_names(r) for g, r in project["optional-dependencies"].items()}
    return _requirement_names(project["dependencies"]), groups


def _python_files() -> list[Path]:
    files = []
    for entry in SCANNED:
        root = PROJECT_ROOT / entry
        paths = [root] if root.is_file() else root.rglob("*.py")
        files.extend(p for p in paths if not SKIPPED_DIRS & set(p.relative_to(PROJECT_ROOT).parts))
    return sorted(files)


def _first_party(files: list[Path]) -> set[str]:
    """Modules of this repository: the project's packages and the scripts and test
    helpers put on ``sys.path`` (``support``, bench's siblings, test modules)."""
    names = {p.stem for p in files}
    names |= {d.name for p in files for d in p.relative_to(PROJECT_ROOT).parents if d.name}
    return names


def _top_level_imports(path: Path) -> set[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(node.lineno, alias.name.split(".")[0]) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.lineno, node.module.split(".")[0]))
    return found


def _allowed(path: Path, main: set[str], groups: dict[str, set[str]]) -> tuple[set[str], str]:
    """The distributions ``path`` may import, and which declaration that is."""
    parts = path.relative_to(PROJECT_ROOT).parts
    if parts[0] == "tests" or path.name.startswith("test_") or path.name == "conftest.py":
        return main.union(*groups.values()), "dependencies or any optional group"
    if parts[0] == "bench":
        installed = [names for group, names in groups.items() if group != "dev"]
        return main.union(*installed), "dependencies or an optional group but dev"
    if parts[0] == "sandbox":
        manifest = yaml.safe_load((PROJECT_ROOT.joinpath(*parts[:3]) / "manifest.yaml").read_text())
        group = (manifest or {}).get("optional_group")
        if group:
            return main | groups.get(group, set()), f"dependencies or its group {group!r}"
    return main, "[project] dependencies"


def test_every_import_is_declared_where_it_is_used():
    main, groups = _declared()
    owners = importlib.metadata.packages_distributions()
    files = _python_files()
    first_party = _first_party(files)
    problems = []
    for path in files:
        allowed, where = _allowed(path, main, groups)
        for line, module in sorted(_top_level_imports(path)):
            if module in sys.stdlib_module_names or module in first_party or module == "__future__":
                continue
            distributions = {_normalized(d) for d in owners.get(module, [])}
            if not distributions:
                problems.append(
                    f"{path.relative_to(PROJECT_ROOT)}:{line}: {module} (no installed distribution)"
                )
            elif not distributions & allowed:
                names = ", ".join(sorted(distributions))
                problems.append(
                    f"{path.relative_to(PROJECT_ROOT)}:{line}: {module} ({names}) is not in {where}"
                )
    assert not problems, "imports pyproject.toml does not declare:\n" + "\n".join(problems)


def test_each_optional_group_serves_a_bundled_extension_that_names_it():
    _, groups = _declared()
    named = {}
    for manifest_path in sorted((PROJECT_ROOT / "sandbox/extensions").glob("*/manifest.yaml")):
        group = (yaml.safe_load(manifest_path.read_text()) or {}).get("optional_group")
        if group:
            assert group in groups, (
                f"{manifest_path}: optional_group: {group!r} is not in pyproject.toml"
            )
            named[group] = manifest_path.parent.name
    assert set(groups) - {"dev"} == set(named), named
