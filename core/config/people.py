"""The ``people:`` section of ``settings.yaml``: who the household is (SPEC §11).

Each person has a role (``owner`` or ``member``) and the identities they
use, one per channel account: ``telegram:111`` (a Telegram user id),
``discord:80351110224678912`` (a Discord user id),
``slack:U0123ABCD`` (a Slack member id),
``matrix:@alice:example.org`` (a Matrix user id),
``email:alice@example.org`` (an e-mail address, lowercased),
``cli:local`` (the local terminal), ``http:default`` (the HTTP API token).
One person on several channels is one person: one memory, one set of
reminders, one "always allow" list. The section is optional; without it
the household is the owner alone (``core.kernel.conversations.people``).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

__all__ = ["IDENTITY_PATTERN", "People", "PersonSettings", "Role", "check_people"]

Role = Literal["owner", "member"]
IDENTITY_PATTERN = re.compile(r"^[a-z][a-z0-9_]*:\S+$")


class PersonSettings(BaseModel):
    """One person of the household (``people.NAME``)."""

    model_config = ConfigDict(extra="forbid")

    role: Role = "member"
    identities: list[str] = Field(default_factory=list)

    @field_validator("identities")
    @classmethod
    def _identities(cls, value: list[str]) -> list[str]:
        for identity in value:
            if not IDENTITY_PATTERN.match(identity):
                raise ValueError(
                    f"identity {identity!r} is not CHANNEL:ID "
                    "(e.g. telegram:111, slack:U0123ABCD, cli:local, http:default)"
                )
        return value


def check_people(people: dict[str, PersonSettings]) -> dict[str, PersonSettings]:
    """Exactly one owner, and no identity in two people (the message names both)."""
    if not people:
        return people
    owners = sorted(name for name, person in people.items() if person.role == "owner")
    if len(owners) != 1:
        found = ", ".join(owners) if owners else "none"
        raise ValueError(f"people: exactly one person has role: owner (found: {found})")
    seen: dict[str, str] = {}
    for name, person in people.items():
        if "/" in name or "@" in name or not name.strip():
            raise ValueError(f"people.{name}: a name has no '/', '@' and is not empty")
        for identity in person.identities:
            if identity in seen:
                raise ValueError(
                    f"people.{name}.identities: {identity!r} is already people.{seen[identity]}'s"
                )
            seen[identity] = name
    return people


# the ``people:`` section as ``Settings`` declares it: checked as a whole
People = Annotated[dict[str, PersonSettings], AfterValidator(check_people)]
