"""Files of one skill: a relative path resolved inside the skill's folder, never out.

A path is refused when it is absolute, holds ``..``, or resolves (after
following symlinks) outside the skill's folder — or outside ``scripts/`` for a
script. A symlink that stays inside the folder is followed; one that leads
out is refused like ``..``: the model reads what the skill ships, nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from core.skills.errors import SkillFileError
from core.skills.format import SKILL_FILE, Skill

__all__ = ["READ_MAX_CHARS", "list_files", "read_text", "resolve_inside"]

READ_MAX_CHARS = 100_000
LIST_MAX = 200


def resolve_inside(skill: Skill, relative: str, *, under: str | None = None) -> Path:
    """The real path of ``relative`` in ``skill`` (in its ``under`` sub-folder if given)."""
    text = relative.strip()
    if not text or "\x00" in text:
        raise SkillFileError(skill.name, relative, "not a file name")
    path = PurePosixPath(text)
    if path.is_absolute():
        raise SkillFileError(skill.name, relative, "must be relative to the skill's folder")
    if ".." in path.parts:
        raise SkillFileError(skill.name, relative, "'..' is not allowed")
    base = skill.folder.resolve()
    limit = base / under if under is not None else base
    if under is not None and path.parts and path.parts[0] != under:
        path = PurePosixPath(under) / path  # "run.py" means "scripts/run.py"
    resolved = (base / path).resolve()
    if not resolved.is_relative_to(limit):
        where = f"the skill's {under}/ folder" if under is not None else "the skill's folder"
        raise SkillFileError(skill.name, relative, f"leads outside {where} (a symlink?)")
    if not resolved.is_file():
        raise SkillFileError(skill.name, relative, "no such file in the skill")
    return resolved


def read_text(skill: Skill, relative: str, *, max_chars: int = READ_MAX_CHARS) -> str:
    """The file's text (cut at ``max_chars``, and said so); binary files are refused."""
    path = resolve_inside(skill, relative)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # the resolved path: no link left
        with os.fdopen(fd, "rb") as file:
            raw = file.read(max_chars * 4 + 4)
    except OSError as exc:
        raise SkillFileError(skill.name, relative, f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(raw) - 3:  # not just a character cut by the read's limit
            raise SkillFileError(
                skill.name, relative, "not a text file (an asset for scripts, not for reading)"
            ) from exc
        text = raw[: exc.start].decode("utf-8")
    if len(text) > max_chars:
        return f"{text[:max_chars]}\n[cut: the file is longer than {max_chars} characters]"
    return text


def list_files(skill: Skill) -> list[str]:
    """The skill's files besides ``SKILL.md``, relative and sorted (symlinked folders
    are not entered); at most ``LIST_MAX``."""
    base = skill.folder
    found: list[str] = []
    for directory, folders, files in os.walk(base):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in files:
            relative = Path(directory, name).relative_to(base).as_posix()
            if relative != SKILL_FILE and not name.startswith("."):
                found.append(relative)
    found.sort()
    return found[:LIST_MAX]
