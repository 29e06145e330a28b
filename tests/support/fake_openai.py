"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests.

Runs ``http.server`` in a background thread, so it serves both in-process async
tests and a kernel started as a subprocess (point a provider's ``base_url`` at
``srv.base_url``)::

    with FakeOpenAIServer() as srv:
        srv.script(ToolCall("current_time", {}), "It is noon.")
        ...  # the kernel / openai client talks to srv.base_url
        assert srv.requests[1]["messages"][-1]["role"] == "tool"

When the script is empty it answers ``echo: <last user message>``. Every
``/chat/completions`` request body is recorded in ``srv.requests``;
``/v1/audio/transcriptions`` answers ``srv.transcript`` and records the upload
in ``srv.transcriptions``.
Run ``python -m tests.fake_openai`` to serve until Ctrl-C (prints the base URL).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from email import policy as email_policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Failure", "FakeOpenAIServer", "Hang", "ToolCall", "models_section"]

MODEL_IDS = ("fake-model", "fake-model-mini")


@dataclass(frozen=True)
class ToolCall:
    """Script item: the model calls ``name`` with ``arguments`` (a dict or a JSON string)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    call_id: str | None = None

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Failure:
    """Script item: answer with an HTTP error instead of a completion."""

    status: int = 500
    message: str = "scripted failure"
    retry_after: float | None = None  # sent as the ``retry-after`` header (a 429's)


@dataclass(frozen=True)
class Hang:
    """Script item: answer nothing for ``seconds`` (a client's timeout ends it first),
    then drop the connection."""

    seconds: float = 60.0


ScriptItem = str | ToolCall | Failure | Hang


class FakeOpenAIServer:
    """Context manager; ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __init__(self, *, delay_s: float = 0.0, chunk_delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.chunk_delay_s = chunk_delay_s  # streamed answers: a pause before each chunk
        # when set, each streamed chunk waits for one release: a test paces a stream
        # by what it has seen arrive, not by a delay that load can swallow
        self.chunk_gate: threading.Semaphore | None = None
        self._lock = threading.RLock()
        self._script: deque[ScriptItem] = deque()
        self._requests: list[dict[str, Any]] = []
        # the kernel's prompt warm-ups (``X-Hearth-Warm``): answered, never scripted
        self._warmups: list[dict[str, Any]] = []
        self.slots: dict[str, int] | None = None  # llama.cpp's slot files, when offered
        # as llama.cpp while it loads its model: 503 on /health and on every completion
        self.loading = False
        self.health_checks = 0
        self.slot_calls: list[tuple[str, str]] = []  # (action, filename)
        self._timings: list[tuple[str, float]] = []
        # ``/v1/audio/transcriptions``: each upload's fields (the file as bytes), and the text
        self.transcriptions: list[dict[str, Any]] = []
        self.transcript = "fake transcript"
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fake-openai", daemon=True
        )

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --------------------------------------------------------------- script

    def script(self, *items: ScriptItem) -> None:
        """Queue answers, one per completion request, in order."""
        with self._lock:
            self._script.extend(items)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of every ``POST /chat/completions`` so far (copies)."""
        with self._lock:
            return [json.loads(json.dumps(r)) for r in self._requests]

    @property
    def timings(self) -> list[tuple[str, float]]:
        """(last user message, seconds from its body's first byte read to its last
        byte sent) per completion request: the model server's share of a turn (a
        real one reads and parses the request in its own process), for benchmarks."""
        with self._lock:
            return list(self._timings)

    @property
    def warmups(self) -> list[dict[str, Any]]:
        """Bodies of the prompt warm-ups the kernel sent (ADR 0089), apart from the
        completions a test scripts: a warm-up takes no scripted answer."""
        with self._lock:
            return [json.loads(json.dumps(r)) for r in self._warmups]

    def wait_for_requests(self, count: int, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """Block until ``count`` completion requests arrived (for subprocess tests)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self._requests) >= count:
                    return self.requests
            time.sleep(0.01)
        raise TimeoutError(f"fake OpenAI server: {count} request(s) not seen in {timeout_s}s")

    def _next(self, body: dict[str, Any]) -> ScriptItem:
        with self._lock:
            self._requests.append(body)
            if self._script:
                return self._script.popleft()
        return f"echo: {_last_user_text(body)}"


def closed_port_url() -> str:
    """A model server address on this machine where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def models_section(base_url: str, **provider: Any) -> dict[str, Any]:
    """The ``models`` settings section with the fake server at ``base_url`` as the
    default model (``provider`` adds to the provider's fields, e.g. ``max_retries``)."""
    return {
        "default": {"provider": "local", "model": "fake-model"},
        "providers": {
            "local": {
                "type": "openai_compatible",
                "base_url": base_url,
                "api_key": "x",
                **provider,
            }
        },
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # benchmarks open a hundred connections at once
    fake: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, cancelled run) is normal here, not a test failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers do (streams are chunked)
    disable_nagle_algorithm = True  # small SSE writes go out at once

    @property
    def fake(self) -> FakeOpenAIServer:
        return self.server.fake

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return None

    def do_GET(self) -> None:
        if self.path == "/health":
            with self.fake._lock:
                self.fake.health_checks += 1
            loading = self.fake.loading
            body = _error_body("Loading model") if loading else {"status": "ok"}
            self._send_json(503 if loading else 200, body)
            return
        if self.path.rstrip("/") != "/v1/models":
            self._send_json(404, _error_body(f"no route GET {self.path}"))
            return
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in MODEL_IDS]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        started = time.perf_counter()  # reading and parsing the body is the server's work too
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") == "/v1/audio/transcriptions":
            self._transcribe(raw)
            return
        body = json.loads(raw or b"{}")
        if self.path.startswith("/slots/"):
            self._slot(body)
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, _error_body(f"no route POST {self.path}"))
            return
        if self.fake.loading:
            self._send_json(503, _error_body("Loading model"))
            return
        if self.headers.get("X-Hearth-Warm"):
            with self.fake._lock:
                self.fake._warmups.append(body)
            self._send_json(200, _completion(body, "."))
            return
        item = self.fake._next(body)
        if self.fake.delay_s:
            time.sleep(self.fake.delay_s)
        if isinstance(item, Hang):
            time.sleep(item.seconds)
            self.close_connection = True
            return
        if isinstance(item, Failure):
            retry = {} if item.retry_after is None else {"retry-after": f"{item.retry_after:g}"}
            self._send_json(item.status, _error_body(item.message), retry)
        elif body.get("stream"):
            self._send_stream(body, item)
        else:
            self._send_json(200, _completion(body, item))
        with self.fake._lock:
            self.fake._timings.append((_last_user_text(body), time.perf_counter() - started))

    def _transcribe(self, raw: bytes) -> None:
        """``/v1/audio/transcriptions``: the multipart upload recorded, ``transcript``
        answered (``{"text": ...}``)."""
        message = BytesParser(policy=email_policy.HTTP).parsebytes(
            f"Content-Type: {self.headers.get('Content-Type')}\r\n\r\n".encode() + raw
        )
        fields: dict[str, Any] = {}
        for part in message.iter_parts():
            name = str(part.get_param("name", header="content-disposition"))
            payload = part.get_payload(decode=True) or b""
            fields[name] = payload if part.get_filename() else payload.decode()
        with self.fake._lock:
            self.fake.transcriptions.append(fields)
        self._send_json(200, {"text": self.fake.transcript})

    def _slot(self, body: dict[str, Any]) -> None:
        """llama.cpp's ``POST /slots/0?action=save|restore`` (404 unless ``slots`` is set)."""
        action = self.path.partition("action=")[2]
        filename = str(body.get("filename"))
        with self.fake._lock:
            self.fake.slot_calls.append((action, filename))
            slots = self.fake.slots
            if slots is not None and action == "save":
                slots[filename] = slots.get(filename, 0) + 1
        if slots is None:
            self._send_json(501, _error_body("This server does not support slot save/restore"))
        elif action == "restore" and filename not in slots:
            self._send_json(400, _error_body(f"file {filename} not found"))
        else:
            self._send_json(200, {"id_slot": 0, "filename": filename})

    # ------------------------------------------------------------- sending

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, body: dict[str, Any], item: str | ToolCall) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in _stream_chunks(body, item):
            if self.fake.chunk_delay_s:
                time.sleep(self.fake.chunk_delay_s)
            gate = self.fake.chunk_gate
            if gate is not None and not gate.acquire(timeout=60):
                raise TimeoutError("fake OpenAI server: a gated chunk was never released")
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # the last chunk: the response ends, the connection stays

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


# ------------------------------------------------------------------ payloads


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _usage(body: dict[str, Any], item: str | ToolCall) -> dict[str, int]:
    prompt = max(1, len(json.dumps(body.get("messages", []))) // 4)
    completion = max(1, len(item if isinstance(item, str) else item.arguments_json()) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _tool_call_json(item: ToolCall) -> dict[str, Any]:
    return {
        "id": item.call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": item.name, "arguments": item.arguments_json()},
    }


def _envelope(body: dict[str, Any], obj: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": obj,
        "created": int(time.time()),
        "model": body.get("model", MODEL_IDS[0]),
    }


def _completion(body: dict[str, Any], item: str | ToolCall) -> dict[str, Any]:
    if isinstance(item, ToolCall):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [_tool_call_json(item)],
        }
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": item}, "stop"
    return {
        **_envelope(body, "chat.completion"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(body, item),
    }


def _stream_chunks(body: dict[str, Any], item: str | ToolCall) -> list[dict[str, Any]]:
    envelope = _envelope(body, "chat.completion.chunk")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **envelope,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if isinstance(item, ToolCall):
        call = _tool_call_json(item)
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        first = {**call, "function": {"name": item.name, "arguments": arguments[:half]}}
        chunks.append(chunk({"tool_calls": [{"index": 0, **first}]}))
        rest = {"index": 0, "function": {"arguments": arguments[half:]}}
        chunks.append(chunk({"tool_calls": [rest]}))
        chunks.append(chunk({}, "tool_calls"))
    else:
        words = item.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        chunks.extend(chunk({"content": piece}) for piece in pieces if piece)
        chunks.append(chunk({}, "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**envelope, "choices": [], "usage": _usage(body, item)})
    return chunks


def _error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "code": None}}


if __name__ == "__main__":
    with FakeOpenAIServer() as server:
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
