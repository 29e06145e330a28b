"""A fake Telegram Bot API server on 127.0.0.1, for real-HTTP tests through PTB.

``http.server`` in a background thread, so it serves in-process async tests
and kernels started as subprocesses alike (``api_base_url = srv.base_url``)::

    with FakeTelegram() as tg:
        tg.send_update("hi", user_id=42)           # a user writes to the bot
        ...                                        # the kernel polls, answers
        assert tg.chat_texts(42) == ["echo: hi"]   # messages as they look now

Implemented methods: getMe, getUpdates (long poll honouring ``offset`` and
``timeout``), sendMessage (with an inline keyboard), editMessageText (which,
like Telegram, drops a keyboard it is not given again), answerCallbackQuery,
setMyCommands, sendChatAction, deleteMyCommands, deleteMessage (recorded only),
sendPhoto and sendDocument (multipart uploads: the message's ``upload``, its text the caption),
getFile and the file download for what ``send_file_update`` makes a user send; ``press`` makes a user press
an inline button (a ``callback_query`` update). Every call is recorded (``calls``) with its time. Like
Telegram it rejects bad HTML (unknown or unbalanced tags), texts over 4096
characters, empty texts and edits that change nothing; ``fail_next`` scripts
errors such as ``429 retry_after``; ``hang_next`` leaves calls unanswered
(never sent: a kernel killed meanwhile); ``reject_markup`` makes every formatted
send fail; ``on_get_updates`` observes each poll's offset.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from email import policy as email_policy
from email.parser import BytesParser
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

__all__ = ["Call", "Failure", "FakeTelegram", "Upload"]

TOKEN = "123456:TEST-token"
_JSON_FIELDS = {
    "chat_id",
    "message_id",
    "offset",
    "limit",
    "timeout",
    "allowed_updates",
    "commands",
    "reply_markup",
}
_HTML_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "code",
    "pre",
    "a",
    "blockquote",
    "tg-spoiler",
    "span",
    "tg-emoji",
}


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic()


@dataclass(frozen=True)
class Upload:
    """A file a method was sent (``sendPhoto``'s ``photo``, ``sendDocument``'s ``document``)."""

    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True)
class Failure:
    status: int = 429
    description: str = "Too Many Requests: retry after 1"
    retry_after: int | None = 1


@dataclass
class _Message:
    chat_id: int
    message_id: int
    text: str
    parse_mode: str | None
    edits: list[str] = field(default_factory=list)
    reply_markup: dict[str, Any] | None = None
    upload: Upload | None = None  # the photo or document sent (its text is the caption)

    @property
    def buttons(self) -> list[tuple[str, str]]:
        """(label, callback data) of the inline keyboard, row by row."""
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [(b["text"], b.get("callback_data", "")) for row in rows for b in row]


class FakeTelegram:
    """Context manager; ``base_url`` is PTB's ``base_url`` (``.../bot``)."""

    def __init__(self, token: str = TOKEN, *, max_poll_s: float = 2.0) -> None:
        self.token = token
        self.max_poll_s = max_poll_s
        self.reject_markup = False
        self.on_get_updates: Callable[[int | None], None] | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._calls: list[Call] = []
        self._updates: list[dict[str, Any]] = []
        self._confirmed = 0  # updates with a smaller id were acknowledged
        self._next_update = 1000
        self._next_message = 1
        self._messages: list[_Message] = []
        self._failures: dict[str, deque[Failure]] = {}
        self._hangs: dict[str, int] = {}  # method -> how many next calls hang
        self._early: list[tuple[str, str, int]] = []  # see ``reply_before_sent``
        self._files: dict[str, bytes] = {}  # what users sent, by file id (``getFile``)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fake-telegram", daemon=True
        )

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeTelegram:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/bot"

    # ------------------------------------------------------------ scripting

    def send_update(
        self,
        text: str,
        *,
        user_id: int,
        chat_id: int | None = None,
        username: str = "someone",
        chat_type: str | None = None,
    ) -> int:
        """A user writes ``text`` (in a group when ``chat_id`` is another chat than the
        user's own; ``chat_type`` overrides); returns the update id."""
        chat_id = chat_id or user_id
        if chat_type is None:
            chat_type = "private" if chat_id == user_id else "group"
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type != "private":
            chat["title"] = f"Group {chat_id}"
        with self._cond:
            update_id = self._next_update
            self._next_update += 1
            self._updates.append(
                {
                    "update_id": update_id,
                    "message": {
                        "message_id": update_id,
                        "date": int(time.time()),
                        "chat": chat,
                        "from": {
                            "id": user_id,
                            "is_bot": False,
                            "first_name": username.title(),
                            "username": username,
                        },
                        "text": text,
                    },
                }
            )
            self._cond.notify_all()
            return update_id

    def send_file_update(
        self,
        kind: str,
        data: bytes,
        *,
        user_id: int,
        file_name: str = "file.bin",
        mime_type: str = "application/octet-stream",
        caption: str | None = None,
        chat_id: int | None = None,
    ) -> int:
        """A user sends a ``photo``, ``document`` or ``voice`` note (``getFile`` then
        serves ``data``), in a group when ``chat_id`` is another chat; returns the
        update id."""
        with self._cond:
            file_id = f"in{len(self._files) + 1}"
            self._files[file_id] = data
            update_id = self._next_update
            self._next_update += 1
            media: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u{file_id}"}
            message: dict[str, Any] = {
                "message_id": update_id,
                "date": int(time.time()),
                "chat": {"id": chat_id or user_id, "type": "group" if chat_id else "private"},
                "from": {"id": user_id, "is_bot": False, "first_name": "Someone"},
            }
            if kind == "photo":
                message["photo"] = [{**media, "width": 3, "height": 2, "file_size": len(data)}]
            elif kind == "document":
                message["document"] = {**media, "file_name": file_name, "mime_type": mime_type}
            else:
                message["voice"] = {**media, "duration": 1, "mime_type": mime_type}
            if caption is not None:
                message["caption"] = caption
            self._updates.append({"update_id": update_id, "message": message})
            self._cond.notify_all()
            return update_id

    def file_bytes(self, file_path: str) -> bytes | None:
        """What ``GET /file/bot<token>/<file_path>`` serves (``getFile``'s path)."""
        with self._cond:
            return self._files.get(file_path.removeprefix("files/"))

    def press(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        *,
        user_id: int,
        username: str = "someone",
        chat_type: str | None = None,
    ) -> int:
        """``user_id`` presses the inline button with callback ``data`` under message
        ``message_id`` in ``chat_id``; returns the update id."""
        if chat_type is None:
            chat_type = "private" if chat_id == user_id else "group"
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type != "private":
            chat["title"] = f"Group {chat_id}"
        with self._cond:
            shown = [
                m for m in self._messages if (m.chat_id, m.message_id) == (chat_id, message_id)
            ]
            update_id = self._next_update
            self._next_update += 1
            self._updates.append(
                {
                    "update_id": update_id,
                    "callback_query": {
                        "id": f"cq{update_id}",
                        "from": {
                            "id": user_id,
                            "is_bot": False,
                            "first_name": username.title(),
                            "username": username,
                        },
                        "chat_instance": str(chat_id),
                        "data": data,
                        "message": {
                            "message_id": message_id,
                            "date": int(time.time()),
                            "chat": chat,
                            "text": shown[0].text if shown else "",
                        },
                    },
                }
            )
            self._cond.notify_all()
            return update_id

    def unconfirm(self, update_id: int) -> None:
        """Forget acknowledgements from ``update_id`` on: as if they never arrived."""
        with self._cond:
            self._confirmed = min(self._confirmed, update_id)
            self._cond.notify_all()

    def reply_before_sent(self, fragment: str, text: str, *, user_id: int) -> None:
        """When the bot sends a message containing ``fragment``, the user replies
        ``text`` at once, and the bot's sendMessage is answered only once the bot has
        fetched that reply (or after 5 s): a user faster than the network."""
        with self._cond:
            self._early.append((fragment, text, user_id))

    def fail_next(self, method: str, *failures: Failure) -> None:
        """The next calls of ``method`` fail like this, in order."""
        with self._cond:
            self._failures.setdefault(method, deque()).extend(failures or (Failure(),))

    def hang_next(self, method: str, count: int = 1) -> None:
        """The next ``count`` calls of ``method`` are recorded but never answered nor
        carried out (until the fake closes): a send cut by a kernel killed during it."""
        with self._cond:
            self._hangs[method] = self._hangs.get(method, 0) + count

    # ------------------------------------------------------------ inspection

    @property
    def calls(self) -> list[Call]:
        with self._cond:
            return list(self._calls)

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def messages(self, chat_id: int) -> list[_Message]:
        with self._cond:
            return [m for m in self._messages if m.chat_id == chat_id]

    def chat_texts(self, chat_id: int) -> list[str]:
        """The bot's messages in a chat as they read now (after edits)."""
        return [m.text for m in self.messages(chat_id)]

    def wait_until(self, condition: Callable[[], Any], timeout_s: float = 10.0) -> Any:
        """Block until ``condition()`` is truthy (for subprocess tests)."""
        deadline = time.monotonic() + timeout_s
        while not (value := condition()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake Telegram: condition not met within {timeout_s} s")
            time.sleep(0.02)
        return value

    # ------------------------------------------------------------ the API

    def handle(self, token: str, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        with self._cond:
            self._calls.append(Call(method, params, time.monotonic()))
            if token != self.token:
                return 401, _error(401, "Unauthorized")
            if self._hangs.get(method):
                self._hangs[method] -= 1
                while not self._closed:
                    self._cond.wait()
                return 503, _error(503, "the fake closed")
            queued = self._failures.get(method)
            if queued:
                failure = queued.popleft()
                body = _error(failure.status, failure.description)
                if failure.retry_after is not None:
                    body["parameters"] = {"retry_after": failure.retry_after}
                return failure.status, body
        if method == "getUpdates":
            return self._get_updates(params)
        with self._cond:
            api = _METHODS.get(method)
            if api is None:
                return 404, _error(404, "Not Found")
            return api(self, params)

    def _get_updates(self, params: dict[str, Any]) -> tuple[int, Any]:
        offset = params.get("offset")
        if self.on_get_updates is not None:
            self.on_get_updates(offset)
        deadline = time.monotonic() + min(float(params.get("timeout") or 0), self.max_poll_s)
        with self._cond:
            if offset is not None and int(offset) > self._confirmed:
                self._confirmed = int(offset)
                self._cond.notify_all()  # a sendMessage held by ``reply_before_sent``
            while True:
                pending = [u for u in self._updates if u["update_id"] >= self._confirmed]
                remaining = deadline - time.monotonic()
                if pending or remaining <= 0 or self._closed:
                    return 200, _ok(pending)
                self._cond.wait(remaining)

    def _get_me(self, params: dict[str, Any]) -> tuple[int, Any]:
        return 200, _ok(
            {"id": 123456, "is_bot": True, "first_name": "Hearth", "username": "hearth_test_bot"}
        )

    def _send_message(self, params: dict[str, Any]) -> tuple[int, Any]:
        text, mode = str(params.get("text", "")), params.get("parse_mode")
        problem = _check_text(text, mode, self.reject_markup)
        if problem:
            return 400, _error(400, problem)
        message = _Message(
            int(params["chat_id"]), self._next_message, text, mode, [], params.get("reply_markup")
        )
        self._next_message += 1
        self._messages.append(message)
        for early in [e for e in self._early if e[0] in text]:
            self._early.remove(early)
            update_id = self.send_update(early[1], user_id=early[2])
            deadline = time.monotonic() + 5.0
            while self._confirmed <= update_id and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
        return 200, _ok(_message_json(message))

    def _send_media(self, params: dict[str, Any], field_name: str) -> tuple[int, Any]:
        upload = params.get(field_name)
        if not isinstance(upload, Upload) or not upload.data:
            return 400, _error(400, f"Bad Request: there is no {field_name} in the request")
        caption = str(params.get("caption", ""))
        if len(caption) > 1024:
            return 400, _error(400, "Bad Request: message caption is too long")
        message = _Message(int(params["chat_id"]), self._next_message, caption, None, [])
        message.upload = upload
        self._next_message += 1
        self._messages.append(message)
        body = _message_json(message)
        media = {"file_id": f"f{message.message_id}", "file_unique_id": f"u{message.message_id}"}
        if field_name == "photo":
            body["photo"] = [{**media, "width": 1, "height": 1}]
        else:
            body["document"] = {**media, "file_name": upload.filename}
        body["caption"] = caption
        body.pop("text")
        return 200, _ok(body)

    def _send_photo(self, params: dict[str, Any]) -> tuple[int, Any]:
        return self._send_media(params, "photo")

    def _send_document(self, params: dict[str, Any]) -> tuple[int, Any]:
        return self._send_media(params, "document")

    def _edit_message_text(self, params: dict[str, Any]) -> tuple[int, Any]:
        text, mode = str(params.get("text", "")), params.get("parse_mode")
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        found = [m for m in self._messages if (m.chat_id, m.message_id) == (chat_id, message_id)]
        if not found:
            return 400, _error(400, "Bad Request: message to edit not found")
        problem = _check_text(text, mode, self.reject_markup)
        if problem:
            return 400, _error(400, problem)
        message = found[0]
        markup = params.get("reply_markup")
        if (text, mode, markup) == (message.text, message.parse_mode, message.reply_markup):
            return 400, _error(400, "Bad Request: message is not modified")
        message.edits.append(text)
        message.text, message.parse_mode, message.reply_markup = text, mode, markup
        return 200, _ok(_message_json(message))

    def _get_file(self, params: dict[str, Any]) -> tuple[int, Any]:
        file_id = str(params.get("file_id"))
        data = self._files.get(file_id)
        if data is None:
            return 400, _error(400, "Bad Request: invalid file_id")
        return 200, _ok(
            {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "file_size": len(data),
                "file_path": f"files/{file_id}",
            }
        )

    def _true(self, params: dict[str, Any]) -> tuple[int, Any]:
        return 200, _ok(True)


_METHODS: dict[str, Callable[[FakeTelegram, dict[str, Any]], tuple[int, Any]]] = {
    "getMe": FakeTelegram._get_me,
    "sendMessage": FakeTelegram._send_message,
    "editMessageText": FakeTelegram._edit_message_text,
    "sendPhoto": FakeTelegram._send_photo,
    "getFile": FakeTelegram._get_file,
    "sendDocument": FakeTelegram._send_document,
    "setMyCommands": FakeTelegram._true,
    "deleteMyCommands": FakeTelegram._true,
    "sendChatAction": FakeTelegram._true,
    "answerCallbackQuery": FakeTelegram._true,
    "deleteMessage": FakeTelegram._true,
}


def visible_text(text: str, mode: str | None) -> str:
    """What the user sees: tags stripped and entities decoded for HTML."""
    if mode != "HTML":
        return text
    parser = _TagChecker()
    parser.feed(text)
    parser.close()
    return "".join(parser.visible)


def _check_text(text: str, mode: str | None, reject_markup: bool) -> str | None:
    if mode is not None and reject_markup:
        return "Bad Request: can't parse entities: scripted rejection"
    if mode not in (None, "HTML"):
        return f"Bad Request: unsupported parse_mode {mode}"
    if mode == "HTML":
        checker = _TagChecker()
        checker.feed(text)
        checker.close()
        if checker.problem or checker.stack:
            problem = (
                checker.problem or f"can't find end tag corresponding to <{checker.stack[-1]}>"
            )
            return f"Bad Request: can't parse entities: {problem}"
        text = "".join(checker.visible)
    if not text.strip():
        return "Bad Request: message text is empty"
    if len(text.encode("utf-16-le")) // 2 > 4096:
        return "Bad Request: message is too long"
    return None


class _TagChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.visible: list[str] = []
        self.problem: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HTML_TAGS:
            self.problem = self.problem or f"unsupported start tag <{tag}>"
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problem = self.problem or f"unexpected end tag </{tag}>"
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.visible.append(data)


def _ok(result: Any) -> dict[str, Any]:
    return {"ok": True, "result": result}


def _error(code: int, description: str) -> dict[str, Any]:
    return {"ok": False, "error_code": code, "description": description}


def _message_json(message: _Message) -> dict[str, Any]:
    return {
        "message_id": message.message_id,
        "date": int(time.time()),
        "chat": {"id": message.chat_id, "type": "private"},
        "text": html.unescape(message.text) if message.parse_mode else message.text,
    }


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        """``/file/bot<token>/<file_path>``: a file a user sent."""
        fake: FakeTelegram = self.server.fake  # type: ignore[attr-defined]
        prefix, path = f"/file/bot{fake.token}/", unquote(self.path)
        data = fake.file_bytes(path[len(prefix) :]) if path.startswith(prefix) else None
        self.send_response(200 if data is not None else 404)
        body = data if data is not None else b"not found"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        content_type = self.headers.get("Content-Type") or ""
        if content_type.startswith("multipart/form-data"):
            params = _decode_multipart(raw, content_type)
        else:
            params = _decode(raw.decode(), content_type)
        parts = self.path.strip("/").split("/")
        if len(parts) != 2 or not parts[0].startswith("bot"):
            status, body = 404, _error(404, "Not Found")
        else:
            fake: FakeTelegram = self.server.fake  # type: ignore[attr-defined]
            status, body = fake.handle(parts[0][3:], parts[1], params)
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except ConnectionError:  # the client gave up (a cancelled long poll)
            pass


def _decode_multipart(raw: bytes, content_type: str) -> dict[str, Any]:
    """A multipart upload (sendPhoto, sendDocument): fields as text, files as
    ``Upload``s."""
    message = BytesParser(policy=email_policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    params: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is not None:
            params[str(name)] = Upload(filename, part.get_content_type(), payload)
            continue
        value: Any = payload.decode()
        if name in _JSON_FIELDS:
            try:
                value = json.loads(value)
            except ValueError:
                pass
        params[str(name)] = value
    return params


def _decode(raw: str, content_type: str) -> dict[str, Any]:
    if "json" in content_type:
        return dict(json.loads(raw or "{}"))
    params: dict[str, Any] = {}
    for key, values in parse_qs(raw, keep_blank_values=True).items():
        value: Any = values[-1]
        if key in _JSON_FIELDS:
            try:
                value = json.loads(value)
            except ValueError:
                pass
        params[key] = value
    return params
