"""``GET /metrics`` on ``metrics.listen``: a minimal HTTP/1.1 server on the event loop.

On the loop, not in a thread: the exposition reads the kernel's own counters
(dicts the loop changes), so it is generated where they change, never
concurrently. One request per connection (``Connection: close``), a request
head of at most 8 KiB; the whole exchange (head read, answer written) within
5 s, and at most ``MAX_CONNECTIONS`` at once — one more is closed unanswered
(ADR 0047); only ``GET``/``HEAD`` of ``/metrics``. A body is never read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

__all__ = ["CONTENT_TYPE", "MetricsServer"]

log = logging.getLogger("core.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HEAD_LIMIT = 8192
EXCHANGE_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 32  # a scraper needs one; the rest is someone holding sockets open


class MetricsServer:
    """Serves the exposition ``render()`` returns."""

    def __init__(self, host: str, port: int, render: Callable[[], bytes]) -> None:
        self.host = host
        self.port = port
        self._render = render
        self._server: asyncio.Server | None = None
        self._open = 0

    @property
    def address(self) -> tuple[str, int]:
        """Where it listens (the real port when ``port`` was 0)."""
        if self._server is None or not self._server.sockets:
            return self.host, self.port
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    @property
    def open_connections(self) -> int:
        """Connections being answered now, at most ``MAX_CONNECTIONS``."""
        return self._open

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=HEAD_LIMIT
        )
        host, port = self.address
        log.info("metrics: serving http://%s:%d/metrics", host, port)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        self._open += 1
        try:
            async with asyncio.timeout(EXCHANGE_TIMEOUT_S):
                await self._answer(reader, writer)
                writer.close()
                await writer.wait_closed()  # every byte sent, or the timeout
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # a client that went away or sent garbage gets nothing
        except asyncio.LimitOverrunError:
            pass
        except Exception:
            log.exception("metrics: failed to answer a request")
        finally:
            self._open -= 1
            writer.transport.abort()  # a no-op once closed; else what a stalled client left

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target = _request_line(head)
        if method not in ("GET", "HEAD"):
            status, body = "405 Method Not Allowed", b"only GET /metrics\n"
        elif target.split("?", 1)[0] != "/metrics":
            status, body = "404 Not Found", b"see /metrics\n"
        else:
            status, body = "200 OK", self._render()
        headers = (
            f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(headers.encode() + (b"" if method == "HEAD" else body))
        await writer.drain()


def _request_line(head: bytes) -> tuple[str, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3:
        raise ValueError(f"not an HTTP request line: {line[:80]!r}")
    return parts[0], parts[1]
