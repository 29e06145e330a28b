"""Optional channel protocols beyond seed 002's (re-exported by ``contract``).

``InteractiveChannel`` (ADR 0021): the channel renders questions itself —
approvals, and extensions' ``confirm`` / ``select`` / ``input`` requests.

``USAGE_KEYWORD``: a channel whose ``send_to_user`` or ``on_stream_end`` takes
a keyword parameter ``usage`` gets, with the reply to a turn, the tokens its
model calls used — ``{"input_tokens", "cached_input_tokens", "output_tokens",
"total_tokens", "requests"}``, summed over the turn (the HTTP API answers with
it). Channels without the parameter are called as before (``takes_usage``).

``TURN_CANCEL_TOPIC``: a channel whose user stops the turn being answered
(Ctrl-C in the terminal) emits ``{"channel_id": <its id>, "user_id": ...}``
there (needs ``user_messages``); the turn ends with the reply ``(cancelled)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from core.events.topics import SystemTopics
from core.extensions.contract.data import UserRequest

__all__ = ["TURN_CANCEL_TOPIC", "USAGE_KEYWORD", "InteractiveChannel", "takes_usage"]

TURN_CANCEL_TOPIC = SystemTopics.TURN_CANCEL
USAGE_KEYWORD = "usage"


def takes_usage(method: Callable[..., Any]) -> bool:
    """Whether a channel's reply method accepts ``usage=`` (a parameter of that name;
    ``**kwargs`` alone does not count: a channel says it wants the numbers)."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    found = parameters.get(USAGE_KEYWORD)
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)


@runtime_checkable
class InteractiveChannel(Protocol):
    """A channel that can put a question to the user (an approval, a confirm, a
    choice, a line of text) and show how it ended (ADR 0021).

    ``ask_user`` renders ``request`` to ``user_id`` (buttons, an inline prompt);
    the user's answer goes back through ``ExtensionContext.answer_request``.
    ``close_request`` says the question is over — answered, timed out or
    dropped — with ``outcome`` in plain words (edit the message, print a line).
    """

    async def ask_user(self, user_id: str, request: UserRequest) -> None: ...
    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None: ...
