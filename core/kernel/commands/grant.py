"""``/grant ID [yes]``: grant an extension's request from a channel.

Without the confirmation word it only shows what the extension asks (and
whether its code changed since its last grant); with ``yes`` it records the
grant — of that request and of the code on disk now (ADR 0044) — in the
kernel's grants file. It is a kernel command like ``/help``: it runs only for
messages the router takes as the user's, and an extension has no other way
to write a grant.
"""

from __future__ import annotations

import asyncio

from core.extensions.access.grant_store import GrantStore, GrantStoreError
from core.extensions.access.grants import GrantRequest
from core.extensions.contract import Command, TurnContext
from core.extensions.loading.code_digest import CodeLinkError, read_code
from core.extensions.loading.loader import Loader
from core.extensions.loading.manifest import MANIFEST_FILE, ManifestError, load_manifest

USAGE = "Usage: /grant ID — shows what the extension asks; /grant ID yes — allows it."


def grant_command(loader: Loader, store: GrantStore) -> Command:
    """The ``/grant`` command over the kernel's loader (manifests) and grants file."""

    async def grant(args: str, turn: TurnContext) -> str:
        words = args.split()
        if not words or len(words) > 2 or (len(words) == 2 and words[1].lower() != "yes"):
            return USAGE
        ext_id = words[0]
        request = await asyncio.to_thread(_request, loader, ext_id)
        if isinstance(request, str):
            return request
        if not request.needs_grant:
            return f"{ext_id} asks for nothing beyond the defaults; no grant is needed."
        asks = "\n".join(f"- {line}" for line in request.describe())
        try:
            changed = await asyncio.to_thread(store.change_since_grant, request)
        except GrantStoreError as exc:
            return f"Could not read the grants: {exc}"
        if changed == "code":
            asks += "\n- (its code changed since it was last granted: this grants the new code)"
        if len(words) == 1:
            return f"{ext_id} asks to:\n{asks}\nSend `/grant {ext_id} yes` to allow it."
        try:
            await asyncio.to_thread(store.record, request)
        except GrantStoreError as exc:
            return f"Could not record the grant: {exc}"
        return (
            f"Granted {ext_id}:\n{asks}\n"
            f"Send `/reload {ext_id}` to load it now, or restart Hearth (stop and start it; "
            "under `main.py daemon`, restart the daemon)."
        )

    return Command("grant", "show what an extension asks; `/grant ID yes` allows it", grant)


def _request(loader: Loader, ext_id: str) -> GrantRequest | str:
    """The request in the extension's manifest as it is on disk now."""
    record = loader.records.get(ext_id)
    if record is None:
        known = ", ".join(sorted(loader.records)) or "none"
        return f"No extension {ext_id!r}. Known: {known}."
    try:
        code = read_code(record.ext_dir)  # the manifest shown is the one hashed
        manifest = load_manifest(record.ext_dir, code.content(MANIFEST_FILE))
    except ManifestError as exc:
        return f"{ext_id} cannot be granted: {exc.message}"
    except CodeLinkError as exc:
        return f"{ext_id} cannot be granted: {exc}"
    except OSError as exc:
        return f"{ext_id} cannot be granted: cannot read its files: {exc}"
    return GrantRequest.from_manifest(
        manifest, default_isolation=loader.default_isolation, code=code.digest
    )
