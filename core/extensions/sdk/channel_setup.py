"""The questions every chat channel's setup asks the same way (ADR 0053).

A chat channel's ``SetupProvider`` (Telegram, Discord, Slack, Matrix) checks
its token live with the platform, then builds the allow-list: it may offer the
people who wrote to the bot meanwhile (``discover``), one yes/no question each,
and ends with the list itself, which the user may edit. Only the token check
and the listening for writers are the platform's; the fields, the routing of
the answers and the closing sentence are here, so every channel words them
alike. A channel already running asks nothing: ``/pair`` admits people there.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, TypeVar

__all__ = ["AllowListQuestions", "one_line", "running_note", "secret_field"]

YES, NO = "yes", "no"
DISCOVER = "discover"
ALLOWED = "allowed_user_ids"
ALLOW_PREFIX = "allow_"
NOBODY = "nobody yet (/pair admits someone later)"

Id = TypeVar("Id", int, str)


def secret_field(name: str, what: str, now: str | None) -> dict[str, Any]:
    """A hidden field for a token; Enter keeps the one set now (never shown)."""
    keeps = " (hidden; Enter keeps the one set now)" if now else " (hidden)"
    field: dict[str, Any] = {
        "name": name,
        "prompt": f"{what}{keeps}",
        "secret": True,
        "required": False,
    }
    if now:
        field["default"] = now  # never shown: the field is secret
    return field


def one_line(exc: object) -> str:
    """An error as one short line, for a refusal the wizard prints."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def running_note(bot: str | None) -> tuple[bool, str]:
    """The setup's outcome while the channel runs: nothing was asked."""
    who = bot or "the bot"
    return True, f"{who} is running; /pair admits someone, `main.py setup` changes the bot"


class AllowListQuestions(Generic[Id]):
    """The allow-list part of a setup: who wrote (offered one by one) and the list.

    ``parse`` reads the list's answer (``ValueError`` refuses it); ``id_prompt``
    asks for it. A channel that can listen for writers passes ``discover`` to
    ``apply`` and the people it found to ``found``."""

    def __init__(
        self, allowed: Iterable[Id], parse: Callable[[str], list[Id]], id_prompt: str
    ) -> None:
        self.allowed: list[Id] = list(allowed)
        self._parse: Callable[[str], list[Id]] = parse
        self._id_prompt = id_prompt
        self._offered: dict[str, tuple[Id, str]] = {}  # field name -> (id, description)

    def found(self, people: Iterable[tuple[Id, str]]) -> None:
        """People who wrote to the bot, each ``(id, description)``: asked about next."""
        for user_id, description in people:
            self._offered.setdefault(f"{ALLOW_PREFIX}{user_id}", (user_id, description))

    def fields(self, discover_prompt: str | None) -> list[dict[str, Any]]:
        """The discovery question (when the channel can listen), one question per
        writer found, then the list."""
        fields: list[dict[str, Any]] = []
        if discover_prompt is not None:
            fields.append(
                {
                    "name": DISCOVER,
                    "prompt": discover_prompt,
                    "choices": [YES, NO],
                    "default": NO if self.allowed else YES,
                }
            )
        for name, (_, description) in self._offered.items():
            fields.append(
                {
                    "name": name,
                    "prompt": f"{description} wrote. Allow them",
                    "choices": [YES, NO],
                    "default": YES,
                }
            )
        fields.append(
            {
                "name": ALLOWED,
                "prompt": self._id_prompt,
                "default": json.dumps(self.allowed),
                "required": False,
            }
        )
        return fields

    async def apply(
        self, name: str, value: str, discover: Callable[[], Awaitable[None]] | None = None
    ) -> bool:
        """Take an answer to one of these fields (``False``: not one of them);
        ``ValueError`` refuses it."""
        if name == DISCOVER and discover is not None:
            if value == YES:
                await discover()
        elif name in self._offered:
            user_id = self._offered[name][0]
            if value == YES and user_id not in self.allowed:
                self.allowed.append(user_id)
        elif name == ALLOWED:
            self.allowed = self._parse(value)
        else:
            return False
        return True

    def serves(self, bot: str) -> str:
        """The closing sentence of a setup that made ``bot`` work."""
        ids = ", ".join(map(str, self.allowed)) or NOBODY
        return f"{bot} serves {ids}; start Hearth to use it"
