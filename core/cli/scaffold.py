"""``main.py new-extension NAME [--tool] [--channel] [--isolated | --inprocess] [--wasm]``.

Writes ``<paths.extensions>/NAME/``: a manifest, ``main.py`` built on the
extension library (``BaseExtension``), and ``tests/test_NAME.py`` using the
fake kernel (``FakeContext``), which ``make test`` collects (``testpaths``
holds ``sandbox/extensions``). No flag means ``--tool``. The id follows the
manifest's rule and may not be a kernel name; an existing directory is
never touched. ``--wasm`` writes a WebAssembly tool instead (``scaffold_wasm``).
Whoever runs the command wrote the code, so the grant for
what the skeleton asks is recorded too (as ``main.py extensions grant``
would): the new extension loads ``active`` at once.

The skeleton runs isolated (``isolation: process``) unless ``--inprocess``
(ADR 0086): a tool skeleton then asks for nothing beyond an isolated
extension's defaults, so no grant binds its code and the author's loop —
edit, ``/reload NAME`` (or ``dev.watch``) — serves each edit at once. One that
asks for more (a channel speaks as the user) is granted here, and after an
edit the reload says which command grants the new code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.cli.scaffold_templates import (
    CHANNEL_METHODS,
    CHANNEL_TEST,
    CODE_HEAD,
    MANIFEST,
    TEST_HEAD,
    TOOL_METHODS,
    TOOL_TEST,
)
from core.cli.scaffold_wasm import wasm_files
from core.config import Settings
from core.extensions.access.grant_store import GrantStore
from core.extensions.access.grants import GrantRequest
from core.extensions.loading.code_digest import code_digest
from core.extensions.loading.manifest import EXTENSION_ID_RE, load_manifest
from core.runtime import RESERVED_IDS
from core.runtime.errors import HearthError

__all__ = ["ScaffoldError", "run_new_extension", "write_skeleton"]


class ScaffoldError(HearthError, ValueError):
    """The extension cannot be written there; the message names the id or path."""


def run_new_extension(settings: Settings, args: argparse.Namespace) -> int:
    try:
        ext_dir = write_skeleton(
            settings.extensions_dir,
            args.name,
            tool=args.tool or not args.channel,
            channel=args.channel,
            isolated=not args.inprocess,
            wasm=getattr(args, "wasm", False),
        )
        manifest = load_manifest(ext_dir)
        request = GrantRequest.from_manifest(
            manifest, default_isolation=settings.isolation.default, code=code_digest(ext_dir)
        )
        if request.needs_grant:
            GrantStore(settings.data_dir).record(request)
    except (ScaffoldError, OSError) as exc:
        print(f"hearth new-extension: {exc}", file=sys.stderr)
        return 2
    code = "guest.wat" if getattr(args, "wasm", False) else "main.py"
    print(f"wrote {ext_dir}/ (manifest.yaml, {code}, tests/test_{args.name}.py)")
    if request.needs_grant:
        print(f"granted {args.name}: " + "; ".join(request.describe()))
    print(f"next: make test  ·  .venv/bin/python main.py extensions  ·  edit {ext_dir / code}")
    print(_loop_hint(args.name, request.needs_grant))
    return 0


def _loop_hint(ext_id: str, granted: bool) -> str:
    """What serves an edit: a reload, and a grant first when it asks for more than
    an isolated extension's defaults (its grant binds its code, ADR 0044)."""
    if not granted:
        return (
            f"after an edit: `/reload {ext_id}` (or set dev.watch: true); it asks for nothing "
            "beyond the defaults, so no grant is needed"
        )
    return (
        f"after an edit: `python main.py extensions grant {ext_id} --yes`, then "
        f"`/reload {ext_id}` (its grant binds its code)"
    )


def write_skeleton(
    root: Path, ext_id: str, *, tool: bool, channel: bool, isolated: bool, wasm: bool = False
) -> Path:
    """Write the skeleton into ``root/ext_id``; ``ScaffoldError`` before anything
    is written when the id or the place is wrong."""
    if not EXTENSION_ID_RE.match(ext_id):
        raise ScaffoldError(
            f"{ext_id!r} is not a valid extension id: start with a letter, then letters, "
            "digits, - or _ (at most 64 characters)"
        )
    if ext_id.lower() in RESERVED_IDS:
        raise ScaffoldError(f"{ext_id!r} is reserved for the kernel; choose another name")
    ext_dir = root / ext_id
    if ext_dir.exists():
        raise ScaffoldError(f"{ext_dir} already exists; choose another name or remove it")
    files = _files(ext_id, tool=tool, channel=channel, isolated=isolated)
    if wasm:
        files = wasm_files(_names(ext_id, tool=True, channel=False))
    (ext_dir / "tests").mkdir(parents=True)
    for name, text in files.items():
        (ext_dir / name).write_text(text, encoding="utf-8")
    return ext_dir


def _names(ext_id: str, *, tool: bool, channel: bool) -> dict[str, str]:
    words = ext_id.replace("-", "_").split("_")
    return {
        "ext_id": ext_id,
        "title": " ".join(w.capitalize() for w in words if w),
        "class_name": "".join(w.capitalize() for w in words if w) + "Extension",
        "tool_name": f"{'_'.join(w for w in words if w)[:57]}_hello",
        "capabilities": " and ".join(
            kind for kind, wanted in (("a tool", tool), ("a channel", channel)) if wanted
        ),
    }


def _files(ext_id: str, *, tool: bool, channel: bool, isolated: bool) -> dict[str, str]:
    names = _names(ext_id, tool=tool, channel=channel)
    extra = []
    if tool:
        extra.append("side_effects: false   # its tools change nothing outside Hearth")
        extra.append("config:\n  greeting: Hello      # settings.yaml extensions.<id> overrides it")
    if isolated:
        extra.append("isolation: process    # sandboxed: its own plugin host (docs/isolation.md)")
    else:
        extra.append("isolation: inprocess  # inside the kernel: a grant after each edit")
    if channel:
        extra.append("permissions:\n  user_messages: true   # what users send is their message")
    imports = []
    if tool:
        imports.append("from agents import FunctionTool, function_tool\n")
    sdk = "BaseExtension, side_effects" if tool else "BaseExtension"
    imports.append(f"from core.extensions.sdk import {sdk}\n")
    code = CODE_HEAD.substitute(names, imports="\n".join(imports))
    code += TOOL_METHODS.substitute(names) if tool else ""
    code += CHANNEL_METHODS.substitute(names) if channel else ""
    helpers = ["FakeContext", "load_extension", "running", *(["call_tool"] if tool else [])]
    test = TEST_HEAD.substitute(names, helpers=", ".join(sorted(helpers)))
    test += TOOL_TEST.substitute(names) if tool else ""
    test += CHANNEL_TEST.substitute(names) if channel else ""
    return {
        "manifest.yaml": MANIFEST.substitute(names, extra="".join(e + "\n" for e in extra)),
        "main.py": code,
        f"tests/test_{ext_id}.py": test,
    }
