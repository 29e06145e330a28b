"""What a ``SetupProvider``'s schema asks, read once and checked.

``get_setup_schema()`` returns plain dicts (seed 002: ``name``,
``description``, ``secret``, ``required``); Hearth also reads ``prompt`` (the
question; default: the description or the name), ``default`` and
``choices``. ``SetupField`` is the checked form both askers use — the setup
wizard in the terminal and ``/setup EXTENSION`` in a chat — and
``run_setup`` walks the fields with either: each answer goes to
``apply_config``, then ``on_setup_complete`` says whether it works. The
schema may grow with the answers, an answer may be refused and asked again,
and answers to config keys are kept in the settings (ADR 0053).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from core.runtime.errors import HearthError

__all__ = [
    "ANSWER_ATTEMPTS",
    "Asker",
    "KeepConfig",
    "SetupField",
    "SetupSchemaError",
    "read_schema",
    "run_setup",
]


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
KeepConfig = Callable[[Mapping[str, str]], Awaitable[None]]

# a refused answer (``apply_config`` raised ``ValueError``) is asked again, this often in all
ANSWER_ATTEMPTS = 3
# a schema that keeps growing is cut off here (a setup asks a handful of questions)
MAX_FIELDS = 50


async def run_setup(
    ext_id: str,
    extension: Any,
    asker: Asker,
    save_secret: SaveSecret | None = None,
    keep_config: KeepConfig | None = None,
    config_keys: frozenset[str] = frozenset(),
) -> tuple[bool, str]:
    """Ask every field, apply each answer, verify; ``(ok, message)`` for the user.

    The schema is read again after each answer and the first field not yet
    asked comes next, so an extension can ask what depends on an earlier
    answer (a bot's name once its token works). ``apply_config`` raising
    ``ValueError`` refuses the answer: the field is asked again with the
    reason, at most ``ANSWER_ATTEMPTS`` times. A secret answer is handed to
    ``save_secret`` once accepted (the kernel keeps manifest-declared secrets
    in ``.env``); an answer to a field named like a key of the manifest's
    ``config`` (``config_keys``) goes to ``keep_config`` when the setup ends
    well (the wizard writes it to the local settings layer). No answer is
    ever part of the returned message."""
    asked: set[str] = set()
    kept: dict[str, str] = {}
    while (field := _next_field(ext_id, extension, asked)) is not None:
        if len(asked) == MAX_FIELDS:
            return False, f"{ext_id}: setup stopped; it asked more than {MAX_FIELDS} questions"
        asked.add(field.name)
        answer = await _accepted_answer(ext_id, extension, asker, field)
        if isinstance(answer, _Refused):
            return False, answer.message
        if answer is None:
            continue
        if field.secret and save_secret is not None:
            await save_secret(field.name, answer)
        if field.name in config_keys:
            kept[field.name] = answer
    ok, message = await extension.on_setup_complete()
    if ok and kept and keep_config is not None:
        await keep_config(kept)
    return bool(ok), f"{ext_id}: {message}" if message else f"{ext_id}: set up"


@dataclass(frozen=True, slots=True)
class _Refused:
    message: str


def _next_field(ext_id: str, extension: Any, asked: set[str]) -> SetupField | None:
    for field in read_schema(ext_id, extension.get_setup_schema()):
        if field.name not in asked:
            return field
    return None


async def _accepted_answer(
    ext_id: str, extension: Any, asker: Asker, field: SetupField
) -> str | _Refused | None:
    """The answer ``apply_config`` took; ``None``: an optional field left empty."""
    question = field
    for attempt in range(1, ANSWER_ATTEMPTS + 1):
        answer = await asker.ask_field(question)
        if answer is None or not answer.strip():
            answer = field.default
        if answer is None:
            if field.required:
                return _Refused(f"{ext_id}: setup stopped; {field.name} is required")
            return None
        try:
            await extension.apply_config(field.name, answer)
        except ValueError as exc:
            if attempt == ANSWER_ATTEMPTS:
                return _Refused(f"{ext_id}: {field.name}: {exc}")
            question = replace(field, prompt=f"{exc} — {field.prompt}")
            continue
        return answer
    return None
