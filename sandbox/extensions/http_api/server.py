"""uvicorn on the kernel's event loop, on a socket bound by the extension itself.

Binding in ``start()`` makes a taken port fail the extension at start with
the address in the message. uvicorn's ``serve()`` is not used, since it
takes over SIGINT and SIGTERM, which the kernel owns: the server's own
``startup``, ``main_loop`` and ``shutdown`` run instead.

uvicorn's h11 protocol caps a request head at ``MAX_HEAD_BYTES`` and closes a
connection idle ``KEEP_ALIVE_S`` after a response, but it waits forever for
the first request of a connection and for a head that trickles in, and it
accepts any number of connections (its ``limit_concurrency`` only answers
503 to requests, leaving their connections open). ``guarded_protocol`` adds
the rest (ADR 0047): a head must be complete within ``header_timeout_s`` of
the connection or of its own first byte, and past ``max_connections`` open
connections a new one is answered 503 and closed at once.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .config import ApiConfig, host_port

GRACE_S = 2.0
KEEP_ALIVE_S = 65
MAX_HEAD_BYTES = 16 * 1024
_BUSY_TEXT = b"too many open connections"
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s"
) % (len(_BUSY_TEXT), _BUSY_TEXT)


class ApiServerError(Exception):
    """The server cannot listen (address taken, not an address of this machine)."""


class ApiServer:
    """One listening socket and the uvicorn server on it."""

    def __init__(self, app: Any, config: ApiConfig, logger: logging.Logger) -> None:
        self._app = app
        self._host = config.host
        self._port = config.port
        self._protocol = guarded_protocol(config.header_timeout_s, config.max_connections)
        self._log = logger
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = config.port

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Bind, then serve in a task of its own."""
        sock = self._bind()
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            self._app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=self._protocol,
            ws="none",
            timeout_graceful_shutdown=GRACE_S,
            # longer than clients keep idle connections (httpx: 5 s), so the server
            # never closes one just as a client sends on it
            timeout_keep_alive=KEEP_ALIVE_S,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        )
        config.load()
        server = self._server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])  # not serve(): that would take the signals
        self._task = asyncio.create_task(_serve(server, sock), name="http_api-server")
        self._log.info("serving on http://%s/", host_port(self._host, self.port))

    async def wait(self) -> None:
        """Until the server ends (it should only when ``stop`` is called)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        server, task = self._server, self._task
        self._server = self._task = None
        if server is None or task is None:
            return
        server.should_exit = True
        try:
            async with asyncio.timeout(GRACE_S + 3):
                await task
        except TimeoutError:
            task.cancel()
        except Exception as exc:  # a failing shutdown must not fail the kernel's stop
            self._log.warning("the HTTP server stopped with an error: %s", exc)

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio turns Nagle off only on sockets that say TCP, and
        # with Nagle on every keep-alive response waits ~40 ms for a delayed ACK
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
            sock.listen(1024)
        except OSError as exc:
            sock.close()
            where = host_port(self._host, self._port)
            raise ApiServerError(
                f"cannot listen on {where}: {exc.strerror or exc} "
                "(change extensions.http_api.listen)"
            ) from None
        sock.setblocking(False)
        return sock


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    await server.main_loop()
    await server.shutdown(sockets=[sock])


def guarded_protocol(header_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline on request heads and a connection cap."""

    class GuardedH11Protocol(H11Protocol):
        head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            if len(self.connections) > max_connections:
                self.transport.write(BUSY)
                self.transport.close()
                return
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            if self.head_timer is None and self._between_requests():
                self._arm_head_timer()  # the first byte of the next request
            super().data_received(data)
            if self.head_timer is not None and not self._between_requests():
                self.head_timer.cancel()  # its head is complete: the app has it
                self.head_timer = None

        def connection_lost(self, exc: Exception | None) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm_head_timer(self) -> None:
            self.head_timer = self.loop.call_later(header_timeout_s, self._head_too_slow)

        def _head_too_slow(self) -> None:
            self.head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol
