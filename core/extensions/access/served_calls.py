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
from contextvars import ContextVar, Token

from core.extensions.contract import TurnContext

__all__ = [
    "ServedCall",
    "served_token",
    "served_turn",
    "serving_extension",
    "turn_for_token",
]


class ServedCall:
    """One call into ``ext_id`` serving ``turn``, as a context manager: live from
    entering the block until it is left (a class, not ``@contextmanager``: it wraps
    every hook call, and a generator costs microseconds there)."""

    __slots__ = ("_reset", "ext_id", "issued", "live", "turn")

    def __init__(self, ext_id: str, turn: TurnContext | None) -> None:
        self.ext_id = ext_id
        self.turn = turn  # ``None``: no turn, so an outer call's does not leak into this one
        self.live = False
        self.issued: str | None = None  # the token, once an isolated call asked for one
        self._reset: Token[ServedCall | None] | None = None

    def __enter__(self) -> ServedCall:
        self.live = self.turn is not None
        self._reset = _SERVED.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.live = False
        if self._reset is not None:
            _SERVED.reset(self._reset)
        if self.issued is not None:
            _BY_TOKEN.pop(self.issued, None)

    def token(self) -> str:
        """A random token standing for this call across the process boundary."""
        if self.issued is None:
            self.issued = secrets.token_urlsafe(18)
            _BY_TOKEN[self.issued] = self
        return self.issued


_SERVED: ContextVar[ServedCall | None] = ContextVar("hearth_served_call", default=None)
_BY_TOKEN: dict[str, ServedCall] = {}


def serving_extension(ext_id: str, turn: TurnContext | None) -> ServedCall:
    """The kernel serves ``turn`` to ``ext_id`` for the ``with`` block (``None``: no
    turn, so an outer call's turn does not leak into this one)."""
    return ServedCall(ext_id, turn)


def _live_for(ext_id: str, call: ServedCall | None) -> ServedCall | None:
    if call is None or not call.live or call.ext_id != ext_id or call.turn is None:
        return None
    return call


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
