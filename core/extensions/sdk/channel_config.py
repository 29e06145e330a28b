"""Reading a chat channel's settings: one error shape and one list reader.

Every channel names a bad setting the same way (``extensions.NAME.key:
message``) and takes a list setting the same three ways: a YAML list, one
value, or the text of an environment variable (``'["a", "b"]'`` as JSON, or
``"a,b c"`` split on commas and spaces). Kept here so the five channels do not
each carry a copy of the parsing and the wording.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from core.runtime.errors import HearthError

__all__ = ["ChannelConfigError", "listed"]


class ChannelConfigError(HearthError, ValueError):
    """A setting has a value the channel cannot use; a channel subclasses it
    and sets ``prefix`` (``extensions.telegram_channel``), so the message names
    the full key and callers can still catch the channel's own class."""

    prefix: ClassVar[str] = "extensions"

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{self.prefix}.{key}: {message}")
        self.key = key


def listed(
    key: str,
    value: Any,
    what: str,
    error: type[ChannelConfigError],
    *,
    one_number: bool = False,
) -> list[Any]:
    """The items of a list setting, not yet checked one by one.

    ``what`` names the items in the error (``"Telegram ids"``); ``one_number``
    accepts a bare number as a list of one (ids that YAML reads as numbers).
    Raises ``error`` when the text is not JSON or the value is not a list.
    """
    if isinstance(value, str):  # from the environment: '["a", "b"]' or "a,b c"
        text = value.strip()
        try:
            value = (
                json.loads(text)
                if text.startswith("[")
                else [v for v in re.split(r"[,\s]+", text) if v]
            )
        except ValueError:
            raise error(key, f"{text!r} is not a list of {what}") from None
    if one_number and isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise error(key, f"must be a list of {what}, got {value!r}")
    return value
