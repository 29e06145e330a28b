"""A coroutine run up to its first suspension, and the rest of it as an awaitable.

Two hot paths run a coroutine's first step at once because most finish
without waiting: a hook call (``HookCaller``: no timer for a hook that never
waits) and a request served by a plugin host (``RpcPeer``: no task and no
turn of the event loop for a hook or a ping). What did wait goes on through
``Resumed``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["Resumed"]


class Resumed:
    """The rest of a coroutine already run to its first suspension (where it
    yielded ``first``): awaiting this passes every later step, value and
    exception (a cancellation too) straight through to the coroutine."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, step = self._coro, self._first
        while True:
            try:
                sent = yield step
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    step = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    step = coro.send(sent)
                except StopIteration as done:
                    return done.value
