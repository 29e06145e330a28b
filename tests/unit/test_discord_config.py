"""The Discord channel's settings and text splitting: ids written as numbers or
strings (or from the environment), a bad value named by its key, and no piece of a
reply over Discord's 2,000 characters."""

from __future__ import annotations

import pytest

from core.extensions.sdk import split_text
from sandbox.extensions.discord_channel.config import ConfigError, parse_config
from sandbox.extensions.discord_channel.sender import MAX_MESSAGE_UNITS


def _parse(**values):
    return parse_config(lambda key, default: values.get(key, default))


def test_ids_are_read_from_numbers_strings_and_the_environment():
    config = _parse(
        allowed_user_ids=["80351110224678912", 42, "80351110224678912"],
        allowed_channel_ids='["1234567890123456789"]',  # HEARTH__..._ALLOWED_CHANNEL_IDS
        default_user_id="42",
    )
    assert config.allowed_user_ids == (80351110224678912, 42)  # order kept, once each
    assert config.allowed_channel_ids == frozenset({1234567890123456789})
    assert config.default_user_id == 42
    assert config.api_base_url == "https://discord.com/api/v10"
    assert _parse(allowed_user_ids="1, 2").allowed_user_ids == (1, 2)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"allowed_user_ids": ["@alice"]}, "allowed_user_ids: '@alice' is not a Discord id"),
        ({"allowed_channel_ids": [-5]}, "allowed_channel_ids: -5 is not a Discord id"),
        ({"api_base_url": "discord.com"}, "api_base_url: 'discord.com' is not an http(s) URL"),
        ({"edit_interval_s": -1}, "edit_interval_s: -1 must be at least 0"),
    ],
)
def test_a_bad_value_is_named_by_its_key(values, message):
    with pytest.raises(ConfigError) as caught:
        _parse(**values)
    assert str(caught.value).startswith(f"extensions.discord_channel.{message}")


def test_a_long_reply_is_split_into_pieces_discord_accepts():
    text = "```python\n" + "print('x')\n" * 400 + "```\n\n" + "emoji 🎉 " * 300
    pieces = split_text(text, MAX_MESSAGE_UNITS)
    assert MAX_MESSAGE_UNITS == 2000
    assert len(pieces) > 2 and all(len(p) <= 2000 for p in pieces)
    assert pieces[1].startswith("```python\n")  # a cut code block is reopened
