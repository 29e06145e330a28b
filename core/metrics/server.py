"""``GET /metrics`` on ``metrics.listen``: prometheus_client's ASGI exposition behind
uvicorn's HTTP/1.1 protocol, on the kernel's event loop.

The libraries do the work: ``make_asgi_app`` renders the registry (the text
format, or OpenMetrics when the scraper asks for it, gzip when it accepts it,
``?name[]=`` to pick families) and uvicorn's h11 protocol parses the request.
On the loop, not in ``start_http_server``'s thread: the exposition reads the
kernel's own counters (dicts the loop changes), so it is generated where they
change, never concurrently. ``uvicorn.Server`` is not used either: it wants the
signals and exits the process when it cannot bind, and the kernel owns both; the
protocol is served from the loop's own ``create_server``.

What neither library has is added by ``MetricsServer`` (ADR 0047): the whole
exchange (head read, answer written) within ``EXCHANGE_TIMEOUT_S``, at most
``MAX_CONNECTIONS`` at once (one more is closed unanswered), a request head of
at most ``HEAD_LIMIT`` bytes, one request per connection (``Connection:
close``), only ``GET``/``HEAD`` of ``/metrics``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import uvicorn
from prometheus_client import make_asgi_app
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

if TYPE_CHECKING:
    from prometheus_client.registry import Collector
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_TYPE", "GuardedH11Protocol", "MetricsServer", "metrics_app"]

log = logging.getLogger("core.metrics")

# what a scraper that states no preference gets (prometheus_client's choice)
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
HEAD_LIMIT = 8192
EXCHANGE_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 32  # a scraper needs one; the rest is someone holding sockets open
_CLOSE = (b"connection", b"close")


class MetricsServer:
    """Serves ``registry`` (a prometheus_client ``Collector``) at ``/metrics``."""

    def __init__(self, host: str, port: int, registry: Collector) -> None:
        self.host = host
        self.port = port
        self._state = ServerState()
        self._config = uvicorn.Config(
            metrics_app(registry),
            log_config=None,
            access_log=False,
            lifespan="off",
            http=GuardedH11Protocol,
            ws="none",
            proxy_headers=False,
            h11_max_incomplete_event_size=HEAD_LIMIT,
        )
        self._config.load()
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        """Where it listens (the real port when ``port`` was 0)."""
        if self._server is None or not self._server.sockets:
            return self.host, self.port
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    @property
    def open_connections(self) -> int:
        """Connections open now, at most ``MAX_CONNECTIONS`` once a refused one is gone."""
        return len(self._state.connections)

    async def start(self) -> None:
        """Listen (``OSError`` when the address is taken or not of this machine)."""
        config, state = self._config, self._state
        self._server = await asyncio.get_running_loop().create_server(
            lambda: GuardedH11Protocol(config=config, server_state=state, app_state={}),
            self.host,
            self.port,
        )
        host, port = self.address
        log.info("metrics: serving http://%s:%d/metrics", host, port)

    async def aclose(self) -> None:
        """Stop listening and drop the connections still open (a scrape cut short
        is retried by the scraper; the kernel's stop does not wait for one)."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self._state.connections):
            connection.transport.abort()
        await self._server.wait_closed()
        self._server = None


def metrics_app(registry: Collector) -> ASGIApp:
    """prometheus_client's app for ``GET``/``HEAD /metrics``, 405 and 404 around it."""
    exposition = make_asgi_app(registry)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        framed = _framed(send)
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(framed, 405, b"only GET /metrics\n")
        elif scope["path"] != "/metrics":
            await _answer(framed, 404, b"see /metrics\n")
        else:
            await exposition(scope, receive, framed)

    return app


def _framed(send: Send) -> Send:
    """``send`` with the head held until the body is known: an answer in one piece
    goes out with ``Content-Length`` (not chunked, as a bare client reads it) and
    ``Connection: close`` (one request per connection: the deadline is per
    exchange, and a scraper opens one per scrape)."""
    held: list[Message] = []

    async def framed(message: Message) -> None:
        if message["type"] == "http.response.start":
            held.append(message)
            return
        if held:
            start = held.pop()
            headers = [*start.get("headers", ()), _CLOSE]
            if not message.get("more_body", False):
                length = str(len(message.get("body", b""))).encode()
                headers.append((b"content-length", length))
            await send({**start, "headers": headers})
        await send(message)

    return framed


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the connection cap and the exchange deadline
    (read from this module when a connection opens, so tests may lower them)."""

    deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        if len(self.connections) > MAX_CONNECTIONS:
            self.transport.abort()
            return
        # abort, not close: a client that never reads would keep a close pending
        self.deadline = self.loop.call_later(EXCHANGE_TIMEOUT_S, self.transport.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        super().connection_lost(exc)
