"""A kernel serving the bundled ``http_api`` extension on a free port, with the
model on the fake OpenAI server (``fake_openai``), for the HTTP API tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from openai import AsyncOpenAI

from core.extensions.sdk.testing import FakeContext, running
from core.kernel.runner import Kernel
from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer
from support.harness import running_kernel, wait_for

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
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
                    "api_key": "key-of-the-fake-model",
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
        try:
            yield kernel, channel.base_url
        finally:
            while _clients:
                await _clients.pop().close()


_clients: list[AsyncOpenAI] = []


def client(base_url: str, token: str = TOKEN, headers: dict[str, str] | None = None) -> AsyncOpenAI:
    """The real ``openai`` client for the API (closed when ``serving`` ends), sending
    ``headers`` with every request."""
    api = AsyncOpenAI(
        base_url=f"{base_url}/v1",
        api_key=token,
        max_retries=0,
        timeout=30,
        default_headers=headers,
    )
    _clients.append(api)
    return api


@asynccontextmanager
async def fake_kernel_channel(
    tmp_path: Path, *, ready: bool = True, **config: Any
) -> AsyncIterator[tuple[Any, FakeContext, httpx.AsyncClient]]:
    """The channel alone on a free port, against ``sdk.FakeContext`` (no kernel), and an
    ``httpx`` client for it; ``ready=False`` stops before ``run_background``."""
    from sandbox.extensions.http_api.main import HttpApiChannel

    ctx = FakeContext(
        tmp_path,
        extension_id="http_api",
        config_values={"listen": "127.0.0.1:0", **config},
        secrets={"HEARTH_API_TOKEN": TOKEN},
    )
    async with running(HttpApiChannel(), ctx, background=ready) as ext:
        await wait_for(lambda: ext.ready == ready and ext.server.running)
        async with httpx.AsyncClient(base_url=ext.base_url, timeout=10) as http:
            yield ext, ctx, http
