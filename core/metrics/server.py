"""``GET /metrics`` on ``metrics.listen``: a minimal HTTP/1.1 server on the event loop.

On the loop, not in a thread: the exposition reads the kernel's own counters
(dicts the loop changes), so it is generated where they change, never
concurrently. One request per connection (``Connection: close``), a request
head of at most 8 KiB read within 5 s; only ``GET``/``HEAD`` of ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

__all__ = ["CONTENT_TYPE", "MetricsServer"]

log = logging.getLogger("core.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HEAD_LIMIT = 8192
READ_TIMEOUT_S = 5.0


class MetricsServer:
    """Serves the exposition ``render()`` returns."""

    def __init__(self, host: str, port: int, render: Callable[[], bytes]) -> None:
        self.host = host
        self.port = port
        self._render = render
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        """Where it listens (the real port when ``port`` was 0)."""
        if self._server is None or not self._server.sockets:
            return self.host, self.port
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

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
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
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
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # a client that went away or sent garbage gets nothing
        except asyncio.LimitOverrunError:
            pass
        except Exception:
            log.exception("metrics: failed to answer a request")
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def _request_line(head: bytes) -> tuple[str, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3:
        raise ValueError(f"not an HTTP request line: {line[:80]!r}")
    return parts[0], parts[1]
