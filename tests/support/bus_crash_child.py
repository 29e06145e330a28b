"""Child process for the bus crash tests (run by tests/e2e/test_bus_crash.py; SIGKILLed there).

JOURNAL is a SQLite file or a PostgreSQL DSN. Modes:
  burst JOURNAL HANDLED PUBLISHED TAG COUNT  publish COUNT events, handle them, then idle
  drain JOURNAL HANDLED                      handle whatever is left, then stop cleanly
  poison JOURNAL HANDLED MAX_ATTEMPTS        publish one event that kills this process
                                             (plus innocent ones) and handle them
  serve JOURNAL HANDLED READY                handle ``share.*`` as subscriber ``shared-sub``
                                             (one of several processes sharing it), writing
                                             "PID ID" lines; an event whose payload names this
                                             PID in ``hang_in`` hangs; READY is written once
                                             subscribed

Handled and published event ids are appended to files with ``os.write`` (one
line each), so they survive the process being killed right after.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.events import Event, EventBus, Journal, SQLiteJournal

SUBSCRIBER = "crash-sub"


def _journal(location: str) -> Journal:
    """JOURNAL is a SQLite file, or a PostgreSQL DSN (``postgresql://...``)."""
    if location.startswith(("postgresql://", "postgres://")):
        from core.events.pg_journal import PostgresJournal

        return PostgresJournal(location)
    return SQLiteJournal(location)


def _appender(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def _record(fd: int, value: int) -> None:
    os.write(fd, f"{value}\n".encode())
    os.fsync(fd)


async def _wait_idle(bus: EventBus, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        counts = await bus.stats()
        if counts["pending"] == 0 and counts["inflight"] == 0:
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"journal not drained after {deadline_s}s: {await bus.stats()}")


async def burst(journal: str, handled: str, published: str, tag: str, count: int) -> None:
    handled_fd, published_fd = _appender(handled), _appender(published)

    async def handle(event: Event) -> None:
        _record(handled_fd, event.id)

    bus = EventBus(_journal(journal), poll_interval_s=0.2)
    bus.subscribe("crash.*", handle, SUBSCRIBER, concurrency=2)
    await bus.start()
    for n in range(count):
        event_id = await bus.publish("crash.burst", "child", {"tag": tag, "n": n})
        os.write(published_fd, f"{event_id}\n".encode())
    await asyncio.Event().wait()  # idle until killed


async def drain(journal: str, handled: str) -> None:
    handled_fd = _appender(handled)

    async def handle(event: Event) -> None:
        _record(handled_fd, event.id)

    bus = EventBus(_journal(journal), poll_interval_s=0.2)
    bus.subscribe("crash.*", handle, SUBSCRIBER, concurrency=2)
    await bus.start()
    await _wait_idle(bus, 20.0)
    await bus.stop()


async def poison(journal: str, handled: str, max_attempts: int) -> None:
    handled_fd = _appender(handled)

    async def handle(event: Event) -> None:
        if event.payload.get("poison"):
            os.kill(os.getpid(), signal.SIGKILL)
        _record(handled_fd, event.id)

    bus = EventBus(_journal(journal), max_attempts=max_attempts, poll_interval_s=0.2)
    bus.subscribe("crash.*", handle, SUBSCRIBER)
    await bus.start()
    await bus.publish("crash.poison", "child", {"poison": True}, idempotency_key="poison")
    for n in range(3):
        await bus.publish("crash.innocent", "child", {"n": n}, idempotency_key=f"innocent-{n}")
    await _wait_idle(bus, 10.0)
    await bus.stop()


async def serve(journal: str, handled: str, ready: str) -> None:
    handled_fd = _appender(handled)

    async def handle(event: Event) -> None:
        if event.payload.get("hang_in") == os.getpid():
            os.write(handled_fd, f"{os.getpid()} hang {event.id}\n".encode())
            await asyncio.Event().wait()
        os.write(handled_fd, f"{os.getpid()} {event.id}\n".encode())

    bus = EventBus(_journal(journal), poll_interval_s=5)
    bus.subscribe("share.*", handle, "shared-sub", concurrency=2)
    await bus.start()
    ready_fd = _appender(ready)
    os.write(ready_fd, str(os.getpid()).encode())
    os.close(ready_fd)
    await asyncio.Event().wait()  # until killed


def main(argv: list[str]) -> None:
    mode, args = argv[0], argv[1:]
    if mode == "burst":
        asyncio.run(burst(args[0], args[1], args[2], args[3], int(args[4])))
    elif mode == "drain":
        asyncio.run(drain(args[0], args[1]))
    elif mode == "poison":
        asyncio.run(poison(args[0], args[1], int(args[2])))
    elif mode == "serve":
        asyncio.run(serve(args[0], args[1], args[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
