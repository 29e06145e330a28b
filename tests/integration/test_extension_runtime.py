"""Runtime supervision of extensions: health checks, services, manifest
event wiring and the agent members of ExtensionContext."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message

from conftest import ext_code
from core.extensions.errors import PermissionDeniedError
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

FLAKY_HEALTH = ext_code(
    """
    healthy = True
    starts = 0
    async def start(self):
        self.starts += 1
    def health_check(self):
        return self.healthy
    """
)

CRASHING_SERVICE = ext_code(
    """
    runs = 0
    async def run_background(self):
        import asyncio
        self.runs += 1
        if self.runs < 3:
            raise RuntimeError(f"crash {self.runs}")
        await asyncio.Event().wait()
    """
)


def fast_settings(settings_file, **extra):
    return settings_file(
        loader={"health_check_interval_s": 0.05, "lifecycle_timeout_s": 2}, **extra
    )


async def test_unhealthy_extension_is_stopped_then_restarted_with_backoff(
    make_ext, settings_file, monkeypatch
):
    make_ext("flaky", FLAKY_HEALTH)
    async with running_kernel(fast_settings(settings_file)) as k:
        k.supervision.backoff_initial_s = 0.05
        ext = k.loader.instance("flaky")
        record = k.loader.records["flaky"]
        ext.healthy = False
        await wait_for(lambda: record.status.value == "error")
        assert record.error == "health check returned False"
        assert k.loader.instance("flaky") is None  # not offered while in error
        ext.healthy = True
        await wait_for(lambda: record.status.value == "active", timeout=5)
        assert record.error is None and ext.starts >= 2


async def test_crashing_service_is_restarted(make_ext, settings_file):
    make_ext("svc", CRASHING_SERVICE)
    async with running_kernel(settings_file()) as k:
        k.supervision.backoff_initial_s = 0.01
        ext = k.loader.instance("svc")
        await wait_for(lambda: ext.runs >= 3, timeout=10)


async def test_manifest_notify_user_subscription(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "alerts",
        ext_code(),
        {"events": {"subscribes": [{"topic": "alert.*", "handler": "notify_user"}]}},
    )
    async with running_kernel(settings_file(channels={"default": "capture"})) as k:
        await k.bus.publish("alert.fire", "test", {"text": "smoke in the kitchen"})
        sent = await wait_for(lambda: k.loader.instance("capture").sent)
    assert sent == [("notify", None, "smoke in the kitchen")]


async def test_context_agent_members(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("asker", ext_code(), {"permissions": {"agent": True}})
    model = ScriptedModel(
        [
            [assistant_message("direct answer")],
            [assistant_message("task answer")],
            [assistant_message("background answer")],
        ]
    )
    async with running_kernel(settings_file(channels={"default": "capture"}), model=model) as k:
        ctx = k.loader.records["asker"].context
        assert await ctx.invoke_agent("question?") == "direct answer"
        await ctx.request_agent_task("summarise my day")
        sent = await wait_for(lambda: k.loader.instance("capture").sent)
        assert sent == [("notify", None, "task answer")]
        await ctx.request_agent_background("tidy up")
        await wait_for(lambda: len(model.calls) == 3)
        enriched = await ctx.enrich_prompt("plain prompt")
        assert enriched == "plain prompt"  # no context for a turn without a channel
    model.assert_complete()


async def test_emit_outside_permissions_is_refused(make_ext, settings_file):
    make_ext("narrow", ext_code(), {"permissions": {"emit": ["narrow.*"]}})
    async with running_kernel(settings_file()) as k:
        ctx = k.loader.records["narrow"].context
        assert await ctx.emit("narrow.ok", {"a": 1}) > 0
        with pytest.raises(
            PermissionDeniedError, match="not permitted to emit topic 'other.topic'"
        ):
            await ctx.emit("other.topic", {"a": 1})
