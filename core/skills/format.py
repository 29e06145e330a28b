"""One skill folder read and checked against the Agent Skills specification
(agentskills.io): ``SKILL.md`` with YAML front matter and a Markdown body.

Front matter fields: ``name`` (1–64 characters: lowercase letters, digits and
single hyphens, not at either end; equal to the folder's name),
``description`` (1–1,024 characters), optional ``license``, ``compatibility``
(at most 500 characters), ``metadata`` (a map of strings to strings) and
``allowed-tools`` (tool names separated by spaces). Any other field is an
error, as in the specification's reference validator, so a misspelled key is
caught. Every error names the file and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.skills.errors import SkillError

__all__ = [
    "DESCRIPTION_MAX",
    "NAME_MAX",
    "SKILL_FILE",
    "Skill",
    "read_skill",
]

SKILL_FILE = "SKILL.md"
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
SKILL_FILE_MAX_BYTES = 1024 * 1024
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")


@dataclass(frozen=True, slots=True)
class Skill:
    """A valid skill: its front matter, its body and where it came from.

    ``source`` says who offers it: ``settings`` (a ``skills.paths`` folder) or
    ``extension:ID`` (that extension's ``skills/`` folder). ``allowed_tools``
    is ``None`` when the skill does not narrow the tools.
    """

    name: str
    description: str
    folder: Path
    source: str
    body: str
    license: str | None = None
    compatibility: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    allowed_tools: tuple[str, ...] | None = None

    @property
    def skill_file(self) -> Path:
        return self.folder / SKILL_FILE


def read_skill(folder: Path, source: str = "settings") -> Skill:
    """Read and check ``folder/SKILL.md``; raises ``SkillError`` naming file and field."""
    path = folder / SKILL_FILE
    if path.is_symlink() or not path.is_file():
        raise SkillError(path, None, "missing (a skill folder holds a regular SKILL.md file)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SkillError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    if len(raw) > SKILL_FILE_MAX_BYTES:
        raise SkillError(path, None, f"larger than {SKILL_FILE_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(path, None, f"not UTF-8 text (byte {exc.start})") from exc
    front, body = _split(path, text)
    fields = _fields(path, front)
    name = _name(path, fields.get("name"), folder.name)
    return Skill(
        name=name,
        description=_text(path, fields, "description", DESCRIPTION_MAX, required=True) or "",
        folder=folder,
        source=source,
        body=body.strip(),
        license=_text(path, fields, "license", None),
        compatibility=_text(path, fields, "compatibility", COMPATIBILITY_MAX),
        metadata=_metadata(path, fields.get("metadata")),
        allowed_tools=_allowed_tools(path, fields.get("allowed-tools")),
    )


def _split(path: Path, text: str) -> tuple[str, str]:
    """The front matter between the first two ``---`` lines, and the rest."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(path, None, "must start with YAML front matter between '---' lines")
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise SkillError(path, None, "the front matter has no closing '---' line")


def _fields(path: Path, front: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark is not None else ""
        raise SkillError(path, None, f"front matter is not valid YAML{at}") from exc
    if not isinstance(data, dict):
        raise SkillError(path, None, "front matter must be a mapping of fields")
    unknown = sorted(str(key) for key in data if key not in FIELDS)
    if unknown:
        raise SkillError(path, unknown[0], f"unknown field; the fields are {', '.join(FIELDS)}")
    return data


def _name(path: Path, value: Any, folder_name: str) -> str:
    if value is None:
        raise SkillError(path, "name", "missing")
    if not isinstance(value, str):
        raise SkillError(path, "name", f"must be a string, not {type(value).__name__}")
    if not 1 <= len(value) <= NAME_MAX:
        raise SkillError(path, "name", f"{value!r} must be 1 to {NAME_MAX} characters")
    if not NAME_PATTERN.match(value):
        raise SkillError(
            path,
            "name",
            f"{value!r}: only lowercase letters, digits and single hyphens, not at either end",
        )
    if value != folder_name:
        raise SkillError(path, "name", f"{value!r} must equal the folder's name {folder_name!r}")
    return value


def _text(
    path: Path, fields: dict[str, Any], key: str, limit: int | None, *, required: bool = False
) -> str | None:
    value = fields.get(key)
    if value is None:
        if required:
            raise SkillError(path, key, "missing")
        return None
    if not isinstance(value, str):
        raise SkillError(path, key, f"must be a string, not {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise SkillError(path, key, "must not be empty")
    if limit is not None and len(value) > limit:
        raise SkillError(path, key, f"{len(value)} characters; at most {limit}")
    return value


def _metadata(path: Path, value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise SkillError(path, "metadata", "must be a mapping of strings to strings")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise SkillError(path, f"metadata.{key}", "keys and values must be strings")
    return tuple(sorted(value.items()))


def _allowed_tools(path: Path, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SkillError(path, "allowed-tools", "must be tool names separated by spaces")
    return tuple(value.split())
