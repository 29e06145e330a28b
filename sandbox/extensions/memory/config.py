"""The memory extension's ``config`` (manifest defaults, ``settings.yaml`` overrides)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class EmbeddingsConfig(BaseModel):
    """An OpenAI-compatible ``/embeddings`` endpoint; absent means FTS-only ranking."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(min_length=1)  # e.g. http://127.0.0.1:11434/v1
    model: str = Field(min_length=1)  # e.g. text-embedding-3-small, nomic-embed-text
    api_key: str | None = None  # inline key (local servers), or:
    api_key_secret: str | None = None  # a secret name listed in the manifest's `secrets`
    timeout_s: float = Field(default=2.0, gt=0)  # per request; turns never wait longer
    scan_limit: int = Field(default=2000, ge=1)  # vectors searched: the most recent N
    min_similarity: float = Field(default=0.3, ge=-1, le=1)  # cosine floor for a vector hit

    @model_validator(mode="after")
    def _one_key_source(self) -> EmbeddingsConfig:
        if self.api_key and self.api_key_secret:
            raise ValueError("give api_key or api_key_secret, not both")
        return self


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context_priority: int = 50
    max_context_chars: int = Field(default=1200, ge=40)
    max_context_items: int = Field(default=5, ge=1)
    max_fact_chars: int = Field(default=2000, ge=10)
    dedupe_jaccard: float = Field(default=0.9, gt=0, le=1)
    embeddings: EmbeddingsConfig | None = None


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
