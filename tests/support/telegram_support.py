"""Helpers for the Telegram channel tests: install the real extension into a
test's extension dir, write its settings, and script a slowly streaming model."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from agents.testing import ModelStep, assistant_message
from openai.types.responses import Response, ResponseCompletedEvent, ResponseTextDeltaEvent

from conftest import PROJECT_ROOT
from support.fake_telegram import FakeTelegram

EXTENSION_ID = "telegram_channel"
SOURCE_DIR = PROJECT_ROOT / "sandbox" / "extensions" / EXTENSION_ID
ALICE = 42  # the allowed user in most tests
MALLORY = 666  # never allowed


def install_extension(ext_root: Path, ext_id: str = EXTENSION_ID) -> Path:
    """Copy a bundled extension into the test's extension directory."""
    target = ext_root / ext_id
    shutil.copytree(
        PROJECT_ROOT / "sandbox" / "extensions" / ext_id,
        target,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return target


def telegram_config(tg: FakeTelegram, allowed: Sequence[int] = (ALICE,), **extra: Any) -> Any:
    config = {
        "allowed_user_ids": list(allowed),
        "api_base_url": tg.base_url,
        "poll_timeout_s": 1,
    }
    config.update(extra)
    return config


def write_settings(
    settings_file: Callable[..., Path],
    tg: FakeTelegram,
    allowed: Sequence[int] = (ALICE,),
    *,
    sections: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    return settings_file(
        channels={"default": EXTENSION_ID},
        extensions={EXTENSION_ID: telegram_config(tg, allowed, **extra)},
        **(sections or {}),
    )


def slow_stream(parts: Sequence[str], delay_s: float) -> ModelStep:
    """A model step streaming ``parts`` one text delta at a time, ``delay_s`` apart."""
    full = "".join(parts)

    async def events(call: Any) -> AsyncIterator[Any]:
        for index, part in enumerate(parts):
            await asyncio.sleep(delay_s)
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg-1",
                output_index=0,
                content_index=0,
                delta=part,
                logprobs=[],
                sequence_number=index,
            )
        yield ResponseCompletedEvent(
            type="response.completed",
            response=_response(full),
            sequence_number=len(parts),
        )

    return ModelStep.stream(events)


def _response(text: str) -> Response:
    return Response(
        id="resp-stream",
        created_at=0,
        model="scripted-model",
        object="response",
        output=[assistant_message(text)],  # type: ignore[list-item]
        tool_choice="none",
        tools=[],
        top_p=None,
        parallel_tool_calls=False,
        status="completed",
        usage=None,
    )
