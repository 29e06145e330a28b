"""Helpers for tests of the bundled extensions (``sandbox/extensions/<id>``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agents.testing import ScriptedModel

from conftest import PROJECT_ROOT

BUNDLED = PROJECT_ROOT / "sandbox" / "extensions"


def copy_bundled(ext_root: Path, *ext_ids: str) -> None:
    """Copy bundled extension directories into a test's ``paths.extensions``."""
    for ext_id in ext_ids:
        shutil.copytree(
            BUNDLED / ext_id, ext_root / ext_id, ignore=shutil.ignore_patterns("__pycache__")
        )


def tool_output(model: ScriptedModel, call_id: str) -> str:
    """What the model was shown as the result of tool call ``call_id``."""
    for call in model.calls:
        for item in call.input if isinstance(call.input, list) else []:
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                output: Any = item["output"]
                return output if isinstance(output, str) else str(output)
    raise AssertionError(f"no output for tool call {call_id!r} reached the model")
