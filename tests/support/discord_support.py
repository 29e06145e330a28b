"""Helpers for the Discord channel tests: install the real extension into a test's
extension dir and write its settings pointing at the fake Discord."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from support.fake_discord import FakeDiscord
from support.telegram_support import install_extension

EXTENSION_ID = "discord_channel"
ALICE = 310_000_000_000_000_042  # the allowed user (the owner: first in the list)
MALLORY = 310_000_000_000_000_666  # never allowed
CHANNEL = 520_000_000_000_000_001  # a server channel served when the bot is mentioned


def install(ext_root: Path) -> Path:
    """Copy the bundled Discord channel into the test's extension directory."""
    return install_extension(ext_root, EXTENSION_ID)


def write_settings(
    settings_file: Callable[..., Path],
    dc: FakeDiscord,
    allowed: Sequence[int] = (ALICE,),
    *,
    sections: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    """settings.yaml with Discord the default channel, talking to ``dc``."""
    config: dict[str, Any] = {
        "allowed_user_ids": [str(i) for i in allowed],  # as a JavaScript-minded user writes them
        "allowed_channel_ids": [CHANNEL],
        "api_base_url": dc.base_url,
        "edit_interval_s": 1.0,
    }
    config.update(extra)
    return settings_file(
        channels={"default": EXTENSION_ID},
        extensions={EXTENSION_ID: config},
        **(sections or {}),
    )
