"""The wizard's last step: extensions that implement ``SetupProvider``.

The extensions are loaded the way ``main.py extensions`` loads them
(initialized, not started, against a throw-away journal), so their setup
runs with the settings and secrets just written — and without the check
that skips an extension whose required secret is missing, since asking for
it may be what the setup is for (the Telegram channel's bot token). A
secret answer whose name the manifest declares in ``secrets`` is also kept
in ``.env``, where ``get_secret`` finds it after a restart; an answer to a
key of the manifest's ``config`` goes to the local settings layer under
``extensions.ID.KEY``, read as a YAML value (ADR 0053).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import yaml

from core.config import Settings
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.setup_schema import SetupSchemaError, run_setup
from core.kernel.runner import kernel_apart
from core.runtime import save_secrets
from core.setup.plan import local_layer
from core.setup.settings_file import KeyPath, write_changes
from core.setup.terminal import SetupCancelled, TerminalAsker

__all__ = ["run_extension_setups"]


async def run_extension_setups(settings: Settings, ask: TerminalAsker) -> None:
    """Offer each active ``SetupProvider``'s setup; report how each went."""
    async with kernel_apart(settings, "setup") as kernel:
        kernel.loader.secrets = None  # a missing secret is what a setup may ask for
        quiet = logging.getLogger("core.loader")
        level, quiet.level = quiet.level, logging.CRITICAL  # one without it may fail to load
        try:
            await kernel.load()
            records = kernel.loader.active(Capability.SETUP)
            if not records:
                return
            ask.say("\n3. Extensions that ask for their own settings")
            for record in records:
                if not await ask.confirm(f"Set up {record.ext_id}", True):
                    continue
                specs = record.manifest.secrets if record.manifest else []
                declared = {spec.name for spec in specs}
                config_keys = frozenset(record.manifest.config if record.manifest else ())

                async def keep(name: str, value: str, declared: set[str] = declared) -> None:
                    if name in declared:
                        await asyncio.to_thread(save_secrets, {name: value})

                try:
                    ok, message = await run_setup(
                        record.ext_id,
                        record.instance,
                        ask,
                        keep,
                        _config_keeper(settings, record.ext_id, ask),
                        config_keys,
                    )
                except (SetupCancelled, asyncio.CancelledError):
                    raise
                except SetupSchemaError as exc:
                    ok, message = False, str(exc)
                except Exception as exc:
                    ok, message = False, f"{record.ext_id}: setup failed: {exc}"
                ask.say(("ok: " if ok else "not ok: ") + message)
        finally:
            quiet.level = level


def _config_keeper(
    settings: Settings, ext_id: str, ask: TerminalAsker
) -> Callable[[Mapping[str, str]], Awaitable[None]]:
    """Writes an extension's config answers to the local settings layer, each read
    as a YAML value (``[4242]`` is a list), and says which keys it set."""

    async def keep(values: Mapping[str, str]) -> None:
        target, below = local_layer(settings)
        changes: dict[KeyPath, Any] = {
            ("extensions", ext_id, name): yaml.safe_load(value) for name, value in values.items()
        }
        changed = await asyncio.to_thread(write_changes, target, changes, below)
        if changed:
            ask.say(f"{target}: set {', '.join(changed)}")

    return keep
