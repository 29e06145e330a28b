"""``/setup EXTENSION``: an extension's ``SetupProvider`` questions, in the chat.

The questions go through the kernel's UI requests (``ui_request``), so every
channel renders them its own way; a field marked ``secret`` is asked as a
``secret`` question, which channels do not echo or keep and the kernel
records as ``(hidden)``. The command's reply, the only thing stored in the
conversation, says how the setup went and never holds an answer. A secret
answer whose name the manifest declares in ``secrets`` is kept in ``.env``
(mode 0600), where ``get_secret`` finds it after a restart.
"""

from __future__ import annotations

import asyncio

from core.extensions.context.ui_gateway import UiGateway
from core.extensions.contract import Command, TurnContext
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.lifecycle import describe_exception
from core.extensions.loading.loader import Loader
from core.extensions.loading.setup_schema import SetupField, SetupSchemaError, run_setup
from core.kernel.commands.grant import grant_command
from core.kernel.commands.table import AskingCommand
from core.runtime import save_secrets

__all__ = ["extension_commands", "setup_command"]

STEP_TIMEOUT_S = 30.0  # apply_config / on_setup_complete, each
QUESTION_TIMEOUT_S = 300.0  # time to find a key and paste it


class _ChatAsker:
    """``Asker`` over the kernel's UI requests, in the conversation of ``turn``."""

    def __init__(self, ui: UiGateway, ext_id: str, turn: TurnContext) -> None:
        self._ui, self._ext_id, self._turn = ui, ext_id, turn

    async def ask_field(self, field: SetupField) -> str | None:
        shown = field.default and not field.choices and not field.secret  # a secret: never shown
        default = f" (Enter for {field.default})" if shown else ""
        kind = "select" if field.choices else "secret" if field.secret else "input"
        return await self._ui.ask(
            self._ext_id,
            self._turn,
            kind,
            f"{self._ext_id}: {field.prompt}{default}",
            field.choices,
            QUESTION_TIMEOUT_S,
        )


class _Timed:
    """The extension with a deadline on each call ``run_setup`` makes."""

    def __init__(self, extension: object) -> None:
        self._ext = extension

    def get_setup_schema(self) -> object:
        return self._ext.get_setup_schema()  # type: ignore[attr-defined]

    async def apply_config(self, name: str, value: str) -> None:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            await self._ext.apply_config(name, value)  # type: ignore[attr-defined]

    async def on_setup_complete(self) -> tuple[bool, str]:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            result: tuple[bool, str] = await self._ext.on_setup_complete()  # type: ignore[attr-defined]
        return result


def setup_command(loader: Loader, ui: UiGateway) -> AskingCommand:
    """The ``/setup`` command over the kernel's loader and UI requests."""

    def providers() -> list[str]:
        return sorted(r.ext_id for r in loader.active(Capability.SETUP))

    async def setup(args: str, turn: TurnContext) -> str:
        ext_id = args.strip()
        offered = ", ".join(providers()) or "none"
        if not ext_id:
            return f"Usage: /setup EXTENSION. Extensions with a setup: {offered}."
        record = loader.records.get(ext_id)
        if record is None or Capability.SETUP not in record.capabilities:
            return f"{ext_id} has no setup to run. Extensions with a setup: {offered}."
        if ext_id not in providers():
            return f"{ext_id} is not active ({record.status.value}): {record.error or ''}".strip()
        specs = record.manifest.secrets if record.manifest else []
        declared = {spec.name for spec in specs}

        async def keep(name: str, value: str) -> None:
            if name in declared:
                await asyncio.to_thread(save_secrets, {name: value})

        asker = _ChatAsker(ui, ext_id, turn)
        try:
            ok, message = await run_setup(ext_id, _Timed(record.instance), asker, keep)
        except SetupSchemaError as exc:
            return f"/setup {ext_id}: {exc}"
        except Exception as exc:
            return f"/setup {ext_id} failed: {describe_exception(exc)}"
        return ("Set up. " if ok else "Not set up: ") + message

    return AskingCommand("setup", "answer an extension's setup questions: /setup ID", setup)


def extension_commands(loader: Loader, ui: UiGateway) -> list[Command]:
    """The kernel's commands that act on one extension: ``/grant`` and ``/setup``."""
    if loader.grants is None:
        raise RuntimeError("extension commands need the loader's grants file (load first)")
    return [grant_command(loader, loader.grants), setup_command(loader, ui)]
