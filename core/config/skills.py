"""The ``skills`` section of ``settings.yaml``: where Agent Skills are found and
what their scripts may use (docs/skills.md, ADR 0058).

A skill is a folder holding ``SKILL.md`` (agentskills.io). Its scripts run
confined like an isolated extension; these limits are the skill's, not the
plugin hosts' (``isolation``), because a script is one short run, not a
long-lived process.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SkillsSettings"]


class SkillsSettings(BaseModel):
    """``skills.*``: folders of skills, and the limits of one script run."""

    model_config = ConfigDict(extra="forbid")

    # folders whose sub-folders are skills; relative paths from the project root,
    # ``~`` expanded; earlier folders win a name that two of them hold
    paths: list[Path] = Field(
        default_factory=lambda: [Path("skills"), Path("~/.config/hearth/skills")]
    )
    network: list[str] = Field(default_factory=list)  # skills whose scripts may use the network
    timeout_s: float = Field(default=60.0, gt=0)  # one script run, wall clock
    memory_mb: int = Field(default=512, ge=16)  # address space of one script run
    tmp_mb: int = Field(default=64, ge=1)  # its writable scratch directory and /tmp
    output_max_chars: int = Field(default=20_000, ge=100)  # stdout + stderr the model reads
