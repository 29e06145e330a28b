"""Voice notes through the provider's ``/v1/audio/transcriptions`` (ADR 0096): the
default model's provider (OpenAI, or a local whisper server speaking the same API)
with ``files.transcription_model``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from openai import AsyncOpenAI

from core.extensions.contract import KeptFile

__all__ = ["ProviderTranscriber"]


class ProviderTranscriber:
    """Transcribes a kept audio file with the client ``client_of`` gives."""

    def __init__(self, client_of: Callable[[], AsyncOpenAI], model: str) -> None:
        self._client_of = client_of
        self.model = model

    async def __call__(self, file: KeptFile) -> str:
        """The words of the voice note (the provider's error propagates)."""
        client = self._client_of()
        data = await asyncio.to_thread(Path(file.path).read_bytes)
        result = await client.audio.transcriptions.create(
            model=self.model, file=(file.name, data, file.mime_type)
        )
        return result.text
