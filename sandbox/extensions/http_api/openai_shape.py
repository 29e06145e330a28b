"""The OpenAI Chat Completions wire format: requests in, completions, chunks and errors out.

Only what Hearth uses is read from a request (``messages``, ``stream``,
``user``); other fields clients send (temperature, tools, …) are ignored,
since Hearth picks its own model, tools and history. Of ``messages`` only
the newest user message is taken: Hearth keeps the conversation itself.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MODEL_ID = "hearth"


class ApiError(Exception):
    """An answer in the OpenAI error shape: ``{"error": {message, type, param, code}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Loose):
    type: str
    text: str | None = None


class ChatMessage(_Loose):
    role: str
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type == "text" and p.text)
        return self.content or ""


class ChatRequest(_Loose):
    model: str = MODEL_ID
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    user: str | None = None

    def newest_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                text = message.text()
                if text.strip():
                    return text
                break
        raise ApiError(400, "messages: the newest user message has no text", param="messages")


def parse_chat_request(raw: bytes) -> ChatRequest:
    """The request, or ``ApiError`` 400 naming the field at fault."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(400, f"{where}: {first['msg']}", param=where) from None


def completion(ident: str, text: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A whole ``chat.completion`` (no token counts: Hearth's model calls are its own);
    ``extra`` goes under the field ``hearth`` (post-processor results)."""
    body = {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }
    if extra:
        body["hearth"] = extra
    return body


def chunk_event(
    ident: str,
    delta: dict[str, Any],
    finish: str | None = None,
    extra: dict[str, Any] | None = None,
) -> str:
    """One SSE event carrying a ``chat.completion.chunk`` (``extra`` as in ``completion``)."""
    chunk: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if extra:
        chunk["hearth"] = extra
    return f"data: {json.dumps(chunk)}\n\n"


def error_event(error: ApiError) -> str:
    """An error in the middle of a stream (the ``openai`` client raises it)."""
    return f"data: {json.dumps(error.body())}\n\n"


DONE_EVENT = "data: [DONE]\n\n"


def model_object(created: int) -> dict[str, Any]:
    return {"id": MODEL_ID, "object": "model", "created": created, "owned_by": "hearth"}
