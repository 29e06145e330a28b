"""Errors of the skills package; each names the file and the field at fault."""

from __future__ import annotations

from pathlib import Path

from core.runtime.errors import HearthError

__all__ = ["SkillError", "SkillFileError", "SkillScriptError"]


class SkillError(HearthError):
    """A skill folder that is not a valid Agent Skill: ``path`` and ``field`` say where."""

    def __init__(self, path: Path, field: str | None, detail: str) -> None:
        where = f"{path}: {field}" if field else str(path)
        super().__init__(f"{where}: {detail}")
        self.path = path
        self.field = field
        self.detail = detail


class SkillFileError(HearthError):
    """A file a tool was asked for that the skill does not have, or may not give."""

    def __init__(self, skill: str, path: str, detail: str) -> None:
        super().__init__(f"skill {skill!r}: {path!r}: {detail}")
        self.skill = skill
        self.path = path
        self.detail = detail


class SkillScriptError(HearthError):
    """A script that cannot be run here (no confinement, or a file that is no script)."""

    def __init__(self, skill: str, script: str, detail: str) -> None:
        super().__init__(f"skill {skill!r}: script {script!r}: {detail}")
        self.skill = skill
        self.script = script
        self.detail = detail
