"""Which state a state call addresses, decided the same way on both sides of
the process boundary.

The kernel sets ``CURRENT_TURN`` (with ``serving``) while it serves a turn;
a plugin host sets it around each call that carries a turn (a tool, a
command, ``get_context``). Session-scoped state belongs to that turn's
session; tasks an extension starts inside a turn inherit it (``contextvars``).
Keys and values are checked here too, so a bad one fails at the call in an
isolated extension exactly as in-process. Light on purpose: the plugin host
imports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from core.extensions.contract import TurnContext
from core.extensions.errors import StateScopeError

__all__ = [
    "CURRENT_TURN",
    "MAX_KEY_CHARS",
    "PERSON_MARK",
    "check_key",
    "current_turn",
    "encode_value",
    "person_session",
    "serving",
    "state_session",
]

CURRENT_TURN: ContextVar[TurnContext | None] = ContextVar("hearth_current_turn", default=None)
MAX_KEY_CHARS = 256
PERSON_MARK = "#@"  # between a session id and a member's name in state rows


@contextmanager
def serving(turn: TurnContext | None) -> Iterator[TurnContext | None]:
    """Make ``turn`` the current turn for the block (``None``: no turn)."""
    token = CURRENT_TURN.set(turn)
    try:
        yield turn
    finally:
        CURRENT_TURN.reset(token)


def current_turn() -> TurnContext | None:
    """The turn being served, if any."""
    return CURRENT_TURN.get()


def state_session(scope: str) -> str | None:
    """The session a state call in ``scope`` addresses; ``None`` for extension scope.

    Raises ``StateScopeError`` for session scope outside a turn (or in a turn
    with no session, such as a background agent run).
    """
    if scope == "extension":
        return None
    if scope != "session":
        raise ValueError(f"scope must be 'session' or 'extension', got {scope!r}")
    turn = CURRENT_TURN.get()
    if turn is None or not turn.session_id:
        raise StateScopeError()
    return person_session(turn.session_id, turn.person_key)


def person_session(session_id: str, person_key: str | None) -> str:
    """Whose part of a session state belongs to: the owner keeps the session id
    itself (state kept before people existed stays theirs); a member gets
    ``<session id>#@<name>``, so in a group chat each member's state is their
    own (SPEC §11). ``#`` is escaped inside session ids (ADR 0048) and a new
    session's suffix is digits, so no session id reads as another's part."""
    return session_id if person_key is None else f"{session_id}{PERSON_MARK}{person_key}"


def check_key(key: Any) -> str:
    """A state key: a non-empty string of at most ``MAX_KEY_CHARS`` characters."""
    if not isinstance(key, str):
        raise TypeError(f"a state key must be a string, got {type(key).__name__}")
    if not 0 < len(key) <= MAX_KEY_CHARS:
        raise ValueError(f"a state key must have 1 to {MAX_KEY_CHARS} characters: {key[:40]!r}")
    return key


def encode_value(key: str, value: Any) -> str:
    """``value`` as compact JSON; ``TypeError`` naming ``key`` when it is not JSON."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"state value for key {key!r} is not JSON: {exc}") from None
