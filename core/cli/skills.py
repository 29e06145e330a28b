"""``main.py skills [--json]`` and ``main.py skills check PATH`` (docs/skills.md).

``skills`` loads the extensions (initialized, not started, against a
throw-away journal, like ``main.py extensions``) so their ``skills/`` folders
count, then lists every skill folder: name, source, description, or the
error that kept it out. ``skills check PATH`` validates one skill folder, or
every skill folder in a folder of them, without loading anything else; it
exits 1 when one is invalid, 2 when PATH holds no skill.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from core.config import Settings
from core.skills import SKILL_FILE, Catalog, SkillRoot, discover

__all__ = ["catalog_rows", "run_skills_check", "run_skills_list"]


def run_skills_list(settings: Settings, *, as_json: bool) -> int:
    from core.kernel.skills import describe_catalog

    catalog = asyncio.run(_catalog(settings))
    print(json.dumps(catalog_rows(catalog), indent=2) if as_json else describe_catalog(catalog))
    return 0


def run_skills_check(path: str) -> int:
    folder = Path(path).expanduser().resolve()
    if (folder / SKILL_FILE).exists():
        catalog = discover([SkillRoot(folder.parent)])
        catalog = Catalog(
            tuple(s for s in catalog.skills if s.folder == folder),
            tuple(p for p in catalog.problems if p.path.parent == folder),
        )
    else:
        catalog = discover([SkillRoot(folder)])
    if not catalog.skills and not catalog.problems:
        print(f"{folder}: no {SKILL_FILE} here or in its sub-folders")
        return 2
    for skill in catalog.skills:
        print(f"ok: {skill.name} ({skill.folder})")
    for problem in catalog.problems:
        print(f"error: {problem.line()}")
    return 1 if catalog.problems else 0


def catalog_rows(catalog: Catalog) -> list[dict[str, Any]]:
    """One object per skill folder: the loaded ones, then the ones kept out (``error``)."""
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "source": s.source,
            "path": str(s.folder),
            "description": s.description,
            "allowed_tools": list(s.allowed_tools) if s.allowed_tools is not None else None,
            "error": None,
        }
        for s in catalog.skills
    ]
    rows += [
        {
            "name": p.path.parent.name,
            "source": p.source,
            "path": str(p.path.parent),
            "description": None,
            "allowed_tools": None,
            "error": p.line(),
        }
        for p in catalog.problems
    ]
    return rows


async def _catalog(settings: Settings) -> Catalog:
    """The kernel's catalog: extensions loaded (their ``skills/`` count), not started."""
    from core.kernel.runner import kernel_apart  # heavy: only the listing needs it, not ``check``
    from core.kernel.skills import KernelSkills

    async with kernel_apart(settings, "skills") as kernel:
        await kernel.load()
        live = [(r.ext_id, r.code_dir or r.ext_dir) for r in kernel.loader.active()]
        return KernelSkills(settings, lambda: live).catalog()
