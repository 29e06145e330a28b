"""The kernel's skills: the catalog from ``skills.paths`` and the live extensions'
``skills/`` folders, the model's skill tools, the allowed-tools scope around
the orchestrator's tools, and ``/skills`` (docs/skills.md, ADR 0058).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from agents import FunctionTool

from core.config import PROJECT_ROOT, Settings
from core.extensions.contract import Command, TurnContext
from core.skills import (
    ActiveSkills,
    Catalog,
    ScriptLimits,
    SkillLibrary,
    SkillRoot,
    build_skill_tools,
    settings_roots,
)

__all__ = ["SCRATCH_DIR", "KernelSkills", "describe_catalog"]

SCRATCH_DIR = "skill-runs"  # under the data directory: one scratch folder per script run


class KernelSkills:
    """Skills of one kernel; ``extension_dirs`` gives ``(extension id, its folder)`` of
    every live extension, asked each time the catalog is rebuilt."""

    def __init__(
        self,
        settings: Settings,
        extension_dirs: Callable[[], Iterable[tuple[str, Path]]],
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._settings = settings.skills
        self._on_change = on_change
        self._extension_dirs = extension_dirs
        self.library = SkillLibrary(self.roots)
        self.active = ActiveSkills()
        iso = settings.isolation
        self._limits = ScriptLimits(
            timeout_s=self._settings.timeout_s,
            memory_mb=self._settings.memory_mb,
            tmp_mb=self._settings.tmp_mb,
            output_max_chars=self._settings.output_max_chars,
            confinement=iso.confinement,
            cgroups=iso.cgroups,
        )
        self._scratch = settings.data_dir / SCRATCH_DIR

    def roots(self) -> list[SkillRoot]:
        """``skills.paths`` in order, then each live extension's ``skills/`` by id."""
        roots = settings_roots(self._settings.paths, PROJECT_ROOT)
        for ext_id, ext_dir in sorted(self._extension_dirs()):
            roots.append(SkillRoot(ext_dir / "skills", f"extension:{ext_id}"))
        return roots

    def catalog(self) -> Catalog:
        return self.library.catalog()

    def invalidate(self) -> None:
        self.library.invalidate()

    def refresh(self) -> Catalog:
        """Read the folders again; when the skills changed, what was built from them
        (the orchestrator's prompt and tools) is rebuilt on next use."""
        before = self.catalog()
        self.invalidate()
        after = self.catalog()
        if after.prompt_text() != before.prompt_text():
            self._on_change()
        return after

    def prompt_text(self) -> str:
        return self.catalog().prompt_text()

    def tools(self) -> list[FunctionTool]:
        """The skill tools, only when there is a skill to use them on."""
        if not self.catalog().skills:
            return []
        allowed = set(self._settings.network)
        return build_skill_tools(
            self.catalog,
            self.active,
            limits=self._limits,
            network=lambda name: name in allowed,
            scratch_root=self._scratch,
        )

    def command(self) -> Command:
        async def skills(args: str, turn: TurnContext) -> str:
            return describe_catalog(self.refresh())  # the user may have just added one

        return Command("skills", "list the skills the assistant can load, and any errors", skills)


def describe_catalog(catalog: Catalog) -> str:
    """``/skills`` and ``main.py skills``: one line per skill, then the problems."""
    lines = [f"{s.name} ({s.source}): {' '.join(s.description.split())}" for s in catalog.skills]
    if not lines:
        lines.append("No skills (add folders with SKILL.md under skills.paths; docs/skills.md).")
    lines += [f"not loaded: {problem.line()}" for problem in catalog.problems]
    return "\n".join(lines)
