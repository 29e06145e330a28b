"""Shared by the memory suites (with the ``memory_settings`` fixture of
conftest): a conversation through the capture channel of a real kernel."""

from __future__ import annotations

from typing import Any

from core.extensions.contract import TurnContext
from support.harness import wait_for

TURN = TurnContext(channel_id="capture", user_id="u1")


def replies(kernel: Any) -> list[Any]:
    """What the capture channel was sent, in order."""
    return kernel.loader.instance("capture")._log()


async def converse(kernel: Any, text: str, n: int = 1, timeout: float = 60.0) -> None:
    """Say ``text`` as the user; wait until the channel holds ``n`` replies."""
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: len(replies(kernel)) >= n, timeout=timeout)
