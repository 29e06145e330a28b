"""A kernel serving the bundled ``http_api`` extension on a free port, with the
model on the fake OpenAI server (``fake_openai``), for the HTTP API tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from bundled import copy_bundled
from core.kernel.runner import Kernel
from fake_openai import FakeOpenAIServer
from harness import running_kernel, wait_for

TOKEN = "test-token-0123456789abcdef"
EXTENSION_ID = "http_api"


def api_settings(
    settings_file: Callable[..., Path], model: FakeOpenAIServer | None, **config: Any
) -> Path:
    """Settings: ``http_api`` on 127.0.0.1 (a free port), the fake model, the channel
    as the default one (so reminders reach it)."""
    models: dict[str, Any] = {"default": None}
    if model is not None:
        models = {
            "default": {"provider": "fake", "model": "fake-model"},
            "providers": {
                "fake": {
                    "type": "openai_compatible",
                    "base_url": model.base_url,
                    "api_key": "fake",
                    "max_retries": 0,
                }
            },
        }
    listen = {"listen": "127.0.0.1:0", **config}
    return settings_file(
        models=models,
        channels={"default": EXTENSION_ID},
        extensions={EXTENSION_ID: listen},
    )


def install(ext_root: Path, *others: str) -> None:
    copy_bundled(ext_root, EXTENSION_ID, *others)


def channel_of(kernel: Kernel) -> Any:
    return kernel.loader.instance(EXTENSION_ID)


@asynccontextmanager
async def serving(settings: Path, **kernel_args: Any) -> AsyncIterator[tuple[Kernel, str]]:
    """A running kernel and the API's base URL (``http://127.0.0.1:PORT``), once ready."""
    async with running_kernel(settings, **kernel_args) as kernel:
        channel = channel_of(kernel)
        await wait_for(lambda: channel.ready)
        yield kernel, channel.base_url


def client(base_url: str, token: str = TOKEN) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{base_url}/v1", api_key=token, max_retries=0, timeout=30)
