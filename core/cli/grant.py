"""``main.py extensions grant ID [ID ...] [--yes]``: the user grants what an
extension asks (issue 11 item 5).

It reads the manifests (no extension code runs), shows each request in plain
words and asks y/N on a terminal; ``--yes`` is for scripts. Once granted, the
extensions are loaded as ``main.py extensions`` does, and any tool or command
name a granted extension would take from another one is shown and granted
separately ("replaces `remember` from memory", issue 11 item 6).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from core.config import Settings
from core.extensions.access.grant_store import GrantStore, GrantStoreError
from core.extensions.access.grants import GrantRequest, replaces_words
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.loader import Loader
from core.extensions.loading.records import ExtensionStatus

Ask = Callable[[str], bool]


def run_grant(settings: Settings, ext_ids: list[str], *, yes: bool) -> int:
    """Exit 0 when every named extension is granted, 1 when the user declined, 2 on errors."""
    if not yes and not sys.stdin.isatty():
        print(
            "hearth: not a terminal: cannot ask whether to grant; "
            "run it in a terminal or add --yes",
            file=sys.stderr,
        )
        return 2
    ask: Ask = (lambda _q: True) if yes else _ask_tty
    try:
        return grant_extensions(settings, ext_ids, ask=ask)
    except GrantStoreError as exc:
        print(f"hearth: {exc}", file=sys.stderr)
        return 2


def grant_extensions(settings: Settings, ext_ids: list[str], *, ask: Ask) -> int:
    requests = requests_for(settings, ext_ids)
    if isinstance(requests, str):
        print(f"hearth: {requests}", file=sys.stderr)
        return 2
    store = GrantStore(settings.data_dir)
    declined = 0
    granted: list[GrantRequest] = []
    for request in requests:
        if not request.needs_grant:
            print(f"{request.ext_id} asks for nothing beyond the defaults; no grant needed")
            continue
        print(f"{request.ext_id} asks to:")
        for line in request.describe():
            print(f"  - {line}")
        if store.change_since_grant(request) == "code":
            print("  (its code changed since it was last granted: this grants the new code)")
        if not ask(f"Grant {request.ext_id} this? [y/N] "):
            print(f"{request.ext_id}: not granted")
            declined += 1
            continue
        store.record(request)
        granted.append(request)
        print(f"{request.ext_id}: granted")
    if granted:
        shadowed = asyncio.run(shadowed_names(settings, [r.ext_id for r in granted]))
        for request in granted:
            names = shadowed.get(request.ext_id, {})
            if not names:
                continue
            print(f"{request.ext_id} also provides names other extensions already have:")
            for line in replaces_words(names):
                print(f"  - {line}")
            if ask(f"Let {request.ext_id} replace them? [y/N] "):
                store.record(request, replaces=names)
                print(f"{request.ext_id}: granted, including what it replaces")
            else:
                print(f"{request.ext_id}: keeps the other extensions' names")
    return 1 if declined else 0


def requests_for(settings: Settings, ext_ids: list[str]) -> list[GrantRequest] | str:
    """Each named extension's request, read from its manifest; or an error line."""
    loader = Loader(settings.extensions_dir, default_isolation=settings.isolation.default)
    loader.discover()
    requests = []
    for ext_id in ext_ids:
        record = loader.records.get(ext_id)
        if record is None:
            known = ", ".join(sorted(loader.records)) or "none"
            return f"no extension {ext_id!r} in {settings.extensions_dir} (found: {known})"
        request = loader.request_of(record)
        if request is None:
            return f"extension {ext_id!r} cannot be granted: {record.error}"
        requests.append(request)
    return requests


async def shadowed_names(settings: Settings, ext_ids: list[str]) -> dict[str, dict[str, str]]:
    """For each of ``ext_ids``: ``{name: other extension}`` for every tool,
    ``/command`` or ``#post-processor`` it provides that another loaded extension
    provides too."""
    from core.kernel.postprocess import processor_names
    from core.kernel.runner import kernel_apart

    async with kernel_apart(settings, "grant") as kernel:
        await kernel.load()
        provided: dict[str, set[str]] = {}
        for record in kernel.loader.records.values():
            if record.status is not ExtensionStatus.ACTIVE:
                continue
            names = set(record.tool_names)
            if Capability.COMMAND in record.capabilities:
                names |= {f"/{c.name.lstrip('/')}" for c in record.instance.get_commands()}
            names |= {f"#{name}" for name in processor_names(record)}  # post-processors
            provided[record.ext_id] = names
    out: dict[str, dict[str, str]] = {}
    for ext_id in ext_ids:
        mine = provided.get(ext_id, set())
        out[ext_id] = {
            name: other
            for other, names in sorted(provided.items())
            if other != ext_id
            for name in sorted(mine & names)
        }
    return out


def _ask_tty(question: str) -> bool:
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False
