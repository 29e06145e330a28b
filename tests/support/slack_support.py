"""Helpers for the Slack channel tests: who is who, and the channel's settings
pointed at a fake Slack (tests/support/fake_slack.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.fake_slack import FakeSlack

EXTENSION_ID = "slack_channel"
ALICE = "UALICE0001"  # the owner: first allowed user
BOB = "UBOB000002"  # allowed too
MALLORY = "UMALLORY03"  # never allowed
GENERAL = "CGENERAL01"  # a listed channel


def slack_settings(
    settings_file: Any, slack: FakeSlack, edit_interval_s: float = 0.2, **sections: Any
) -> Path:
    """A settings file serving Alice and Bob in their DMs and in #general, against ``slack``."""
    config = {
        "allowed_user_ids": [ALICE, BOB],
        "allowed_channel_ids": [GENERAL],
        "api_base_url": slack.base_url,
        "edit_interval_s": edit_interval_s,
    }
    return settings_file(
        channels={"default": EXTENSION_ID}, extensions={EXTENSION_ID: config}, **sections
    )
