"""Hearth's optional dependency groups, and the line an extension gets when a
package of its group is not installed.

The groups are declared once, in ``pyproject.toml``'s
``[project.optional-dependencies]`` (``memory``: the embedding model and vector
scan; ``telegram``: the Bot API client); an extension names the group it
imports from with ``optional_group:`` in its manifest. ``make install``
installs every group; a bare ``pip install -e .`` installs none, and an
extension whose import then fails for a module of its group is skipped with
one line naming the module, the group and the command that installs it,
instead of an ``error`` with a traceback; memory says the same line when only
its model's packages are missing and ranks by words (docs/adr/0077-optional-dependency-groups.md).
The metadata and TOML readers are imported when a failure is explained, so the
library stays light.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

__all__ = ["install_line", "missing_group_reason", "missing_module", "optional_groups"]

DISTRIBUTION = "hearth"
# the checkout's pyproject.toml (core/extensions/sdk/ is three levels below it)
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_NO_MODULE = re.compile(r"No module named '([^']+)'")


def _normalized(name: str) -> str:
    """A distribution name as PEP 503 compares it (``Ruamel_YAML`` is ``ruamel-yaml``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = _REQUIREMENT_NAME.match(requirement)
    return _normalized(match.group(1)) if match else ""


@functools.cache
def optional_groups() -> dict[str, frozenset[str]]:
    """Each optional group's distributions (normalised names).

    Read from the checkout's ``pyproject.toml`` when Hearth runs from one: an
    editable install's metadata is only as new as its last ``pip install``.
    Otherwise from the installed distribution's ``Requires-Dist`` markers
    (``extra == "memory"``); ``{}`` when neither is there.
    """
    import importlib.metadata
    import tomllib

    if PYPROJECT.is_file():
        project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == DISTRIBUTION:
            declared = project.get("optional-dependencies", {})
            return {
                group: frozenset(_requirement_name(r) for r in requirements)
                for group, requirements in declared.items()
            }
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    groups: dict[str, set[str]] = {}
    for requirement in requires:
        marker = _EXTRA_MARKER.search(requirement)
        if marker is not None:
            groups.setdefault(marker.group(1), set()).add(_requirement_name(requirement))
    return {group: frozenset(names) for group, names in groups.items()}


def missing_module(exc: BaseException) -> str | None:
    """The top-level module a ``ModuleNotFoundError`` names, also one raised in a
    plugin host (it arrives as a ``RemoteError`` of type ``ModuleNotFoundError``)."""
    name: str | None = None
    if isinstance(exc, ModuleNotFoundError):
        name = exc.name
    elif getattr(exc, "type_name", None) == "ModuleNotFoundError":
        found = _NO_MODULE.search(str(exc))
        name = found.group(1) if found else None
    return name.split(".", 1)[0] if name else None


def _installed(distribution: str) -> bool:
    import importlib.metadata

    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _belongs_to(module: str, distributions: frozenset[str]) -> bool:
    """Whether ``module`` comes from one of ``distributions``: by the installed
    distribution that provides it, or, when none does, by its name or by a
    distribution of the group not being installed (``telegram`` is the module of
    ``python-telegram-bot``, which says so only once it is installed)."""
    import importlib.metadata

    owners = importlib.metadata.packages_distributions().get(module, [])
    if owners:
        return any(_normalized(owner) in distributions for owner in owners)
    return _normalized(module) in distributions or not all(map(_installed, distributions))


def install_line(module: str, group: str) -> str:
    """``needs numpy, of Hearth's optional group 'memory': run …`` (no extension id:
    the report and the log put it in front)."""
    return (
        f"needs {module}, of Hearth's optional group {group!r}: "
        f"run `make install` or `pip install -e '.[{group}]'`"
    )


def missing_group_reason(group: str | None, exc: BaseException) -> str | None:
    """``install_line`` when ``exc`` is a module of ``group`` not found; None when
    the extension names no group, the group is unknown, or the module is not of it
    (then the failure is an ordinary error)."""
    module = missing_module(exc)
    if group is None or module is None:
        return None
    distributions = optional_groups().get(group)
    if not distributions:
        return None
    return install_line(module, group) if _belongs_to(module, distributions) else None
