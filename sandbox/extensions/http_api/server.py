"""uvicorn on the kernel's event loop, on a socket bound by the extension itself.

Binding in ``start()`` makes a taken port fail the extension at start with
the address in the message. uvicorn's ``serve()`` is not used, since it
takes over SIGINT and SIGTERM, which the kernel owns: the server's own
``startup``, ``main_loop`` and ``shutdown`` run instead.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import uvicorn

from .config import host_port

GRACE_S = 2.0
KEEP_ALIVE_S = 65


class ApiServerError(Exception):
    """The server cannot listen (address taken, not an address of this machine)."""


class ApiServer:
    """One listening socket and the uvicorn server on it."""

    def __init__(self, app: Any, host: str, port: int, logger: logging.Logger) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._log = logger
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = port

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
            http="h11",
            ws="none",
            timeout_graceful_shutdown=GRACE_S,
            # longer than clients keep idle connections (httpx: 5 s), so the server
            # never closes one just as a client sends on it
            timeout_keep_alive=KEEP_ALIVE_S,
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
