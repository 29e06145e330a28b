"""What a ``SetupProvider``'s schema asks, read once and checked.

``get_setup_schema()`` returns plain dicts (seed 002: ``name``,
``description``, ``secret``, ``required``); Hearth also reads ``prompt`` (the
question; default: the description or the name), ``default`` and
``choices``. ``SetupField`` is the checked form both askers use — the setup
wizard in the terminal and ``/setup EXTENSION`` in a chat — and
``run_setup`` walks the fields with either: each answer goes to
``apply_config``, then ``on_setup_complete`` says whether it works.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from core.runtime.errors import HearthError

__all__ = ["Asker", "SetupField", "SetupSchemaError", "read_schema", "run_setup"]


class SetupSchemaError(HearthError, ValueError):
    """A schema entry the kernel cannot ask; names the extension and the entry."""


@dataclass(frozen=True, slots=True)
class SetupField:
    """One question of an extension's setup."""

    name: str
    prompt: str
    secret: bool = False
    required: bool = True
    default: str | None = None
    choices: tuple[str, ...] = ()


class Asker(Protocol):
    """Puts one question to the user; ``None`` when none came (timeout, skipped)."""

    async def ask_field(self, field: SetupField) -> str | None: ...


def read_schema(ext_id: str, schema: object) -> list[SetupField]:
    """The checked fields of ``schema``; ``SetupSchemaError`` names what is wrong."""
    if not isinstance(schema, list):
        raise SetupSchemaError(f"{ext_id}: get_setup_schema() must return a list of dicts")
    fields: list[SetupField] = []
    for index, entry in enumerate(schema):
        if not isinstance(entry, Mapping):
            raise SetupSchemaError(f"{ext_id}: setup field {index} is not a dict")
        fields.append(_field(ext_id, index, entry))
    return fields


def _field(ext_id: str, index: int, entry: Mapping[str, Any]) -> SetupField:
    known = {"name", "description", "prompt", "secret", "required", "default", "choices"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise SetupSchemaError(f"{ext_id}: setup field {index}: unknown key {unknown[0]!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SetupSchemaError(f"{ext_id}: setup field {index} has no name")
    choices = entry.get("choices") or ()
    if not isinstance(choices, list | tuple) or not all(isinstance(c, str) for c in choices):
        raise SetupSchemaError(f"{ext_id}: setup field {name}: choices must be a list of strings")
    default = entry.get("default")
    prompt = entry.get("prompt") or entry.get("description") or name
    return SetupField(
        name=name,
        prompt=str(prompt),
        secret=bool(entry.get("secret", False)),
        required=bool(entry.get("required", True)),
        default=None if default is None else str(default),
        choices=tuple(choices),
    )


SaveSecret = Callable[[str, str], Awaitable[None]]


async def run_setup(
    ext_id: str, extension: Any, asker: Asker, save_secret: SaveSecret | None = None
) -> tuple[bool, str]:
    """Ask every field, apply each answer, verify; ``(ok, message)`` for the user.

    A secret answer is handed to ``apply_config`` and, when ``save_secret`` is
    given, to it (the kernel keeps manifest-declared secrets in ``.env``); it
    is never part of the returned message."""
    fields = read_schema(ext_id, extension.get_setup_schema())
    for field in fields:
        answer = await asker.ask_field(field)
        if answer is None or not answer.strip():
            answer = field.default
        if answer is None:
            if field.required:
                return False, f"{ext_id}: setup stopped; {field.name} is required"
            continue
        if field.secret and save_secret is not None:
            await save_secret(field.name, answer)
        await extension.apply_config(field.name, answer)
    ok, message = await extension.on_setup_complete()
    return bool(ok), f"{ext_id}: {message}" if message else f"{ext_id}: set up"
