"""Which extension the kernel is serving a turn to, right now (ADR 0043).

A question to the user (``ui_request``) must belong to a turn the kernel is
serving *to the extension that asks*: inside its tool, command, hook or
context-provider call, while that call runs. Neither the extension nor its
plugin host may name the turn: the kernel opens a ``ServedCall`` around each
such call (``serving_extension``) and closes it when the call returns, so a
task the extension left behind, or a host claiming a turn of its own
choosing, finds no live call to ask in.

In-process the call is found in a context variable. An isolated extension's
calls carry the call's ``token`` to its host, which sends it back with
``ctx.ui_request``; the kernel looks it up (``turn_for_token``) and honours it
only for that extension and only while the call is live. The token is random
and unregistered once the call ends, so it is good for nothing afterwards.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from core.extensions.contract import TurnContext

__all__ = [
    "ServedCall",
    "served_token",
    "served_turn",
    "serving_extension",
    "turn_for_token",
]


@dataclass(eq=False, slots=True)
class ServedCall:
    """One call into ``ext_id`` serving ``turn``; ``live`` until it returns."""

    ext_id: str
    turn: TurnContext
    live: bool = True
    issued: str | None = None  # the token, once an isolated call asked for one

    def token(self) -> str:
        """A random token standing for this call across the process boundary."""
        if self.issued is None:
            self.issued = secrets.token_urlsafe(18)
            _BY_TOKEN[self.issued] = self
        return self.issued


_SERVED: ContextVar[ServedCall | None] = ContextVar("hearth_served_call", default=None)
_BY_TOKEN: dict[str, ServedCall] = {}


@contextmanager
def serving_extension(ext_id: str, turn: TurnContext | None) -> Iterator[None]:
    """The kernel serves ``turn`` to ``ext_id`` for the block (``None``: no turn,
    so an outer call's turn does not leak into this one)."""
    call = ServedCall(ext_id, turn) if turn is not None else None
    reset = _SERVED.set(call)
    try:
        yield
    finally:
        _SERVED.reset(reset)
        if call is not None:
            call.live = False
            if call.issued is not None:
                _BY_TOKEN.pop(call.issued, None)


def _live_for(ext_id: str, call: ServedCall | None) -> ServedCall | None:
    return call if call is not None and call.live and call.ext_id == ext_id else None


def served_token(ext_id: str) -> str | None:
    """The token of the live call the kernel is making to ``ext_id`` here, if any."""
    call = _live_for(ext_id, _SERVED.get())
    return call.token() if call is not None else None


def served_turn(ext_id: str) -> TurnContext | None:
    """The turn the kernel is serving to in-process ``ext_id`` where this code runs."""
    call = _live_for(ext_id, _SERVED.get())
    return call.turn if call is not None else None


def turn_for_token(ext_id: str, token: str | None) -> TurnContext | None:
    """The turn of the live call ``token`` names, when it is a call to ``ext_id``
    (an isolated extension's host sends the token back)."""
    call = _live_for(ext_id, _BY_TOKEN.get(token)) if token is not None else None
    return call.turn if call is not None else None
