"""The model's three skill tools, and the narrowing of tools while a skill is active.

``load_skill(name)`` returns the skill's body (it stays in the history, not in
the system prompt), ``read_skill_file(name, path)`` one file of its folder,
``run_skill_script(name, script, args)`` runs one of its scripts, confined
(``scripts.py``). The first two only read, so they run without a question;
a script has side effects by definition, so under ``policy.profile: safe``
the user is asked first, through the kernel's consent gate like any tool.

A skill whose front matter has ``allowed-tools`` narrows what the model may
call while it is *active*: from the ``load_skill`` call that returned it to
the end of that turn (ADR 0058). Then only the tools it names (exact names or
``fnmatch`` patterns such as ``kv_*``) and the skill tools themselves run;
any other call is refused with a message the model reads. Two active skills
narrow to what both allow. The narrowing never widens anything: an allowed
tool still passes every hook and the consent gate.
"""

from __future__ import annotations

import copy
import fnmatch
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import FunctionTool, RunContextWrapper, Tool, function_tool
from agents.tool_context import ToolContext

from core.extensions.contract import TurnContext
from core.extensions.sdk import side_effects
from core.runtime.errors import HearthError
from core.skills.catalog import Catalog
from core.skills.files import list_files, read_text
from core.skills.scripts import ScriptLimits, run_script

__all__ = ["SKILL_TOOL_NAMES", "ActiveSkills", "build_skill_tools"]

SKILL_TOOL_NAMES = ("load_skill", "read_skill_file", "run_skill_script")
_MARK = "__hearth_skill_scope__"
_TURNS_KEPT = 512


class ActiveSkills:
    """Which skills each turn has loaded, and the tool narrowing that follows."""

    def __init__(self) -> None:
        self._turns: OrderedDict[str, dict[str, tuple[str, ...]]] = OrderedDict()

    def activate(self, turn_id: str | None, name: str, allowed: tuple[str, ...] | None) -> None:
        """``name`` is active for the rest of turn ``turn_id`` (``None``: no turn to hold it)."""
        if turn_id is None or allowed is None:
            return
        skills = self._turns.setdefault(turn_id, {})
        skills[name] = allowed
        self._turns.move_to_end(turn_id)
        while len(self._turns) > _TURNS_KEPT:  # turns long over are forgotten
            self._turns.popitem(last=False)

    def refusal(self, turn_id: str | None, tool: str) -> str | None:
        """Why ``tool`` may not run in this turn, or ``None`` when it may."""
        if turn_id is None or tool in SKILL_TOOL_NAMES:
            return None
        for skill, allowed in sorted(self._turns.get(turn_id, {}).items()):
            if not any(fnmatch.fnmatchcase(tool, pattern) for pattern in allowed):
                names = " ".join(allowed) or "(none)"
                return (
                    f"error: {tool} is not allowed while skill {skill} is active "
                    f"(its allowed-tools: {names}); it was not run"
                )
        return None

    def scopes(self, tool: FunctionTool) -> bool:
        """Whether ``tool`` already checks the narrowing (``wrap`` returns it as it is)."""
        return bool(getattr(tool.on_invoke_tool, _MARK, False))

    def wrap(self, tool: Tool) -> Tool:
        """A copy of ``tool`` that checks the narrowing first; idempotent."""
        if not isinstance(tool, FunctionTool) or self.scopes(tool):
            return tool
        scoped = copy.copy(tool)
        invoke = tool.on_invoke_tool
        name = tool.name

        async def on_invoke(ctx: ToolContext[Any], raw: str) -> Any:
            refusal = self.refusal(_turn_id(ctx), name)
            return refusal if refusal is not None else await invoke(ctx, raw)

        asks = tool.needs_approval

        async def needs_approval(
            ctx: RunContextWrapper[Any], params: dict[str, Any], call: str
        ) -> bool:
            if self.refusal(_turn_id(ctx), name) is not None:
                return False  # refused without asking the user about it
            return asks if isinstance(asks, bool) else await asks(ctx, params, call)

        setattr(on_invoke, _MARK, True)
        scoped.on_invoke_tool = on_invoke
        scoped.needs_approval = needs_approval
        return scoped


def build_skill_tools(
    catalog: Callable[[], Catalog],
    active: ActiveSkills,
    *,
    limits: ScriptLimits,
    network: Callable[[str], bool],
    scratch_root: Path,
) -> list[FunctionTool]:
    """``load_skill``, ``read_skill_file`` (no side effects) and ``run_skill_script``."""

    async def load_skill(ctx: RunContextWrapper[Any], name: str) -> str:
        """Load a skill's instructions before following it (the skills are listed in the
        system prompt). Returns its instructions and the files it has.

        Args:
            name: The skill's name, as listed.
        """
        skill = catalog().get(name)
        if skill is None:
            return _unknown(name, catalog())
        active.activate(_turn_id(ctx), skill.name, skill.allowed_tools)
        parts = [f"Skill {skill.name} ({skill.source}):", skill.body or "(no instructions)"]
        files = list_files(skill)
        if files:
            parts.append(
                "Files of this skill (read_skill_file to read one, run_skill_script to run "
                f"one of scripts/): {', '.join(files)}"
            )
        if skill.allowed_tools is not None:
            names = " ".join(skill.allowed_tools) or "(none)"
            parts.append(
                f"While this skill is active (the rest of this turn) only these tools run: "
                f"{names}, and the skill tools."
            )
        return "\n\n".join(parts)

    async def read_skill_file(ctx: RunContextWrapper[Any], name: str, path: str) -> str:
        """Read one file of a skill, e.g. references/guide.md.

        Args:
            name: The skill's name.
            path: The file's path relative to the skill's folder.
        """
        skill = catalog().get(name)
        if skill is None:
            return _unknown(name, catalog())
        try:
            return read_text(skill, path)
        except HearthError as exc:
            return f"error: {exc}"

    async def run_skill_script(
        ctx: RunContextWrapper[Any], name: str, script: str, args: list[str]
    ) -> str:
        """Run a script from a skill's scripts/ folder, confined: no network unless the user
        allowed it, its own scratch directory, time and memory limits. The user is asked
        first. Returns the exit code and the output.

        Args:
            name: The skill's name.
            script: The script's path in the skill, e.g. scripts/convert.py.
            args: Command-line arguments for the script (may be empty).
        """
        skill = catalog().get(name)
        if skill is None:
            return _unknown(name, catalog())
        try:
            run = await run_script(
                skill,
                script,
                list(args),
                limits=limits,
                network=network(skill.name),
                scratch_root=scratch_root,
            )
        except HearthError as exc:
            return f"error: {exc}"
        return run.text()

    return [
        side_effects(function_tool(load_skill), False),
        side_effects(function_tool(read_skill_file), False),
        side_effects(function_tool(run_skill_script), True),
    ]


def _unknown(name: str, catalog: Catalog) -> str:
    names = ", ".join(catalog.names()) or "none"
    return f"error: there is no skill {name!r}; the skills are: {names}"


def _turn_id(ctx: RunContextWrapper[Any]) -> str | None:
    turn = getattr(ctx, "context", None)
    if not isinstance(turn, TurnContext):
        return None
    return turn.turn_id or turn.session_id
