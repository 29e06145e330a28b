"""The wizard's last step: extensions that implement ``SetupProvider``.

The extensions are loaded the way ``main.py extensions`` loads them
(initialized, not started, against a throw-away journal), so their setup
runs with the settings and secrets just written. A secret answer whose name
the manifest declares in ``secrets`` is also kept in ``.env``, where
``get_secret`` finds it after a restart.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from core.config import Settings
from core.extensions.capabilities import Capability
from core.extensions.setup_schema import SetupSchemaError, run_setup
from core.kernel.runner import Kernel
from core.runtime import save_secrets
from core.setup.terminal import SetupCancelled, TerminalAsker

__all__ = ["run_extension_setups"]


async def run_extension_setups(settings: Settings, ask: TerminalAsker) -> None:
    """Offer each active ``SetupProvider``'s setup; report how each went."""
    with tempfile.TemporaryDirectory(prefix="hearth-setup-") as tmp:
        kernel = Kernel(settings, journal_path=Path(tmp) / "events.db")
        try:
            await kernel.load()
            records = kernel.loader.active(Capability.SETUP)
            if not records:
                return
            ask.say("\n4. Extensions that ask for their own settings")
            for record in records:
                if not await ask.confirm(f"Set up {record.ext_id}", True):
                    continue
                specs = record.manifest.secrets if record.manifest else []
                declared = {spec.name for spec in specs}

                async def keep(name: str, value: str, declared: set[str] = declared) -> None:
                    if name in declared:
                        await asyncio.to_thread(save_secrets, {name: value})

                try:
                    ok, message = await run_setup(record.ext_id, record.instance, ask, keep)
                except (SetupCancelled, asyncio.CancelledError):
                    raise
                except SetupSchemaError as exc:
                    ok, message = False, str(exc)
                except Exception as exc:
                    ok, message = False, f"{record.ext_id}: setup failed: {exc}"
                ask.say(("ok: " if ok else "not ok: ") + message)
        finally:
            await kernel.loader.shutdown()
            await kernel.bus.stop()
