"""Run a whole kernel inside a test: real bus, real loader, scripted model."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agents.models.interface import Model

from core.config import load_settings
from core.kernel.runner import Kernel
from support.ext_files import ext_code

# A channel extension that records what it is sent; tests read `.sent`.
CAPTURE_CHANNEL = ext_code(
    """
    sent = None
    def _log(self):
        if self.sent is None:
            self.sent = []
        return self.sent
    async def send_to_user(self, user_id, message):
        self._log().append(("reply", user_id, message))
    async def send_message(self, message):
        self._log().append(("notify", None, message))
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    """
)
# its manifest: a channel speaks as the user (permissions.user_messages)
CAPTURE_MANIFEST = {"permissions": {"user_messages": True}}
# an extension that sees or changes turns (hooks, context, post-processors) declares it
CONVERSING = {"permissions": {"conversations": True}}


def conversing(manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    """``manifest`` plus ``permissions.conversations: true`` (ADR 0041)."""
    manifest = manifest or {}
    permissions = {**manifest.get("permissions", {}), "conversations": True}
    return {**manifest, "permissions": permissions}


@asynccontextmanager
async def running_kernel(
    settings_path: Path, *, model: Model | None = None, **kernel_args: Any
) -> AsyncIterator[Kernel]:
    """Start a kernel (``model`` overrides every agent's model), stop it after."""
    overrides = {"*": model} if model is not None else None
    kernel = Kernel(load_settings(settings_path), model_overrides=overrides, **kernel_args)
    task = asyncio.create_task(kernel.run())
    # generous: isolated extensions start plugin hosts, slow on a loaded 2-core machine
    await wait_for(lambda: kernel.ready.is_set() or task.done(), timeout=60)
    if task.done():
        task.result()
    try:
        yield kernel
    finally:
        kernel.request_shutdown()
        await stopped(task, 30)


async def stopped(task: asyncio.Task[Any], timeout: float) -> None:
    """Wait for the kernel's task to end; past ``timeout``, cancel it and fail. Not
    ``asyncio.wait_for``: it waits for the cancelled task to end, and a task that does
    not end on cancel would hang the test (and CI) instead of failing it."""
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        waiting = _task_stacks()  # where it hangs, before the cancel moves it
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        raise AssertionError(
            f"the kernel did not stop within {timeout:g} s of its shutdown; its tasks wait in:\n"
            + waiting
        )
    task.result()


def _task_stacks() -> str:
    """Every pending task of this loop with the chain of awaits it is suspended in: what
    a kernel that does not stop still waits for (a CI log shows nothing else of a hang)."""
    current = asyncio.current_task()
    return "\n".join(
        f"task {pending.get_name()}:\n" + "\n".join(f"    {frame}" for frame in awaits(pending))
        for pending in sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
        if pending is not current
    )


def awaits(task: asyncio.Task[Any]) -> list[str]:
    """Where ``task`` is suspended: each coroutine of its chain of awaits, outermost first,
    as ``file:line in function``, then what the innermost awaits. Not ``Task.get_stack``:
    of a suspended coroutine it gives the outermost frame only."""
    frames = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        frame = frame or getattr(awaited, "ag_frame", None)
        if frame is None:
            frames.append(f"awaits {awaited!r:.200}")
            break
        frames.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        awaited = (
            getattr(awaited, "cr_await", None)
            or getattr(awaited, "gi_yieldfrom", None)
            or getattr(awaited, "ag_await", None)
        )
    return frames


async def wait_for(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll ``condition`` until truthy; fail with a clear message at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.01)


def model_read(call: Any) -> str:
    """Everything the model read in one call: the instructions (the stable prefix)
    and the input, whose turn note after the history holds the clock, the context
    providers' text and the conditional additions (ADR 0054)."""
    given = call.input if isinstance(call.input, list) else [call.input]
    texts = [
        item["content"]
        if isinstance(item, dict) and isinstance(item.get("content"), str)
        else item
        if isinstance(item, str)
        else json.dumps(item, default=str)
        for item in given
    ]
    return "\n".join([call.system_instructions or "", *texts])


def session_history(data_dir: Path, session_id: str) -> list[dict[str, Any]]:
    """The items a conversation's SDK session holds in ``sessions.db``, oldest first."""
    with sqlite3.connect(data_dir / "sessions.db") as conn:
        rows = conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
    conn.close()
    return [json.loads(data) for (data,) in rows]


def count_mentions(items: list[dict[str, Any]], text: str) -> int:
    """How many history items contain ``text`` (1 = the exchange is there once)."""
    return sum(1 for item in items if text in json.dumps(item))
