"""Shared by the hook contract suites: kernels with hook extensions, turns, frames, logs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from agents.testing import ScriptedModel

from core.extensions.contract import TurnContext
from core.extensions.isolation.kernel.confinement import probe
from core.kernel.runner import Kernel
from support.harness import conversing, running_kernel

ISOLATION = {"call_timeout_s": 10, "restart_backoff_max_s": 1}
LOADER = {"lifecycle_timeout_s": 30}
HOOK_LOG = "core.kernel.hooks"
Extensions = dict[str, tuple[str, dict[str, Any]]]  # ext id -> (main.py, manifest)
KernelFor = Callable[..., AbstractAsyncContextManager[Kernel]]


class FrameLog:
    """Stands in for the bus as a frame sink: keeps what was published, in order."""

    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any], str | None]] = []

    @property
    def frames(self) -> list[tuple[str, dict[str, Any]]]:
        return [(topic, payload) for topic, payload, _ in self.published]

    async def publish(
        self,
        topic: str,
        source: str,
        payload: dict[str, Any],
        *,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        self.published.append((topic, payload, correlation_id))
        return len(self.published)


def turn(n: int = 1) -> TurnContext:
    """Turn ``t<n>`` of one conversation."""
    return TurnContext(channel_id="cli_channel", user_id="u1", session_id="s1", turn_id=f"t{n}")


def isolation_mode(mode: str) -> str:
    """``mode``, after skipping (one line) when an isolated run cannot be confined."""
    if mode == "process" and not probe().available:
        pytest.skip(f"isolated hooks need bubblewrap: {probe().detail}")
    return mode


def kernel_factory(mode: str, make_ext: Callable[..., Any], settings_file: Any) -> KernelFor:
    """``start(extensions, **settings)``: a running kernel with them loaded in ``mode``."""

    @asynccontextmanager
    async def start(extensions: Extensions, **sections: Any) -> AsyncIterator[Kernel]:
        for ext_id, (code, manifest) in extensions.items():
            make_ext(ext_id, code, {**conversing(manifest), "isolation": mode})
        path = settings_file(isolation=ISOLATION, loader=LOADER, **sections)
        model = ScriptedModel()
        async with running_kernel(path, model=model) as kernel:
            for ext_id in extensions:
                record = kernel.loader.records[ext_id]
                assert record.status.value == "active", record.error
                assert (type(record.instance).__name__ != "Ext") == (mode == "process")
            yield kernel
        model.assert_complete()
        assert not model.calls, "hooks alone never call the model"

    return start


async def frames(kernel: Kernel, kind: str, at: TurnContext) -> list[dict[str, Any]]:
    """The journaled ``hook.<kind>`` frames of turn ``at``, oldest first."""
    events = await kernel.bus.journal.recent_events(200, topic=f"hook.{kind}")
    assert all(e.source == "kernel" for e in events)
    return [e.payload for e in reversed(events) if e.correlation_id == at.turn_id]


def hook_failures(caplog: pytest.LogCaptureFixture, owner: str) -> list[str]:
    """The kernel's log lines about hooks of ``owner`` that were skipped."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == HOOK_LOG and f" of {owner} " in r.getMessage()
    ]
