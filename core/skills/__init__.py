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
        Catalog as Catalog,
        SkillLibrary as SkillLibrary,
        SkillProblem as SkillProblem,
        SkillRoot as SkillRoot,
        discover as discover,
        settings_roots as settings_roots,
    )
    from core.skills.errors import (
        SkillError as SkillError,
        SkillFileError as SkillFileError,
        SkillScriptError as SkillScriptError,
    )
    from core.skills.files import (
        list_files as list_files,
        read_text as read_text,
        resolve_inside as resolve_inside,
    )
    from core.skills.format import (
        SKILL_FILE as SKILL_FILE,
        Skill as Skill,
        read_skill as read_skill,
    )
    from core.skills.scripts import (
        ScriptLimits as ScriptLimits,
        ScriptRun as ScriptRun,
        run_script as run_script,
    )
    from core.skills.tools import (
        SKILL_TOOL_NAMES as SKILL_TOOL_NAMES,
        ActiveSkills as ActiveSkills,
        build_skill_tools as build_skill_tools,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
