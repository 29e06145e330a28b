"""The OpenAI client the model router builds: the conversation goes out as the SDK built it.

Before sending a request the openai library walks its whole body against the
parameter types (``async_maybe_transform``) to rename aliased keys and format
dates and files. For the conversation it tries every variant of the message
union on every message: about 0.3–0.5 ms a message on a 2-core machine, so a
turn cost more the longer its conversation (``bench/long_conversation.py``:
the 250th turn of one conversation 2.75× the 10th, the walk most of the
difference; issue 42, ADR 0078). The chat message and Responses input types
declare no alias and no format, and the SDK hands over plain JSON
(``_to_dump_compatible``), so for the conversation the walk only returns an
equal copy. This client hands the list over in ``extra_body``, which the
library merges into the JSON after the walk at the same key's position: the
bytes sent are the same; every other field still takes the library's path.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from openai import AsyncOpenAI
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.resources.responses import AsyncResponses

__all__ = ["ConversationOpenAI"]


def _carried(key: str, value: object, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with a plain-list ``value`` moved from ``key`` to ``extra_body``.

    An ``extra_body`` entry of the same name still wins, as it did over the body.
    Anything but a list (an iterator, a string input) keeps the library's path.
    """
    if not isinstance(value, list):
        return {**kwargs, key: value}
    extra: Mapping[str, object] = kwargs.get("extra_body") or {}
    # the library's body keeps an empty list in the key's place; the merge fills it
    return {**kwargs, key: [], "extra_body": {key: value, **extra}}


class _Completions(AsyncCompletions):
    async def create(self, **kwargs: Any) -> Any:  # type: ignore[override]
        return await super().create(**_carried("messages", kwargs.pop("messages"), kwargs))


class _Chat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class _Responses(AsyncResponses):
    async def create(self, **kwargs: Any) -> Any:  # type: ignore[override]
        if "input" not in kwargs:
            return await super().create(**kwargs)
        return await super().create(**_carried("input", kwargs.pop("input"), kwargs))


class ConversationOpenAI(AsyncOpenAI):
    """``AsyncOpenAI`` whose chat and Responses calls skip the per-message walk."""

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)

    @cached_property
    def responses(self) -> AsyncResponses:
        return _Responses(self)
