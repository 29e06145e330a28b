"""The OpenAI Responses API wire format (``POST /v1/responses``) on the same turn path.

A request's ``input`` is a string (one user message) or a list of messages
(``{"role", "content"}``, content a string or ``input_text`` / ``output_text``
parts, and in the newest user message ``input_image`` / ``input_file`` parts:
``data:`` URLs, or the ``file_id`` of a file kept for the caller, ADR 0096); a
turn's files come back under ``hearth.files``, as links. Like a chat request,
it journals the newest user message and follows the history for the
conversation. ``instructions``, tools and sampling fields
are ignored — Hearth picks its own. The answer is a ``response`` object with
one assistant ``message``; streamed, the events a client reads:
``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta`` …,
``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done``, ``response.completed`` (or ``error``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import Field

from .openai_shape import (
    MODEL_ID,
    ApiError,
    ContentPart,
    Loose,
    PostProcessorAsk,
    Upload,
    load_json,
    uploads_of,
    validated,
)
from .turns import Delta, Failed, Finished

TEXT_PARTS = ("input_text", "output_text", "text")


class InputMessage(Loose):
    role: str = "user"
    type: str = "message"
    content: str | list[ContentPart] = ""

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type in TEXT_PARTS and p.text)
        return self.content


class ResponsesRequest(Loose):
    model: str = MODEL_ID
    input: str | list[InputMessage] = Field(min_length=1)
    stream: bool = False
    user: str | None = None
    extensions: list[PostProcessorAsk] = Field(default_factory=list)

    def pairs(self) -> list[tuple[str, str]]:
        if isinstance(self.input, str):
            return [("user", self.input)]
        return [(m.role, m.text()) for m in self.input if m.type == "message"]

    def newest_user_text(self) -> str:
        for role, text in reversed(self.pairs()):
            if role == "user":
                if text.strip() or self.newest_user_uploads():
                    return text
                break
        raise ApiError(400, "input: the newest user message has no text", param="input")

    def newest_user_uploads(self) -> tuple[Upload, ...]:
        """The files of the newest user message (``input_image`` / ``input_file``)."""
        if isinstance(self.input, str):
            return ()
        for message in reversed(self.input):
            if message.type == "message" and message.role == "user":
                return uploads_of(message.content)
        return ()


def parse_responses_request(raw: bytes) -> ResponsesRequest:
    return validated(ResponsesRequest, load_json(raw))


def response_usage(usage: dict[str, int] | None) -> dict[str, Any]:
    usage = usage or {}
    return {
        "input_tokens": usage.get("input_tokens", 0),
        "input_tokens_details": {"cached_tokens": usage.get("cached_input_tokens", 0)},
        "output_tokens": usage.get("output_tokens", 0),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.get("total_tokens", 0),
    }


def _message(tag: str, text: str | None) -> dict[str, Any]:
    """The assistant message; ``text`` ``None``: still being written (no content)."""
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "id": f"msg_{tag}",
        "type": "message",
        "role": "assistant",
        "status": "in_progress" if text is None else "completed",
        "content": content,
    }


def response_object(
    tag: str,
    text: str | None,
    usage: dict[str, int] | None,
    extra: dict[str, Any] | None = None,
    *,
    status: str = "completed",
) -> dict[str, Any]:
    """A ``response``; ``text`` ``None``: not answered yet (no output, no usage)."""
    body: dict[str, Any] = {
        "id": f"resp_{tag}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": MODEL_ID,
        "output": [] if text is None else [_message(tag, text)],
        "usage": None if text is None else response_usage(usage),
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
    }
    if extra:
        body["hearth"] = extra
    return body


async def response_events(
    pieces: AsyncIterator[Delta | Finished | Failed], tag: str
) -> AsyncIterator[str]:
    """The streamed events of one response, from the turn's pieces."""
    sequence = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal sequence
        data = {"type": kind, "sequence_number": sequence, **fields}
        sequence += 1
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n"

    item = {"item_id": f"msg_{tag}", "output_index": 0}
    part = {**item, "content_index": 0}
    yield event("response.created", response=response_object(tag, None, None, status="in_progress"))
    yield event(
        "response.in_progress", response=response_object(tag, None, None, status="in_progress")
    )
    yield event("response.output_item.added", output_index=0, item=_message(tag, None))
    empty = {"type": "output_text", "text": "", "annotations": []}
    yield event("response.content_part.added", **part, part=empty)
    shown: list[str] = []
    async for piece in pieces:
        if isinstance(piece, Failed):
            error = piece.error
            yield event("error", code=error.code, message=error.message, param=error.param)
            return
        if isinstance(piece, Delta):
            shown.append(piece.text)
            yield event("response.output_text.delta", **part, delta=piece.text, logprobs=[])
            continue
        if piece.tail:
            yield event("response.output_text.delta", **part, delta=piece.tail, logprobs=[])
        text = piece.shown
        yield event("response.output_text.done", **part, text=text, logprobs=[])
        done_part = {"type": "output_text", "text": text, "annotations": []}
        yield event("response.content_part.done", **part, part=done_part)
        yield event("response.output_item.done", output_index=0, item=_message(tag, text))
        final = response_object(tag, text, piece.usage, piece.extra)
        yield event("response.completed", response=final)
