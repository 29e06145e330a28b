"""Which skills there are: every folder of ``skills.paths`` and every live
extension's own ``skills/`` folder, read, checked and sorted by name.

The catalog (name and description of each skill) is part of the stable
prefix of the orchestrator's prompt, so it is built deterministically — same
skills, same bytes — and only when something may have changed (the wiring
of extensions, ``/reload``). A skill that fails validation is left out and
reported with its file and field; the others still load. Two skills of one
name: the first source wins (settings folders in order, then extensions by
id) and the other is reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.skills.errors import SkillError
from core.skills.format import SKILL_FILE, Skill, read_skill

__all__ = ["Catalog", "SkillLibrary", "SkillProblem", "SkillRoot", "discover", "settings_roots"]

log = logging.getLogger("core.skills")
SETTINGS_SOURCE = "settings"


@dataclass(frozen=True, slots=True)
class SkillRoot:
    """A folder whose sub-folders are skills, and who offers them."""

    path: Path
    source: str = SETTINGS_SOURCE


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """A skill folder that did not load: where, which field, why."""

    path: Path
    field: str | None
    detail: str
    source: str

    def line(self) -> str:
        where = f"{self.path}: {self.field}" if self.field else str(self.path)
        return f"{where}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Catalog:
    """The skills that loaded (sorted by name) and the problems of those that did not."""

    skills: tuple[Skill, ...] = ()
    problems: tuple[SkillProblem, ...] = ()

    def get(self, name: str) -> Skill | None:
        return next((skill for skill in self.skills if skill.name == name), None)

    def names(self) -> list[str]:
        return [skill.name for skill in self.skills]

    def prompt_text(self) -> str:
        """The lines the orchestrator's system prompt carries; empty without skills."""
        if not self.skills:
            return ""
        lines = [
            "Skills (instructions for particular tasks; before following one, "
            "call load_skill with its name):"
        ]
        lines += [f"- {s.name}: {' '.join(s.description.split())}" for s in self.skills]
        return "\n".join(lines)


def settings_roots(paths: Iterable[Path], project_root: Path) -> list[SkillRoot]:
    """``skills.paths`` as roots: ``~`` expanded, relative ones from the project root."""
    roots = []
    for path in paths:
        path = path.expanduser()
        roots.append(SkillRoot(path if path.is_absolute() else project_root / path))
    return roots


def discover(roots: Sequence[SkillRoot]) -> Catalog:
    """Read every skill folder under ``roots``; never raises for a bad skill."""
    found: dict[str, Skill] = {}
    problems: list[SkillProblem] = []
    for root in roots:
        for folder in _skill_folders(root.path):
            try:
                skill = read_skill(folder, root.source)
            except SkillError as exc:
                problems.append(SkillProblem(exc.path, exc.field, exc.detail, root.source))
                continue
            first = found.get(skill.name)
            if first is not None:
                detail = f"skill {skill.name!r} ignored: {first.folder} ({first.source}) has it"
                problems.append(SkillProblem(skill.skill_file, "name", detail, root.source))
                continue
            found[skill.name] = skill
    for problem in problems:
        log.warning("skill not loaded: %s", problem.line())
    return Catalog(tuple(sorted(found.values(), key=lambda s: s.name)), tuple(problems))


def _skill_folders(root: Path) -> list[Path]:
    """Sub-folders of ``root`` holding a ``SKILL.md`` (sorted; hidden ones skipped)."""
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []  # a folder that does not exist holds no skills
    return [
        entry
        for entry in entries
        if not entry.name.startswith(".") and entry.is_dir() and (entry / SKILL_FILE).exists()
    ]


class SkillLibrary:
    """The kernel's catalog: built on first use, rebuilt after ``invalidate``.

    ``roots`` is asked each time the catalog is built, so extensions wired
    since then bring their ``skills/`` folders.
    """

    def __init__(self, roots: Callable[[], Sequence[SkillRoot]]) -> None:
        self._roots = roots
        self._catalog: Catalog | None = None

    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = discover(self._roots())
        return self._catalog

    def invalidate(self) -> None:
        self._catalog = None
