"""A tiny OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1, for tests.

Vectors are deterministic "concept" embeddings: words listed in ``CONCEPTS``
share a dimension with their synonyms (car, automobile, vehicle), every other
word is hashed into the remaining dimensions with a small weight. So texts
with synonyms are close although they share no word — what full-text search
cannot see. ``srv.requests`` records each request (body and headers);
``srv.fail = True`` makes it answer HTTP 500.
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CONCEPTS", "DIMS", "FakeEmbeddingServer", "embed"]

DIMS = 64
CONCEPTS = {
    "car": 0,
    "automobile": 0,
    "vehicle": 0,
    "sedan": 0,
    "doctor": 1,
    "physician": 1,
    "gp": 1,
    "dog": 2,
    "puppy": 2,
    "hound": 2,
}
_FIRST_FREE = 8


def embed(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in re.findall(r"\w+", text.casefold()):
        if word in CONCEPTS:
            vector[CONCEPTS[word]] += 1.0
        else:
            slot = _FIRST_FREE + zlib.crc32(word.encode()) % (DIMS - _FIRST_FREE)
            vector[slot] += 0.15
    return vector


class FakeEmbeddingServer:
    """Context manager; ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(
                    {"path": self.path, "body": body, "headers": dict(self.headers)}
                )
                if self.path != "/v1/embeddings":
                    return self._answer(404, {"error": {"message": f"no route {self.path}"}})
                if server.fail:
                    return self._answer(500, {"error": {"message": "scripted failure"}})
                inputs = body.get("input")
                texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
                data = [
                    {"object": "embedding", "index": i, "embedding": embed(t)}
                    for i, t in enumerate(texts)
                ]
                self._answer(200, {"object": "list", "data": data, "model": body.get("model")})

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeEmbeddingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
