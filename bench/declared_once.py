"""How many files a new hook point and a new guarded context method touch (issue 42).

A declaration said once is cheap to extend: this script proves it by doing
it. It copies ``core/`` and ``docs/`` to a temporary directory and, in one
copy, adds a hook point (``AnswerShownHook.on_answer_shown``, told the shown
answer); in another, a context method guarded by a new permission
(``forecast``, needing ``permissions.weather``). Each change is written the
way a contributor would write it (``HOOK_POINT`` and ``CONTEXT_METHOD``
below: anchored text insertions), then the docs' tables are regenerated
(``python -m core.extensions.loading.docs_tables``) and every file of the
copy is compared with the original: the count is of files that differ, not
of a list kept by hand. A subprocess on the copy then checks that what is
derived picked the change up — the capability, its permission, the isolated
proxy and wire codec, the contract's exports and a real call through the
turn's hook runner; the manifest field, the grant's words (and an unchanged
digest for manifests that do not ask), the kernel context's refusal and
answer, the isolated client's forwarding method, and the docs tables.

Prints one JSON object: per change, the files touched, their number, the
budget (3 and 4, issue 42) and the count before ADR 0084 (listed in
``BEFORE``: the places main asked to be edited then). ``--check`` exits 1
when a count is over its budget or a check failed.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("core", "docs")
REGENERATE = [sys.executable, "-m", "core.extensions.loading.docs_tables"]


@dataclass(frozen=True, slots=True)
class Insert:
    """``text`` inserted into ``path`` just before the first ``before`` (or at the end)."""

    path: str
    text: str
    before: str | None = None

    def apply(self, root: Path) -> None:
        target = root / self.path
        source = target.read_text(encoding="utf-8")
        if self.before is None:
            target.write_text(source + self.text, encoding="utf-8")
            return
        where = source.find(self.before)
        if where < 0:
            raise SystemExit(
                f"{self.path}: anchor {self.before!r} not found; update bench/declared_once.py"
            )
        target.write_text(source[:where] + self.text + source[where:], encoding="utf-8")


HOOK_POINT = (
    Insert(
        "core/extensions/contract/hooks.py",
        '''

@hook_point("on_answer_shown", ("turn", "text"), when="the answer was rendered")
@runtime_checkable
class AnswerShownHook(Protocol):
    """Observes the answer as the user will see it."""

    async def on_answer_shown(self, turn: TurnContext, text: str) -> None: ...
''',
    ),
    Insert(
        "core/extensions/contract/hooks.py",
        '    "AnswerShownHook",\n',
        '    "BeforeToolCallHook",\n',
    ),
    Insert(
        "core/kernel/hooks/pipeline.py",
        """        for entry in self.registry.at(_ANSWER_SHOWN):
            shown = entry.target.on_answer_shown(turn, output)
            await self.caller.call(entry, "on_answer_shown", turn, shown)
""",
        "        return RenderedOutput(output, annotations)",
    ),
    Insert("core/kernel/hooks/pipeline.py", "    AnswerShownHook,\n", "    ModelRoute,\n"),
    Insert(
        "core/kernel/hooks/pipeline.py",
        "_ANSWER_SHOWN = hook_capability(AnswerShownHook)\n",
        "_TURN_START = hook_capability(TurnStartHook)\n",
    ),
)

CONTEXT_METHOD = (
    Insert(
        "core/extensions/contract/context.py",
        '''    @needs(
        Permission("weather", "reads the weather for your town", "the forecast service"),
        "read the forecast",
    )
    async def forecast(self, town: str) -> str:
        """Tomorrow's weather in ``town`` (needs ``permissions.weather``)."""
        ...

''',
        '    @needs(CONTROL, "restart Hearth")\n',
    ),
    Insert(
        "core/extensions/context/kernel_context.py",
        """    async def forecast(self, town: str) -> str:
        self._allow("forecast")
        return f"sunny in {town}"

""",
        "    def request_restart(self) -> None:\n",
    ),
    Insert(
        "core/extensions/sdk/testing.py",
        """    async def forecast(self, town: str) -> str:
        return f"sunny in {town}"

""",
        "    def request_restart(self) -> None:\n",
    ),
)

# the places each change had to be written before ADR 0084 (main at a8aa7fc)
BEFORE = {
    "hook_point": [
        "core/extensions/contract/hooks.py",  # the protocol
        "core/extensions/contract/hook_specs.py",  # its row
        "core/extensions/contract/__init__.py",  # the re-export, twice
        "core/extensions/loading/capabilities.py",  # the Capability member
        "core/kernel/hooks/pipeline.py",  # the kernel code that calls it
        "docs/hooks.md",  # the table's row, by hand
    ],
    "context_method": [
        "core/extensions/contract/context.py",  # the method
        "core/extensions/context/kernel_context.py",  # its implementation and check
        "core/extensions/sdk/testing.py",  # FakeContext (a test compares members)
        "core/extensions/loading/manifest.py",  # Permissions + ResolvedPermissions + resolved()
        "core/extensions/access/grants.py",  # the grant's words and digest
        "docs/isolation.md",  # the permissions table's row, by hand
    ],
}
BUDGETS = {"hook_point": 3, "context_method": 4}

CHECK_HOOK_POINT = """
import asyncio
from pathlib import Path
from core.extensions.contract import AnswerShownHook, HOOK_SPECS, TurnContext
from core.extensions.isolation.kernel.hook_mixins import HOOK_MIXINS
from core.extensions.isolation.protocol.hook_wire import HOOK_METHODS, hook_args_to_wire
from core.extensions.loading.capabilities import HOOKS, PERMISSIONS, Capability, detect_capabilities
from core.extensions.loading.docs_tables import stale
from core.extensions.loading.records import ExtensionRecord
from core.kernel.hooks.calls import HookCaller
from core.kernel.hooks.frames import FrameRecorder
from core.kernel.hooks.pipeline import TurnHooks
from core.kernel.hooks.registry import HookRegistry

class Watcher:
    seen = []
    async def initialize(self, context): ...
    async def start(self): ...
    async def stop(self): ...
    async def destroy(self): ...
    def health_check(self): return True
    async def on_answer_shown(self, turn, text): self.seen.append(text)

class Sink:
    async def publish(self, *args, **kwargs): return 0

capability = Capability.ANSWER_SHOWN
assert capability.value == "AnswerShownHook" and capability in HOOKS
assert PERMISSIONS[capability] == "conversations"
assert HOOK_SPECS[-1].protocol is AnswerShownHook and "on_answer_shown" in HOOK_METHODS
assert hasattr(HOOK_MIXINS["AnswerShownHook"], "on_answer_shown")
turn = TurnContext(channel_id="c", user_id="u", session_id="s", turn_id="t")
assert hook_args_to_wire("on_answer_shown", (turn, "hi"))
watcher = Watcher()
record = ExtensionRecord("watcher", Path("."), instance=watcher, capabilities=detect_capabilities(watcher))
assert capability in record.capabilities, record.capabilities
hooks = TurnHooks(HookRegistry(lambda: [record]), HookCaller(2.0), FrameRecorder(Sink()))
asyncio.run(hooks.render_output("the answer", turn))
assert watcher.seen == ["the answer"], watcher.seen
assert stale() == [], stale()
assert "`on_answer_shown(turn, text)` | the answer was rendered" in Path("docs/hooks.md").read_text()
print("ok")
"""

# the grant digest of a manifest that asks for nothing: the copy's must equal the original's
DIGEST = """
from core.extensions.access.grants import GrantRequest
from core.extensions.loading.manifest import Manifest
manifest = Manifest(id="w", name="W", entrypoint="main:E")
print(GrantRequest.from_manifest(manifest, default_isolation="process", code="").digest)
"""

CHECK_CONTEXT_METHOD = """
import asyncio, sys
from pathlib import Path
from core.config import Settings
from core.extensions.access.grants import GrantRequest
from core.extensions.context.kernel_context import KernelContext
from core.extensions.context.services import KernelServices
from core.extensions.errors import PermissionDeniedError
from core.extensions.isolation.host.client_context import ClientContext
from core.extensions.isolation.protocol.context_calls import CONTEXT_CALLS
from core.extensions.loading.docs_tables import stale
from core.extensions.loading.manifest import Manifest

def manifest(**permissions):
    return Manifest(id="w", name="W", entrypoint="main:E", permissions=permissions)

def context(m):
    services = KernelServices(
        settings=Settings(), bus=None, get_instance=lambda _: None,
        request_restart=lambda _: None, request_shutdown=lambda: None, secrets={}, state=None,
    )
    return KernelContext(m, Path(sys.argv[1]), services)

asking = GrantRequest.from_manifest(manifest(weather=True), default_isolation="process", code="")
assert "reads the weather for your town" in asking.describe(), asking.describe()
try:
    asyncio.run(context(manifest()).forecast("Oslo"))
    raise AssertionError("not refused")
except PermissionDeniedError as exc:
    assert "read the forecast (declare `permissions.weather: true`" in str(exc), exc
assert asyncio.run(context(manifest(weather=True)).forecast("Oslo")) == "sunny in Oslo"
assert "ctx.forecast" in CONTEXT_CALLS and "forecast" in vars(ClientContext)
assert stale() == [], stale()
assert "| `weather` | `forecast` (the forecast service) | `false` | `false` |" in Path("docs/isolation.md").read_text()
print(GrantRequest.from_manifest(manifest(), default_isolation="process", code="").digest)
"""


def _touched(original: Path, copy: Path) -> list[str]:
    """Files under ``COPIED`` whose bytes differ between the two trees (or exist in one)."""
    touched = []
    for top in COPIED:
        names = {p.relative_to(original) for p in (original / top).rglob("*") if p.is_file()}
        names |= {p.relative_to(copy) for p in (copy / top).rglob("*") if p.is_file()}
        for name in sorted(names):
            if "__pycache__" in name.parts:
                continue
            a, b = original / name, copy / name
            if not (a.is_file() and b.is_file() and filecmp.cmp(a, b, shallow=False)):
                touched.append(str(name))
    return touched


def _run(copy: Path, *argv: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed in the copy:\n{done.stderr[-3000:]}")
    return done.stdout


def prove(change: str, edits: tuple[Insert, ...], check: str, work: Path) -> dict[str, Any]:
    """Apply ``edits`` to a fresh copy, regenerate the docs, count, then run ``check``."""
    copy = work / change
    for top in COPIED:
        shutil.copytree(ROOT / top, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
    for edit in edits:
        edit.apply(copy)
    _run(copy, *REGENERATE)
    touched = _touched(ROOT, copy)
    out = _run(copy, sys.executable, "-c", check, str(work))
    report: dict[str, Any] = {
        "files": touched,
        "count": len(touched),
        "budget": BUDGETS[change],
        "before": len(BEFORE[change]),
        "before_files": BEFORE[change],
        "check_output": out.strip(),
    }
    if change == "context_method":  # a manifest that does not ask keeps its grant's digest
        report["digest_unchanged"] = out.strip() == _run(ROOT, sys.executable, "-c", DIGEST).strip()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a count is over budget")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hearth-declared-") as tmp:
        work = Path(tmp)
        report = {
            "hook_point": prove("hook_point", HOOK_POINT, CHECK_HOOK_POINT, work),
            "context_method": prove("context_method", CONTEXT_METHOD, CHECK_CONTEXT_METHOD, work),
        }
    print(json.dumps(report, indent=2))
    failed = [n for n, r in report.items() if r["count"] > r["budget"]]
    failed += [n for n, r in report.items() if r.get("digest_unchanged") is False]
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
