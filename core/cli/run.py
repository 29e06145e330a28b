"""``main.py`` (run): the kernel in the foreground until SIGINT/SIGTERM.

In a terminal the conversation owns the screen: logs go to
``<data>/hearth.log`` and only warnings reach the terminal (``quiet_terminal``;
``--verbose`` keeps them on stderr). There Ctrl-C belongs to the CLI channel
(it cancels a turn, or asks before quitting), so SIGINT does not stop the kernel.
Unsupervised, the run keeps the local model's server itself when
``models.local_server.start`` says so (ADR 0098).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from core.agents.model_router import ModelRouter
from core.config import Settings
from core.kernel.runner import Kernel
from core.runtime import (
    LocalServerKeeper,
    is_supervised,
    limit_arenas,
    take_restart_request,
)

log = logging.getLogger("core.kernel.runner")

LOG_FILE = "hearth.log"


def quiet_terminal() -> bool:
    """Whether this run talks to a person at a terminal (the interactive CLI):
    stdin and stdout are terminals and no supervisor is running us."""
    return sys.stdin.isatty() and sys.stdout.isatty() and not is_supervised()


SETUP_HINT = (
    "hearth: no model configured yet; run `make setup` (or .venv/bin/python main.py setup) "
    "to choose OpenAI or a local server; slash commands work meanwhile"
)


def run_kernel(settings: Settings, argv: list[str]) -> int:
    """Run until stopped. A restart request re-executes the process when no
    supervisor is watching (under one, the supervisor restarts us)."""
    supervised = is_supervised()
    if not ModelRouter(settings.models).is_configured("orchestrator"):
        print(SETUP_HINT, file=sys.stderr, flush=True)
    disabled = {"cli_channel": "not started under the supervisor"} if supervised else {}
    limit_arenas()  # before the kernel starts its threads (core/runtime/heap.py)
    kernel = Kernel(settings, disabled_extensions=disabled)
    local = settings.models.local_server
    server = None
    if local.start and not supervised:  # under a supervisor, it keeps the server (ADR 0098)
        server = LocalServerKeeper(
            local.argv(),
            settings.data_dir,
            logging.getLogger("core.runtime.local_server"),
            backoff_max_s=local.restart_backoff_max_s,
        )
        server.start()
    try:
        asyncio.run(_serve(kernel))
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        return 130
    except Exception:  # a kernel task died (e.g. the event bus): exit non-zero, loudly
        log.critical("kernel failed; exiting for the supervisor to restart it", exc_info=True)
        return 1
    finally:
        if server is not None:
            server.stop()
    if kernel.restart_requested and not supervised:
        take_restart_request(kernel.data_dir)
        log.info("restarting: %s", kernel.restart_requested)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *argv])
    return 0


async def _serve(kernel: Kernel) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, kernel.request_shutdown)
    await kernel.run()
