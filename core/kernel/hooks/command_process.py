"""Run one hook command: its argv without a shell, JSON in, bytes out, a hard deadline.

The program starts in a new session (its own process group), so on the
deadline, a cancellation or an oversized answer the whole group is killed
with SIGKILL — a script's children go with it. A program that ends by
itself keeps any child it deliberately left running in the background.
stdout is read up to ``STDOUT_LIMIT`` (more is an error); stderr is kept up
to ``STDERR_KEPT`` and drained beyond that, so a chatty program never
blocks on a full pipe.

The environment is the kernel's own minus its secrets (``hook_environment``):
variables the ``.env`` secrets file defines, any variable whose value holds a
secret the kernel redacts from its logs (extension secrets, model API keys,
the storage password), and every storage credential — ``HEARTH__STORAGE__*``
settings and libpq's ``PG*`` variables — are withheld.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.runtime import REDACTOR
from core.runtime.errors import HearthError

__all__ = [
    "STDERR_KEPT",
    "STDOUT_LIMIT",
    "STORAGE_ENV_PREFIXES",
    "CommandHookError",
    "Completed",
    "hook_environment",
    "run_command",
]

# the storage settings (the PostgreSQL DSN) and libpq's PGPASSWORD, PGUSER, PGSERVICE, ...
STORAGE_ENV_PREFIXES = ("HEARTH__STORAGE__", "PG")
STDOUT_LIMIT = 1024 * 1024
STDERR_KEPT = 64 * 1024
_CHUNK = 64 * 1024


class CommandHookError(HearthError):
    """A hook command failed: it could not start, exited with an error status,
    or answered too much or something malformed. Contained like any hook failure."""


@dataclass(frozen=True, slots=True)
class Completed:
    """A command that ran to its end: exit status, stdout, the kept part of stderr."""

    status: int
    stdout: bytes
    stderr: str


def hook_environment(withheld: Collection[str]) -> dict[str, str]:
    """The kernel's environment without ``withheld`` names, storage credentials or
    known secret values."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in withheld
        and not name.upper().startswith(STORAGE_ENV_PREFIXES)
        and REDACTOR.redact(value) == value
    }


async def run_command(
    argv: Sequence[str], stdin: bytes, *, timeout_s: float, cwd: Path, env: dict[str, str]
) -> Completed:
    """Run ``argv`` with ``stdin`` until it exits; ``TimeoutError`` past ``timeout_s``
    (the process group killed), ``CommandHookError`` when it cannot start or its
    stdout outgrows ``STDOUT_LIMIT``."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise CommandHookError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
    finished = False
    try:
        async with asyncio.timeout(timeout_s):
            _, stdout, stderr, status = await asyncio.gather(
                _feed(process, stdin), _stdout(process), _stderr(process), process.wait()
            )
        finished = True
    finally:
        if not finished:  # deadline or cancellation: nothing of the group survives
            _kill_group(process)
            await process.wait()
    if stdout is None:
        raise CommandHookError(f"wrote more than {STDOUT_LIMIT} bytes to stdout")
    return Completed(status, stdout, stderr)


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    pipe = process.stdin
    assert pipe is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it did not read
        pipe.write(data)
        await pipe.drain()
        pipe.close()


async def _stdout(process: asyncio.subprocess.Process) -> bytes | None:
    """All of stdout, or ``None`` (and the group killed) once it passes the limit."""
    pipe = process.stdout
    assert pipe is not None
    data = bytearray()
    while chunk := await pipe.read(_CHUNK):
        data += chunk
        if len(data) > STDOUT_LIMIT:
            _kill_group(process)
            return None
    return bytes(data)


async def _stderr(process: asyncio.subprocess.Process) -> str:
    pipe = process.stderr
    assert pipe is not None
    kept = bytearray()
    while chunk := await pipe.read(_CHUNK):
        kept += chunk[: max(0, STDERR_KEPT - len(kept))]
    return kept.decode("utf-8", "replace")


def _kill_group(process: asyncio.subprocess.Process) -> None:
    # the leader is not reaped yet (or a member still holds its pipes), so the
    # group id cannot have been reused by an unrelated process
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
