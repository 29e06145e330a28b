"""Agent Skills (agentskills.io ``SKILL.md`` folders): read and checked, listed in the
orchestrator's stable prompt, loaded, read and run by the model through three
tools, their scripts confined (docs/skills.md, ADR 0058).

The door is lazy (PEP 562): ``main.py skills check`` reads and checks folders
without importing the SDK that the three tools are built on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.skills.catalog import (
        Catalog,
        SkillLibrary,
        SkillProblem,
        SkillRoot,
        discover,
        settings_roots,
    )
    from core.skills.errors import SkillError, SkillFileError, SkillScriptError
    from core.skills.files import list_files, read_text, resolve_inside
    from core.skills.format import SKILL_FILE, Skill, read_skill
    from core.skills.scripts import ScriptLimits, ScriptRun, run_script
    from core.skills.tools import SKILL_TOOL_NAMES, ActiveSkills, build_skill_tools

__all__ = [
    "SKILL_FILE",
    "SKILL_TOOL_NAMES",
    "ActiveSkills",
    "Catalog",
    "ScriptLimits",
    "ScriptRun",
    "Skill",
    "SkillError",
    "SkillFileError",
    "SkillLibrary",
    "SkillProblem",
    "SkillRoot",
    "SkillScriptError",
    "build_skill_tools",
    "discover",
    "list_files",
    "read_skill",
    "read_text",
    "resolve_inside",
    "run_script",
    "settings_roots",
]

_HOMES = {
    "Catalog": "catalog",
    "SkillLibrary": "catalog",
    "SkillProblem": "catalog",
    "SkillRoot": "catalog",
    "discover": "catalog",
    "settings_roots": "catalog",
    "SkillError": "errors",
    "SkillFileError": "errors",
    "SkillScriptError": "errors",
    "list_files": "files",
    "read_text": "files",
    "resolve_inside": "files",
    "SKILL_FILE": "format",
    "Skill": "format",
    "read_skill": "format",
    "ScriptLimits": "scripts",
    "ScriptRun": "scripts",
    "run_script": "scripts",
    "SKILL_TOOL_NAMES": "tools",
    "ActiveSkills": "tools",
    "build_skill_tools": "tools",
}

__getattr__, __dir__ = lazy_door(__name__, globals(), _HOMES, __all__)
