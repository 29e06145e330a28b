"""The builder's tools: list, read, write, validate, request a restart.

Every refusal comes back as a ``refused: ...`` string (an I/O error as
``failed: ...``) the model can read and act on; nothing here raises into the
agent run. A write to an existing extension the builder did not create runs
only after the owner said yes to a question naming that extension and showing
the diff (ADR 0044); the changed code then needs a new grant before Hearth
loads it again. ``request_restart`` is accepted only when the extension's current
files are exactly the ones that last passed validation (compared by hash).
An extension the running kernel already loaded is reloaded alone (ADR 0032);
only a new one needs Hearth restarted to be discovered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agents import FunctionTool, function_tool

from core.extensions.sdk import side_effects

from .validation import ValidationResult, dry_run
from .workspace import RefusedError, Workspace


@dataclass
class BuilderState:
    """What the tools share: the workspace and the last validation per extension."""

    workspace: Workspace
    request_restart: Callable[[], None]
    validation_timeout_s: float
    validations: dict[str, ValidationResult] = field(default_factory=dict)
    # reload one loaded extension: (reloaded, sentence); None: not offered by the kernel
    request_reload: Callable[[str], Awaitable[tuple[bool, str]]] | None = None
    # the extensions Hearth found when it started (a reload reaches only those)
    loaded_at_start: frozenset[str] = frozenset()
    # asks the owner a yes/no question (context.ui_request); None: nobody to ask
    confirm: Callable[[str], Awaitable[bool]] | None = None


MAX_DIFF_CHARS = 3500  # a question must fit a chat message; a larger change is refused


def build_tools(state: BuilderState) -> list[FunctionTool]:
    ws = state.workspace

    @function_tool
    def list_files(extension_id: str, allow_existing: str = "") -> str:
        """List the files of an extension directory (paths relative to it, with sizes).

        Args:
            extension_id: The extension's id (lower_snake_case), i.e. its directory name.
            allow_existing: Only when the user named an existing extension by id: that id.
        """
        try:
            ws.check_access(extension_id, allow_existing)
            files = ws.list_files(extension_id)
        except RefusedError as exc:
            return f"refused: {exc}"
        except OSError as exc:
            return _failed(exc)
        if not files:
            return f"{extension_id}/ has no files yet"
        return "\n".join(f"{path} ({size} bytes)" for path, size in files)

    @function_tool
    def read_file(extension_id: str, path: str, allow_existing: str = "") -> str:
        """Read one file of an extension.

        Args:
            extension_id: The extension's id (its directory name).
            path: The file's path relative to the extension directory, e.g. main.py.
            allow_existing: Only when the user named an existing extension by id: that id.
        """
        try:
            ws.check_access(extension_id, allow_existing)
            return ws.read_file(extension_id, path)
        except RefusedError as exc:
            return f"refused: {exc}"
        except OSError as exc:
            return _failed(exc)

    @function_tool
    async def write_file(
        extension_id: str, path: str, content: str, allow_existing: str = ""
    ) -> str:
        """Create or replace one file of an extension (the directory is created as needed).

        Args:
            extension_id: The new extension's id (lower_snake_case), i.e. its directory name.
            path: The file's path relative to the extension directory, e.g. manifest.yaml.
            content: The whole new content of the file.
            allow_existing: Only when the user named an existing extension by id: that id.
        """
        try:
            ws.check_access(extension_id, allow_existing)
            if await asyncio.to_thread(ws.foreign, extension_id):
                await _owner_confirms(state, extension_id, path, content)
            size = await asyncio.to_thread(ws.write_file, extension_id, path, content)
        except RefusedError as exc:
            return f"refused: {exc}"
        except OSError as exc:
            return _failed(exc)
        return f"wrote {extension_id}/{path} ({size} bytes)"

    @function_tool
    async def validate_extension(extension_id: str, allow_existing: str = "") -> str:
        """Dry-run the extension as the kernel would load it; returns the errors, if any.

        Args:
            extension_id: The extension's id (its directory name).
            allow_existing: Only when the user named an existing extension by id: that id.
        """
        try:
            ws.check_access(extension_id, allow_existing)
            if not (ws.root / extension_id).is_dir():
                return f"refused: {extension_id}/ does not exist; write its files first"
            links = ws.symlinks(extension_id)
            if links:
                return f"validation failed: symlinks are not allowed: {', '.join(links)}"
            digest = ws.digest(extension_id)
        except RefusedError as exc:
            return f"refused: {exc}"
        except OSError as exc:
            return _failed(exc)
        try:
            result = await dry_run(ws.root, extension_id, digest, state.validation_timeout_s)
        except OSError as exc:
            state.validations.pop(extension_id, None)
            return _failed(exc)
        state.validations[extension_id] = result
        return result.summary

    @function_tool
    async def request_restart(extension_id: str, allow_existing: str = "") -> str:
        """Activate the extension: reload it alone if Hearth already runs it, else
        restart Hearth; only after validate_extension passed.

        Args:
            extension_id: The extension that was just written and validated.
            allow_existing: Only when the user named an existing extension by id: that id.
        """
        try:
            ws.check_access(extension_id, allow_existing)
            reason = _restart_refusal(state, extension_id)
        except RefusedError as exc:
            return f"refused: {exc}"
        except OSError as exc:
            return _failed(exc)
        if reason:
            return f"refused: {reason}"
        if state.request_reload is not None and extension_id in state.loaded_at_start:
            reloaded, sentence = await state.request_reload(extension_id)
            return f"{'reloaded' if reloaded else 'reload failed'}: {sentence}"
        state.request_restart()
        return f"restart requested: Hearth restarts now and loads {extension_id}"

    # consent (docs/consent.md): reading changes nothing; writing code, running it
    # (the dry run imports and initializes it) and restarting Hearth do
    tools: list[FunctionTool] = [
        side_effects(list_files, False),
        side_effects(read_file, False),
        side_effects(write_file, True),
        side_effects(validate_extension, True),
        side_effects(request_restart, True),
    ]
    return tools


async def _owner_confirms(state: BuilderState, ext_id: str, path: str, content: str) -> None:
    """Raise ``RefusedError`` unless the owner says yes to this change of ``ext_id``,
    an extension the builder did not create, shown as a diff."""
    diff = await asyncio.to_thread(state.workspace.diff, ext_id, path, content)
    if not diff:
        return  # the same content: nothing changes
    if len(diff) > MAX_DIFF_CHARS:
        raise RefusedError(
            f"the change to {ext_id}/{path} is too large to show the owner "
            f"({len(diff)} characters of diff, at most {MAX_DIFF_CHARS}); make smaller edits"
        )
    if state.confirm is None:
        raise RefusedError(f"changing {ext_id!r} needs the owner's yes, and nobody can be asked")
    question = (
        f"builder_agent wants to change the existing extension {ext_id!r}, which it did "
        f"not create ({path}):\n{diff}Allow this change to {ext_id}? Once changed, "
        f"{ext_id} needs a new grant before Hearth loads it again."
    )
    if not await state.confirm(question):
        raise RefusedError(f"the owner did not allow this change to {ext_id!r}")


def _restart_refusal(state: BuilderState, ext_id: str) -> str | None:
    """Why a restart for ``ext_id`` is not allowed now (``None``: it is)."""
    result = state.validations.get(ext_id)
    if result is None:
        return f"{ext_id} has not been validated; call validate_extension first"
    if not result.ok:
        return f"the last validation of {ext_id} failed (fix it, validate again): {result.summary}"
    if state.workspace.digest(ext_id) != result.digest:
        return f"{ext_id} changed since it passed validation; call validate_extension again"
    return None


def _failed(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"failed: {exc.strerror or exc}{where}"
