"""Shared services: ``context.services.get_or_create(key, factory)`` (seed 004, issue 16).

One instance per key per kernel lifetime, created lazily; concurrent first
callers wait for one creation; a failing factory is not remembered; a sync
factory runs off the event loop; teardown closes services newest first. An
isolated extension gets a registry of its plugin host with the same rules.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest

from conftest import ext_code
from core.extensions.context.shared_services import ServiceRegistry, ServicesClosedError
from core.extensions.contract import TurnContext
from core.extensions.sdk.testing import FakeContext, running
from core.kernel.commands.table import parse_command
from support.harness import running_kernel


class Model:
    """A stand-in for a heavy object; records how it was closed."""

    def __init__(self, name: str, closed: list[str]) -> None:
        self.name = name
        self._closed = closed


class Shuts(Model):
    def shutdown(self) -> None:
        self._closed.append(f"{self.name}.shutdown")


class Acloses(Model):
    async def aclose(self) -> None:
        self._closed.append(f"{self.name}.aclose")


class Closes(Model):
    def close(self) -> None:
        self._closed.append(f"{self.name}.close")


async def test_concurrent_first_callers_share_one_creation():
    registry = ServiceRegistry()
    release = asyncio.Event()
    calls = 0

    async def load() -> object:
        nonlocal calls
        calls += 1
        await release.wait()
        return object()

    callers = [asyncio.create_task(registry.get_or_create("ner", load)) for _ in range(20)]
    await asyncio.sleep(0)
    release.set()
    instances = await asyncio.gather(*callers)
    assert calls == 1
    assert all(i is instances[0] for i in instances)
    assert await registry.get_or_create("ner", load) is instances[0]
    assert calls == 1


async def test_a_sync_factory_runs_off_the_event_loop():
    registry = ServiceRegistry()
    loop_is_free = threading.Event()
    seen: list[str] = []

    def load() -> str:
        seen.append(threading.current_thread().name)
        # only a running event loop can set the event: the loop is not blocked
        assert loop_is_free.wait(timeout=10), "the event loop was blocked by the factory"
        return "model"

    creating = asyncio.create_task(registry.get_or_create("slow", load))
    await asyncio.sleep(0.01)
    loop_is_free.set()
    assert await creating == "model"
    assert seen and seen[0] != threading.main_thread().name


async def test_a_failing_factory_is_not_remembered(caplog):
    registry = ServiceRegistry()
    attempts = 0
    release = asyncio.Event()

    async def flaky() -> str:
        nonlocal attempts
        attempts += 1
        await release.wait()
        if attempts == 1:
            raise ConnectionError("model server down")
        return "pool"

    waiting = [asyncio.create_task(registry.get_or_create("pool", flaky)) for _ in range(3)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert [type(r) for r in results] == [ConnectionError] * 3  # one creation, one error
    assert await registry.get_or_create("pool", flaky) == "pool"  # the next call retries
    assert attempts == 2
    assert "shared service 'pool' (asked by kernel) could not be created" in caplog.text


async def test_a_cancelled_caller_does_not_cancel_the_creation():
    registry = ServiceRegistry()
    release = asyncio.Event()
    calls = 0

    async def load() -> object:
        nonlocal calls
        calls += 1
        await release.wait()
        return object()

    first = asyncio.create_task(registry.get_or_create("emb", load))
    await asyncio.sleep(0)
    first.cancel()
    second = asyncio.create_task(registry.get_or_create("emb", load))
    await asyncio.sleep(0)
    release.set()
    assert await second is not None
    with pytest.raises(asyncio.CancelledError):
        await first
    assert calls == 1


async def test_teardown_closes_services_newest_first_even_when_one_fails(caplog):
    registry = ServiceRegistry(shutdown_timeout_s=2)
    closed: list[str] = []

    class Broken(Model):
        async def aclose(self) -> None:
            raise RuntimeError("socket already gone")

    await registry.get_or_create("a", lambda: Shuts("a", closed))
    await registry.get_or_create("b", lambda: Acloses("b", closed))
    await registry.get_or_create("broken", lambda: Broken("broken", closed))
    await registry.get_or_create("c", lambda: Closes("c", closed))
    await registry.get_or_create("plain", object)  # nothing to close
    await registry.aclose()
    assert closed == ["c.close", "b.aclose", "a.shutdown"]
    assert "shared service 'broken': aclose() failed: RuntimeError: socket already gone" in (
        caplog.text
    )
    with pytest.raises(ServicesClosedError):
        await registry.get_or_create("late", object)


@pytest.mark.parametrize("key", ["", "  ", None])
async def test_a_key_must_be_a_non_empty_string(key):
    with pytest.raises(ValueError, match="non-empty string"):
        await ServiceRegistry().get_or_create(key, object)


SHARER = ext_code(
    header="""
    import asyncio

    class Pool:
        created = 0
        def __init__(self, path):
            Pool.created += 1
            self.path = path
        async def aclose(self):
            with open(self.path, "a") as fh:
                fh.write("closed\\n")
    """,
    body="""
    async def initialize(self, context):
        self.ctx = context
        path = context.data_dir / "pool.log"
        self.pool = await context.services.get_or_create("demo:pool", lambda: Pool(path))
        self.again = await context.services.get_or_create("demo:pool", lambda: Pool(path))
    async def destroy(self):
        with open(self.pool.path, "a") as fh:
            fh.write(f"{self.ctx.extension_id} destroyed\\n")
    def get_commands(self):
        from core.extensions.contract import Command

        async def pool(args, turn):
            return f"created {Pool.created}, same {self.pool is self.again}"

        return [Command(f"pool_{self.ctx.extension_id}", "Show the pool.", pool)]
    """,
)


async def test_extensions_in_one_kernel_share_one_instance_closed_after_destroy(
    make_ext, settings_file, caplog
):
    make_ext("first", SHARER)
    make_ext("second", SHARER)
    caplog.set_level(logging.INFO, logger="core.services")
    async with running_kernel(settings_file()) as kernel:
        first, second = kernel.loader.instance("first"), kernel.loader.instance("second")
        assert first.pool is second.pool is first.again
        assert kernel.services.shared.keys() == ["demo:pool"]
        log_path: Path = first.pool.path
    assert "shared service 'demo:pool' created (asked by first)" in caplog.text
    # closed once, at kernel stop, after every extension was destroyed
    assert lines(log_path) == [
        "second destroyed",
        "first destroyed",
        "closed",
    ]


async def test_an_isolated_extension_gets_its_own_registry_with_the_same_rules(
    make_ext, settings_file, tmp_path
):
    make_ext("solo", SHARER, {"isolation": "process"})
    async with running_kernel(settings_file(isolation={"call_timeout_s": 10})) as kernel:
        record = kernel.loader.records["solo"]
        assert record.status.value == "active", record.error
        parsed = parse_command("/pool_solo")
        assert parsed is not None
        assert await kernel.commands.run(parsed, TurnContext()) == "created 1, same True"
        assert kernel.services.shared.keys() == []  # the host's object stays in the host
    log_path = tmp_path / "data" / "extensions" / "solo" / "pool.log"
    assert lines(log_path) == ["solo destroyed", "closed"]


async def test_fake_context_offers_services_and_running_closes_them(tmp_path):
    closed: list[str] = []

    class Ext:
        async def initialize(self, context):
            self.model = await context.services.get_or_create("m", lambda: Acloses("m", closed))

        async def start(self): ...
        async def stop(self): ...
        async def destroy(self): ...
        def health_check(self):
            return True

    context = FakeContext(tmp_path)
    async with running(Ext(), context) as ext:
        assert await context.services.get_or_create("m", object) is ext.model
    assert closed == ["m.aclose"]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()
