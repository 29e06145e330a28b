"""Who a turn is for: the household's people, resolved from (channel, sender).

A channel names its users its own way; a person (settings ``people:``,
SPEC §11) is known on each channel by an identity ``CHANNEL:ID``:
``cli:local`` (whoever types on the terminal), ``http:default`` (whoever
holds the HTTP API token), ``telegram:<user id>`` (in a group: the sender's
id, not the chat's), ``discord:<user id>`` and ``slack:<member id>`` (in a
server channel too: the sender's), ``matrix:@user:server`` and
``email:<address>`` (lowercased; the sender's, in whichever thread). The
router resolves a turn's identity once, here, and puts ``person`` and
``role`` into its ``TurnContext``.

With no ``people:`` section the household is the owner alone, as before
people existed: the owner is the local terminal user, the HTTP token's
holder and the first id of the ``allowed_user_ids`` of Telegram (and of each
other chat channel: ``Household.of``); every other allow-listed id is a
member of their own. A channel whose
allow-list the kernel does not know (a custom channel) speaks for the owner
there, as it did. With a ``people:`` section, an identity no person lists
is a member of their own: safe by default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from core.config import PersonSettings, Role
from core.events.system_payloads import UserMessage
from core.extensions.contract import TurnContext

if TYPE_CHECKING:
    from core.config import People

__all__ = [
    "CHANNEL_PREFIXES",
    "Household",
    "Person",
    "email_ids",
    "identity_of",
    "matrix_ids",
    "slack_ids",
    "telegram_ids",
]

# the channel extensions whose users the kernel knows how to name
CHANNEL_PREFIXES = {
    "cli_channel": "cli",
    "http_api": "http",
    "telegram_channel": "telegram",
    "discord_channel": "discord",
    "slack_channel": "slack",
    "matrix_channel": "matrix",
    "email_channel": "email",
}
_FIXED_IDS = {"cli": "local", "http": "default"}  # one user per terminal, one per token
OWNER = "owner"  # the owner's name when settings name no one


@dataclass(frozen=True, slots=True)
class Person:
    """One person of the household: their name and role."""

    name: str
    role: Role

    @property
    def is_owner(self) -> bool:
        return self.role == "owner"


def identity_of(channel_id: str, user_id: str, sender_id: str | None = None) -> str:
    """The identity (``CHANNEL:ID``) of whoever sent a message on a channel."""
    prefix = CHANNEL_PREFIXES.get(channel_id, channel_id)
    fixed = _FIXED_IDS.get(prefix)
    if fixed is not None:
        return f"{prefix}:{fixed}"
    return f"{prefix}:{sender_id or user_id.partition('#')[0]}"


def telegram_ids(value: Any) -> list[str]:
    """``allowed_user_ids`` as the channel reads it, in order: a YAML list, one
    number, or ``"[1, 2]"`` / ``"1,2"`` from the environment."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, str):
        return re.findall(r"-?\d+", value)
    return [str(item) for item in value] if isinstance(value, list) else []


def slack_ids(value: Any) -> list[str]:
    """Slack's ``allowed_user_ids`` as the channel reads it, in order: a YAML list,
    or ``"[U1, U2]"`` / ``"U1,U2"`` from the environment."""
    if isinstance(value, str):
        return re.findall(r"[UW][A-Z0-9]{2,}", value)
    return [str(item).strip() for item in value] if isinstance(value, list) else []


def matrix_ids(value: Any) -> list[str]:
    """The Matrix channel's ``allowed_user_ids``, in order: a YAML list, or
    ``'["@a:x"]'`` / ``"@a:x,@b:y"`` from the environment."""
    if isinstance(value, str):
        return re.findall(r"@[^\s,\"'\[\]]+:[^\s,\"'\[\]]+", value)
    return [str(item) for item in value] if isinstance(value, list) else []


def email_ids(value: Any) -> list[str]:
    """The e-mail channel's ``allowed_senders``, in order and lowercased: a YAML
    list, or ``'["a@x.org"]'`` / ``"a@x.org,b@y.org"`` from the environment."""
    if isinstance(value, str):
        return [a.lower() for a in re.findall(r"[^\s,\"'\[\]<>@]+@[^\s,\"'\[\]<>@]+", value)]
    return [str(item).strip().lower() for item in value] if isinstance(value, list) else []


def _case_folded(identity: str) -> str:
    """An e-mail identity in lower case (addresses are compared so; the channel
    lowercases its senders); any other identity as it is."""
    return identity.lower() if identity.startswith("email:") else identity


class Household:
    """The people and who each identity is (a dict lookup per turn)."""

    def __init__(
        self,
        people: Mapping[str, PersonSettings],
        telegram_ids: list[str],
        *,
        discord_ids: Sequence[str] = (),
        slack_ids: Sequence[str] = (),
        matrix_ids: Sequence[str] = (),
        email_ids: Sequence[str] = (),
    ) -> None:
        self.named = bool(people)
        self._people: dict[str, Person] = {}
        if people:
            for name, entry in people.items():
                person = Person(name, entry.role)
                for identity in entry.identities:
                    self._people[_case_folded(identity)] = person
            self.owner = next(Person(n, "owner") for n, e in people.items() if e.role == "owner")
            return
        self.owner = Person(OWNER, "owner")
        self._people = {"cli:local": self.owner, "http:default": self.owner}
        others = (
            ("discord", discord_ids),
            ("slack", slack_ids),
            ("matrix", matrix_ids),
            ("email", email_ids),
        )
        for prefix, ids in (("telegram", telegram_ids), *others):
            for index, user_id in enumerate(ids):
                identity = f"{prefix}:{user_id}"
                self._people[identity] = self.owner if index == 0 else Person(identity, "member")

    @classmethod
    def of(cls, people: People, extensions: Mapping[str, Mapping[str, Any]]) -> Household:
        """From ``people:`` and, without it, the chat channels' allow-lists in
        ``extensions:`` (Telegram's, Discord's, Slack's, Matrix's, e-mail's)."""
        telegram: Any = extensions.get("telegram_channel", {}).get("allowed_user_ids")
        discord: Any = extensions.get("discord_channel", {}).get("allowed_user_ids")
        slack: Any = extensions.get("slack_channel", {}).get("allowed_user_ids")
        matrix: Any = extensions.get("matrix_channel", {}).get("allowed_user_ids")
        mail: Any = extensions.get("email_channel", {}).get("allowed_senders")
        return cls(
            people,
            telegram_ids(telegram),
            discord_ids=telegram_ids(discord),
            slack_ids=slack_ids(slack),
            matrix_ids=matrix_ids(matrix),
            email_ids=email_ids(mail),
        )

    def person(self, channel_id: str, user_id: str, sender_id: str | None = None) -> Person:
        """Who sent a message: a listed person, else a member of their own (or, with
        no ``people:``, the owner on a channel whose allow-list the kernel does not know)."""
        identity = identity_of(channel_id, user_id, sender_id)
        known = self._people.get(identity)
        if known is not None:
            return known
        if not self.named and channel_id not in CHANNEL_PREFIXES:
            return self.owner
        return Person(identity, "member")

    def turn(
        self,
        message: UserMessage,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> TurnContext:
        """The turn of a message, with who it is for (resolved once, here)."""
        person = self.person(message.channel_id, message.user_id, message.sender_id)
        return TurnContext(
            channel_id=message.channel_id,
            user_id=message.user_id,
            session_id=session_id,
            turn_id=turn_id,
            sender_id=message.sender_id,
            person=person.name,
            role=person.role,
        )

    def resolve(self, turn: TurnContext) -> TurnContext:
        """``turn`` with its ``person`` and ``role`` (a turn with no channel: the owner's)."""
        if turn.channel_id is None or turn.user_id is None:
            return replace(turn, person=self.owner.name, role="owner")
        person = self.person(turn.channel_id, turn.user_id, turn.sender_id)
        return replace(turn, person=person.name, role=person.role)

    def key_of(self, channel_id: str, user_id: str, sender_id: str | None = None) -> str | None:
        """Whose data a message on a channel addresses (``TurnContext.person_key``)."""
        person = self.person(channel_id, user_id, sender_id)
        return None if person.is_owner else person.name
