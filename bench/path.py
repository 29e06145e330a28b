"""The path of one message with one tool call through Hearth (issue 27).

How much of the kernel one ordinary turn walks through is a measure of how
well its structure shows its design: a turn that crosses fourteen packages
to answer "what time is it?" is hard to read and hard to keep fast. This
script runs a kernel in process with a scripted model, warms it with one
turn, then profiles a second message whose answer makes one tool call, and
prints one JSON object:

- ``functions`` / ``modules`` / ``packages``: distinct Hearth functions
  (``core/`` and ``sandbox/extensions/``) called during that turn, the
  modules and the packages (directories) they live in;
- ``crossings``: distinct caller → callee pairs of Hearth functions whose
  packages differ (the nearest Hearth frame up the stack is the caller, so
  a call that goes through the SDK and back still counts once);
- ``top_packages``: functions per package, most first.

``--off`` runs the turn with the optional features off (``replay.record:
false``, ``policy.profile: full_auto``): what they cost when off is what
they add to the path; ``--both`` runs the defaults, then ``--off``, each in a
fresh kernel. ``--check budgets.json`` fails when a count is over
its budget (``path`` in ``bench/budgets.json``; deterministic counts).

Only the event loop's thread is profiled (the SQLite worker threads run
library code). Numbers compare between commits of the same machine only
through their ratios; they do not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

# a harmless tool (no side effects): the turn runs it without an approval question
TOOL_BODY = """
    def get_tools(self):
        @function_tool
        def clock() -> str:
            "Tell the time."
            return "12:00"

        return [side_effects(clock, False)]
"""
TOOL_HEADER = """
    from agents import function_tool

    from core.extensions.sdk import side_effects
"""


# the optional features off: what they cost then is what they add to the path
OFF: dict[str, Any] = {"replay": {"record": False}, "policy": {"profile": "full_auto"}}


def _project_file(filename: str) -> str | None:
    """The file's path relative to the project when it is Hearth's own code."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return str(rel) if rel.parts[0] in ("core", "sandbox") else None


def _extension_file(filename: str) -> str | None:
    """Extensions are imported under a private package name; map them back."""
    marker = "/sandbox/extensions/"
    return filename[filename.index(marker) + 1 :] if marker in filename else None


class PathRecorder:
    """A ``sys.setprofile`` hook collecting Hearth's functions and crossings."""

    def __init__(self, ext_root: Path) -> None:
        self.ext_root = str(ext_root)
        self.functions: set[tuple[str, str]] = set()
        self.crossings: set[tuple[tuple[str, str], tuple[str, str]]] = set()
        self._names: dict[str, str | None] = {}

    def _name(self, filename: str) -> str | None:
        if filename not in self._names:
            name = _project_file(filename) or _extension_file(filename)
            if name is None and filename.startswith(self.ext_root):
                name = "sandbox/extensions/" + filename[len(self.ext_root) + 1 :]
            self._names[filename] = name
        return self._names[filename]

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee_file = self._name(frame.f_code.co_filename)
        if callee_file is None:
            return
        callee = (callee_file, frame.f_code.co_qualname)
        self.functions.add(callee)
        caller_frame = frame.f_back
        depth = 0
        while caller_frame is not None and depth < 40:
            caller_file = self._name(caller_frame.f_code.co_filename)
            if caller_file is not None:
                if package(caller_file) != package(callee_file):
                    self.crossings.add(((caller_file, caller_frame.f_code.co_qualname), callee))
                return
            caller_frame = caller_frame.f_back
            depth += 1


def package(module_file: str) -> str:
    """``core/kernel/hooks/pipeline.py`` → ``core/kernel/hooks``; an extension is one package."""
    parts = Path(module_file).parts
    if parts[:2] == ("sandbox", "extensions"):
        return "/".join(parts[:3])
    return "/".join(parts[:-1])


async def trace_turn(tmp: Path, *, off: bool = False) -> PathRecorder:
    import yaml
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from support.ext_files import ext_code, grant_all
    from support.harness import CAPTURE_CHANNEL, running_kernel

    ext = tmp / "ext"
    for name, code, manifest in (
        ("capture", CAPTURE_CHANNEL, "permissions: {user_messages: true}\n"),
        ("clock", ext_code(TOOL_BODY, TOOL_HEADER), ""),
    ):
        (ext / name).mkdir(parents=True)
        (ext / name / "main.py").write_text(code)
        (ext / name / "manifest.yaml").write_text(
            f"id: {name}\nname: {name}\nentrypoint: main:Ext\n{manifest}"
        )
    grant_all(ext, tmp / "data")
    settings = tmp / "settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "paths": {"extensions": str(ext), "data": str(tmp / "data")},
                "isolation": {
                    "default": "inprocess"
                },  # its extensions run in the kernel (ADR 0086)
                "channels": {"default": "capture"},
                "logging": {"level": "WARNING"},
                **(OFF if off else {}),
            }
        )
    )
    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message("hello")]),
            ModelStep(output=[function_call("clock", {}, call_id="c1")]),
            ModelStep(output=[assistant_message("it is 12:00")]),
        ]
    )
    recorder = PathRecorder(ext)
    async with running_kernel(settings, model=model) as kernel:
        channel = kernel.loader.instance("capture")
        delivered = asyncio.Event()

        async def send_to_user(user_id: str, message: str) -> None:
            delivered.set()

        channel.send_to_user = send_to_user
        await channel.say("hi")  # warm-up: first-turn costs are not the path
        await asyncio.wait_for(delivered.wait(), timeout=30)
        delivered.clear()
        await _tail()  # nor is the warm-up's own tail (its record, its end's hooks)
        sys.setprofile(recorder)
        try:
            await channel.say("what time is it?")
            await asyncio.wait_for(delivered.wait(), timeout=30)
            await _tail()  # the turn's own tail (history, records): after delivery
        finally:
            sys.setprofile(None)
    return recorder


async def _tail() -> None:
    """Let a turn's tail (what it does after its reply is delivered) finish."""
    for _ in range(50):
        await asyncio.sleep(0.002)


def measure(*, off: bool) -> dict[str, Any]:
    """The path of one turn in a fresh kernel: the counts the module docstring names."""
    with tempfile.TemporaryDirectory(prefix="hearth-path-") as tmp:
        recorder = asyncio.run(trace_turn(Path(tmp), off=off))
    modules = {f for f, _ in recorder.functions}
    per_package = collections.Counter(package(f) for f, _ in recorder.functions)
    return {
        "config": "off" if off else "defaults",
        "functions": len(recorder.functions),
        "modules": len(modules),
        "packages": len(per_package),
        "crossings": len(recorder.crossings),
        "top_packages": dict(per_package.most_common(8)),
        "cores": os.cpu_count(),
    }


def over_budget(result: dict[str, Any], budgets: dict[str, Any]) -> list[str]:
    """Each count over its budget (``<config>_functions``, ``crossings``), as a sentence."""
    limits = {
        "functions": budgets.get(f"{result['config']}_functions"),
        "crossings": budgets.get("crossings"),
    }
    return [
        f"path ({result['config']}): {name} {result[name]} > budget {limit}"
        for name, limit in limits.items()
        if limit is not None and result[name] > limit
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--off", action="store_true", help="replay off and policy full_auto")
    parser.add_argument("--both", action="store_true", help="defaults, then --off")
    parser.add_argument("--check", type=Path, help="budgets.json: fail on a count over budget")
    args = parser.parse_args()
    configs = [False, True] if args.both else [args.off]
    budgets = json.loads(args.check.read_text())["path"] if args.check else {}
    problems: list[str] = []
    for off in configs:
        result = measure(off=off)
        print(json.dumps(result))
        problems += over_budget(result, budgets)
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
