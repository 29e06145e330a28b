"""Live checks the setup wizard makes before it writes anything.

``list_models`` asks a provider ``GET /models`` (the OpenAI API, Ollama,
llama.cpp and LM Studio all answer it). It logs no key; errors name the
address, never the secret.
"""

from __future__ import annotations

import asyncio

from core.runtime.errors import HearthError

__all__ = ["ProbeError", "list_models"]

PROBE_TIMEOUT_S = 10.0


class ProbeError(HearthError):
    """A provider or the Bot API did not answer as expected; the message says where."""


async def list_models(base_url: str | None, api_key: str) -> list[str]:
    """The model ids a provider offers (``base_url`` ``None``: OpenAI's API)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=PROBE_TIMEOUT_S)
    where = base_url or "https://api.openai.com/v1"
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S + 1):
            page = await client.models.list()
    except TimeoutError:
        raise ProbeError(f"no answer from {where} in {PROBE_TIMEOUT_S:g} s") from None
    except Exception as exc:
        raise ProbeError(f"{where}: {_one_line(exc)}") from None
    finally:
        await client.close()
    return sorted(model.id for model in page.data)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
