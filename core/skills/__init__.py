"""Agent Skills (agentskills.io ``SKILL.md`` folders): read and checked, listed in the
orchestrator's stable prompt, loaded, read and run by the model through three
tools, their scripts confined (docs/skills.md, ADR 0058).
"""

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
