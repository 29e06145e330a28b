"""The ``/sync`` loop, acknowledged after journaling: nothing lost, nothing twice.

Each batch of events is handed to ``handle`` (which returns once every
message in it is journaled) and only then is the batch's ``next_batch``
token written to ``sync.json`` in the channel's data dir. A kernel killed at
any point restarts from the last token written, so a batch is either fully
handled or fetched again; a message fetched again is journaled under the same
idempotency key (``matrix:EVENT_ID``), so the kernel ignores the copy.

The first sync of a process asks for the rooms' full state (the bot learns
which rooms are direct, encrypted, whose). With no token at all (the very
first start) messages older than the process are skipped: the bot does not
answer a backlog nobody meant for it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from nio import AsyncClient, ErrorResponse, SyncResponse

from core.extensions.sdk import Backoff

from .sender import BACKOFF_MAX_S, is_limited, retry_after_seconds

TOKEN_FILE = "sync.json"
SYNC_BACKOFF = Backoff(1.0, BACKOFF_MAX_S)
AUTH_ERRORS = ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN")

Handler = Callable[[SyncResponse, int | None], Awaitable[None]]  # batch, skip-before (ms)


class MatrixAuthError(RuntimeError):
    """The homeserver refuses the access token."""


class Syncer:
    def __init__(
        self,
        client: AsyncClient,
        handle: Handler,
        logger: logging.Logger,
        data_dir: Path,
        *,
        timeout_s: float,
        after_first: Callable[[], None],
    ) -> None:
        self._client = client
        self._handle = handle
        self._logger = logger
        self.path = data_dir / TOKEN_FILE
        self.timeout_s = timeout_s
        self._after_first = after_first
        self.started_ms = int(time.time() * 1000)

    def load(self) -> str | None:
        if not self.path.exists():
            return None
        try:
            token = json.loads(self.path.read_text(encoding="utf-8"))["next_batch"]
        except (ValueError, KeyError, TypeError) as exc:
            self._logger.warning("%s is unreadable (%s): syncing from now on", self.path, exc)
            return None
        return str(token)

    def save(self, token: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"next_batch": token}), encoding="utf-8")
        os.replace(temporary, self.path)

    async def run(self) -> None:
        """Sync until cancelled; ``MatrixAuthError`` when the token is refused."""
        since = await asyncio.to_thread(self.load)
        skip_before = None if since is not None else self.started_ms
        first = True
        failures = SYNC_BACKOFF.delays()
        while True:
            timeout_ms = 0 if first else int(self.timeout_s * 1000)
            try:
                response = await self._client.sync(
                    timeout=timeout_ms, since=since, full_state=first
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                delay = failures.next()
                self._logger.warning("/sync failed (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                continue
            if isinstance(response, ErrorResponse):
                if response.status_code in AUTH_ERRORS:
                    raise MatrixAuthError(
                        f"the homeserver refused MATRIX_ACCESS_TOKEN ({response.status_code}: "
                        f"{response.message}); `main.py setup` asks for a new one"
                    )
                delay = retry_after_seconds(response) if is_limited(response) else failures.next()
                self._logger.warning("/sync: %s; retrying in %.1f s", response, delay)
                await asyncio.sleep(delay)
                continue
            failures = SYNC_BACKOFF.delays()
            await self._handle(response, skip_before)
            since = response.next_batch
            await asyncio.to_thread(self.save, since)
            if first:
                first, skip_before = False, None
                self._after_first()
