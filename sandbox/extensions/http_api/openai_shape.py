"""The OpenAI Chat Completions wire format: requests in, completions, chunks and errors out.

Only what Hearth uses is read from a request (``messages``, ``stream``,
``stream_options.include_usage``, ``user``, ``extensions``: post-processors
to run on the answer, as ``#name:param`` tokens in the text would); other fields clients send
(temperature, tools, …) are ignored, since Hearth picks its own model, tools
and history. Of ``messages`` the newest user message is journaled: Hearth
keeps the conversation itself; the others only say which conversation a
request continues when it names none (``threads``). ``usage`` counts the
tokens of the turn's model calls (zero for a command's answer).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MODEL_ID = "hearth"
POST_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")  # as the kernel reads them
POST_PARAM = re.compile(r"^[\w-]+(?:\.[\w-]+)*$")


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


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


_M = TypeVar("_M", bound=BaseModel)


class ImageUrl(Loose):
    url: str


class FileData(Loose):
    """A chat ``file`` part's ``file``: the content as a ``data:`` URL, or a kept id."""

    filename: str | None = None
    file_data: str | None = None
    file_id: str | None = None


@dataclass(frozen=True, slots=True)
class Upload:
    """A file a request's newest user message carries (ADR 0096): ``url``, a
    ``data:`` URL (``image``: it must be a picture), with the ``name`` a document
    was sent under; or ``file_id``, a file already kept for the caller."""

    url: str = ""
    name: str | None = None
    image: bool = False
    file_id: str | None = None


class ContentPart(Loose):
    type: str
    text: str | None = None
    # ``image_url`` (chat): ``{url}`` or a string; ``input_image`` (Responses): a string
    image_url: ImageUrl | str | None = None
    file: FileData | None = None  # chat ``file`` parts
    filename: str | None = None  # Responses ``input_file`` parts
    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None

    @property
    def upload(self) -> Upload | None:
        """The file the part carries (``None``: a text part); a part naming a file
        elsewhere (``file_url``, an image link) is refused when kept."""
        if self.type in ("image_url", "input_image"):
            if self.file_id:
                return Upload(file_id=self.file_id, image=True)
            url = self.image_url if isinstance(self.image_url, str) else None
            url = self.image_url.url if isinstance(self.image_url, ImageUrl) else url
            return Upload(url or "", image=True)
        if self.type == "input_file":
            if self.file_id:
                return Upload(file_id=self.file_id)
            return Upload(self.file_data or self.file_url or "", self.filename)
        if self.type == "file" and self.file is not None:
            if self.file.file_id:
                return Upload(file_id=self.file.file_id)
            return Upload(self.file.file_data or "", self.file.filename)
        return None


def uploads_of(content: str | list[ContentPart] | None) -> tuple[Upload, ...]:
    """The files of one message's content parts."""
    if not isinstance(content, list):
        return ()
    return tuple(upload for part in content if (upload := part.upload) is not None)


class ChatMessage(Loose):
    role: str
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type == "text" and p.text)
        return self.content or ""


class PostProcessorAsk(Loose):
    """One entry of ``extensions``: a post-processor the client asks for by its
    activation name, with a param (else the activation's default)."""

    name: str
    param: str | None = None


class StreamOptions(Loose):
    include_usage: bool = False


class ChatRequest(Loose):
    model: str = MODEL_ID
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    extensions: list[PostProcessorAsk] = Field(default_factory=list)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def pairs(self) -> list[tuple[str, str]]:
        return [(m.role, m.text()) for m in self.messages]

    def newest_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                text = message.text()
                if text.strip() or self.newest_user_uploads():
                    return text
                break
        raise ApiError(400, "messages: the newest user message has no text", param="messages")

    def newest_user_uploads(self) -> tuple[Upload, ...]:
        """The files of the newest user message (``image_url`` and ``file`` parts)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return uploads_of(message.content)
        return ()


@dataclass(frozen=True, slots=True)
class Ask:
    """One request for a turn, whichever endpoint it came to: the conversation it
    names (``None``: follow its history), its messages as (role, text), the
    newest user message's text, the caller's ``Idempotency-Key``; ``stream``: the
    client reads the reply as it is generated (else the kernel need not stream it);
    ``caller``: who sent it (``TokenCheck.caller``)."""

    conversation: str | None
    messages: list[tuple[str, str]]
    text: str
    idempotency_key: str | None
    stream: bool = False
    caller: str = ""
    extensions: tuple[tuple[str, str | None], ...] = ()
    uploads: tuple[Upload, ...] = ()  # the newest user message's files (ADR 0096)

    @property
    def body_hash(self) -> str:
        """What the request asks (its conversation, messages, post-processors and
        files), hashed: an idempotency key is bound to it."""
        asked: list[Any] = [self.conversation, self.messages]
        if self.extensions:
            asked.append(self.extensions)
        if self.uploads:
            asked.append(
                [
                    [u.name, u.file_id, hashlib.sha256(u.url.encode()).hexdigest()]
                    for u in self.uploads
                ]
            )
        data = json.dumps(asked, ensure_ascii=False)
        return hashlib.sha256(data.encode()).hexdigest()

    @property
    def retry_key(self) -> str:
        """The same request sent again by the same caller has the same key."""
        return hashlib.sha256(f"{self.caller}\0{self.body_hash}".encode()).hexdigest()


def post_processor_asks(asks: list[PostProcessorAsk]) -> tuple[tuple[str, str | None], ...]:
    """``extensions`` as ``(name, param)`` pairs, each a token the kernel reads
    (``#name:param``); a name or param it could not read is refused (400)."""
    found: list[tuple[str, str | None]] = []
    for index, ask in enumerate(asks):
        name = ask.name.strip().lstrip("#").lower()
        if not POST_NAME.match(name):
            raise ApiError(
                400,
                f"extensions[{index}].name: {ask.name!r} is not a post-processor name "
                "(lowercase letters, digits, _ and -, at most 32)",
                param=f"extensions[{index}].name",
            )
        param = ask.param if ask.param not in (None, "") else None
        if param is not None and not POST_PARAM.match(param):
            raise ApiError(
                400,
                f"extensions[{index}].param: {param!r} is not a param (letters, digits, "
                "_, - and inner dots)",
                param=f"extensions[{index}].param",
            )
        if all(known != name for known, _ in found):
            found.append((name, param))
    return tuple(found)


def key_reused(key: str) -> ApiError:
    """422: ``key`` was sent before with another body (payment APIs answer so)."""
    return ApiError(
        422,
        f"Idempotency-Key {key!r} was used for a different request (other messages or "
        "conversation); a retry must send the same body, a new request a new key",
        code="idempotency_key_reused",
        param="Idempotency-Key",
    )


def message_too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"the message is larger than {limit} bytes of JSON "
        "(extensions.http_api.max_message_bytes; the event bus keeps events.max_payload_bytes)",
        code="message_too_large",
        param="messages",
    )


def load_json(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or ``ApiError`` 400 saying why not."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from None
    except RecursionError:  # [[[[…]]]] thousands deep: Python's parser gives up
        raise ApiError(400, "the body's JSON is nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def parse_chat_request(raw: bytes) -> ChatRequest:
    """The request, or ``ApiError`` 400 naming the field at fault."""
    return validated(ChatRequest, load_json(raw))


def validated(model: type[_M], body: dict[str, Any]) -> _M:
    """``body`` as ``model``, or ``ApiError`` 400 naming the first field at fault."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(400, f"{where}: {first['msg']}", param=where) from None


def chat_usage(usage: dict[str, int] | None) -> dict[str, Any]:
    """A turn's tokens (``None``: none counted) in Chat Completions' ``usage`` shape."""
    usage = usage or {}
    return {
        "prompt_tokens": usage.get("input_tokens", 0),
        "completion_tokens": usage.get("output_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "prompt_tokens_details": {"cached_tokens": usage.get("cached_input_tokens", 0)},
    }


def completion(
    ident: str,
    text: str,
    extra: dict[str, Any] | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A whole ``chat.completion`` with the turn's ``usage``; ``extra`` goes under the
    field ``hearth`` (post-processor results, questions waiting)."""
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
        "usage": chat_usage(usage),
    }
    if extra:
        body["hearth"] = extra
    return body


def chunk_event(
    ident: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    extra: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
) -> str:
    """One SSE event carrying a ``chat.completion.chunk`` (``extra`` as in
    ``completion``); ``delta`` ``None``: the closing chunk with no choices and the
    ``usage`` (``stream_options.include_usage``)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    chunk: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    if extra:
        chunk["hearth"] = extra
    return f"data: {json.dumps(chunk)}\n\n"


def error_event(error: ApiError) -> str:
    """An error in the middle of a stream (the ``openai`` client raises it)."""
    return f"data: {json.dumps(error.body())}\n\n"


DONE_EVENT = "data: [DONE]\n\n"


def model_object(created: int) -> dict[str, Any]:
    return {"id": MODEL_ID, "object": "model", "created": created, "owned_by": "hearth"}
