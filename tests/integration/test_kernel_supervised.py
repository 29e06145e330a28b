"""Supervised internals (issue 12, item 4): a dead bus task stops the kernel
loudly instead of journaling events nobody delivers; ``Kernel.stop()`` runs
every step even when one raises; sync extension code cannot hang the load."""

from __future__ import annotations

import asyncio
import logging

import pytest

from conftest import ext_code
from core.config import load_settings
from core.events import EventBus
from core.events.errors import BusStateError
from core.events.sqlite_journal import SQLiteJournal
from core.extensions.loading.loader import Loader
from core.kernel.runner import Kernel
from support.harness import stopped, wait_for

DESTROY_PROBE = ext_code(
    """
    destroyed = False
    async def destroy(self):
        type(self).destroyed = True
    """
)


async def started_kernel(settings_path) -> tuple[Kernel, asyncio.Task[None]]:
    kernel = Kernel(load_settings(settings_path))
    task = asyncio.create_task(kernel.run())
    await wait_for(lambda: kernel.ready.is_set() or task.done())
    assert not task.done()
    return kernel, task


async def test_a_dead_bus_writer_stops_the_kernel_loudly(make_ext, settings_file, caplog):
    make_ext("probe", DESTROY_PROBE)
    kernel, task = await started_kernel(settings_file())
    probe_cls = type(kernel.loader.instance("probe"))

    def broken_build():
        raise RuntimeError("writer bug")

    kernel.bus._writer._build = broken_build  # the next round kills the writer task
    with caplog.at_level(logging.CRITICAL):
        with pytest.raises(BusStateError):
            await asyncio.wait_for(kernel.bus.publish("probe.ping", "test", {}), 15)
        # the kernel notices on its own and stops with the error, not silently
        done, _ = await asyncio.wait({task}, timeout=15)
        assert task in done, "the kernel kept running with a dead event bus"
    with pytest.raises(BaseExceptionGroup) as failure:
        task.result()
    (error,) = failure.value.exceptions
    assert isinstance(error, BusStateError)
    assert "RuntimeError: writer bug" in str(error)
    assert "event bus task died" in caplog.text
    assert probe_cls.destroyed  # and it still shut the extensions down


async def test_publish_on_a_bus_whose_writer_died_raises(tmp_path):
    bus = EventBus(SQLiteJournal(tmp_path / "events.db"))
    delivered: list[int] = []

    async def handler(event) -> None:
        delivered.append(event.id)

    bus.subscribe("probe.ping", handler, "probe")
    await bus.start()

    def broken_build():
        raise RuntimeError("writer bug")

    bus._writer._build = broken_build
    with pytest.raises(BusStateError, match="writer bug"):
        await asyncio.wait_for(bus.publish("probe.ping", "test", {}), 15)
    with pytest.raises(BusStateError, match="writer bug"):
        await asyncio.wait_for(bus.watch(), 15)
    # still "running" for everyone else: no silent journal-only fallback
    with pytest.raises(BusStateError, match="the bus is down"):
        await asyncio.wait_for(bus.publish("probe.ping", "test", {}), 15)
    assert delivered == []
    await bus.stop()  # stopping a failed bus cleans up without raising


async def test_stop_runs_every_step_when_one_raises(make_ext, settings_file, caplog):
    make_ext("probe", DESTROY_PROBE)
    kernel, task = await started_kernel(settings_file())
    probe_cls = type(kernel.loader.instance("probe"))

    async def broken_stop() -> None:
        raise RuntimeError("scheduler stop broke")

    kernel.scheduler.stop = broken_stop  # the first step of stop()
    kernel.request_shutdown()
    with pytest.raises(RuntimeError, match="scheduler stop broke"):
        await stopped(task, 30)
    assert probe_cls.destroyed  # loader.shutdown still ran
    assert not kernel.bus.journal.is_open  # so did the bus's stop
    assert "kernel stop: scheduler failed; the other steps still run" in caplog.text


HANGING_CONSTRUCTOR = ext_code(
    """
    def __init__(self):
        import threading
        threading.Event().wait(20)  # sync code that never yields to the loop
    """
)


async def test_a_hanging_constructor_is_cut_off_by_the_timeout(make_ext, ext_root, settings_file):
    make_ext("sleepy", HANGING_CONSTRUCTOR)
    kernel = Kernel(load_settings(settings_file()))
    loader = Loader(ext_root, lifecycle_timeout_s=0.5)
    started = asyncio.get_running_loop().time()
    await loader.load_all(kernel.services)
    assert asyncio.get_running_loop().time() - started < 10
    record = loader.records["sleepy"]
    assert record.status.value == "error"
    assert record.error == "import() timed out after 0.5 s"
    await kernel.bus.stop()
