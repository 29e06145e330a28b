"""The front's line to the running kernel: requests journaled on
``system.kernel.mcp.request``, answers read from ``system.kernel.mcp.response``.

The same mechanism as ``main.py extensions reload`` (ADR 0032): the kernel's
bus picks events written by another process up within
``events.poll_interval_s`` (on PostgreSQL a NOTIFY wakes it at once). A
request carries an expiry, so a kernel started later never answers a client
that has gone.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from core.config import Settings
from core.events.backend import journal_for
from core.events.journal import Journal, NewEvent, WriteBatch
from core.events.system_payloads import McpRequest, McpResponse
from core.events.topics import SystemTopics
from core.runtime import JOURNAL_FILE
from core.runtime.errors import HearthError

__all__ = ["KernelLink", "KernelUnavailableError"]

POLL_S = 0.05
SCAN = 500  # recent responses read per poll


class KernelUnavailableError(HearthError):
    """No running kernel answered within the time a kernel needs to see a request."""

    def __init__(self, data_dir: Path, waited_s: float) -> None:
        what = (
            f"no running Hearth kernel answered within {waited_s:g} s"
            if waited_s
            else "no Hearth kernel has run"
        )
        super().__init__(
            f"{what} (data dir {data_dir}); start it with `python main.py` or "
            "`python main.py daemon` and the same settings"
        )
        self.data_dir = data_dir
        self.waited_s = waited_s


class KernelLink:
    """Requests to the kernel of ``settings``' data dir, answered one by one."""

    def __init__(self, settings: Settings, client: str) -> None:
        self.client = client
        self._data_dir = settings.data_dir
        self._journal_path = settings.data_dir / JOURNAL_FILE
        self._sqlite = settings.storage.backend == "sqlite"
        self._journal: Journal = journal_for(self._journal_path, settings.events, settings.storage)
        self._opened = False
        # a kernel sees a request within a few poll intervals; a turn may take longer
        self.answer_s = 5.0 + 4 * settings.events.poll_interval_s
        self.turn_s = settings.turns.timeout_s + 30.0

    async def close(self) -> None:
        if self._opened:
            await self._journal.close()
            self._opened = False

    async def _open(self) -> None:
        """Open the journal on first use; a SQLite journal no kernel ever made is not
        created here (the front never writes a data dir of its own)."""
        if self._opened:
            return
        if self._sqlite and not await asyncio.to_thread(self._journal_path.is_file):
            raise KernelUnavailableError(self._data_dir, 0)
        await self._journal.open()
        self._opened = True

    async def request(
        self, op: str, name: str | None = None, arguments: str | None = None
    ) -> McpResponse:
        """Journal one request, wait for its answer (``KernelUnavailableError`` if none)."""
        await self._open()
        waited = self.turn_s if op == "ask" else self.answer_s
        request = McpRequest(
            request_id=uuid.uuid4().hex,
            client=self.client,
            op=op,
            expires_at=str(time.time() + waited),
            name=name,
            arguments=arguments,
        )
        now = time.time()
        event = NewEvent(
            request.TOPIC, "main.py mcp", json.dumps(request.to_payload()), None, None, now
        )
        await self._journal.commit(WriteBatch(now=now, events=[event]))
        deadline = time.monotonic() + waited
        while time.monotonic() < deadline:
            found = await self._answer(request.request_id)
            if found is not None:
                return found
            await asyncio.sleep(POLL_S)
        raise KernelUnavailableError(self._data_dir, waited)

    async def _answer(self, request_id: str) -> McpResponse | None:
        records = await self._journal.recent_events(SCAN, topic=SystemTopics.KERNEL_MCP_RESPONSE)
        for record in records:
            payload: dict[str, Any] = record.payload
            if payload.get("request_id") == request_id:
                return McpResponse.from_payload(payload)
        return None
