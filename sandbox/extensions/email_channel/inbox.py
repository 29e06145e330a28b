"""The IMAP loop: new mail fetched, handed over, and acknowledged after journaling.

One connection (aioimaplib) logs in, selects the mailbox and fetches every
message past the last UID handled; each is handed to ``handle``, which
returns once the message is journaled, and only then is the message flagged
``\\Seen`` and its UID written to ``inbox.json`` in the channel's data dir.
A kernel killed at any point starts again after the last UID written, so a
mail is either handled or fetched again — and a mail fetched again is the
same journal entry (idempotency key ``email:MESSAGE-ID``), answered once.
On the very first start (no UID yet), or when the mailbox's ``UIDVALIDITY``
changed, the unread (``UNSEEN``) messages are the new ones, and every mail
after them.

Between fetches the connection waits in ``IDLE`` (the server tells at once
when mail arrives; the wait is renewed every ``idle_refresh_s``, under the
29 minutes servers allow); a server without IDLE, or ``idle: false``, is
polled every ``poll_interval_s``. A dropped connection reconnects with
backoff; a refused login stops the loop (``ImapAuthError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aioimaplib

from core.extensions.sdk import Backoff

from .config import EmailConfig

STATE_FILE = "inbox.json"
IMAP_TIMEOUT_S = 30.0
RECONNECT_BACKOFF = Backoff(1.0, 60.0)
_NETWORK = (OSError, TimeoutError, aioimaplib.AioImapException)

T = TypeVar("T")
Handler = Callable[[int, bytes], Awaitable[bool]]  # uid, raw mail -> delete it once read


class ImapAuthError(RuntimeError):
    """The IMAP server refuses the login."""


async def open_imap(
    config: EmailConfig, password: str | None, *, limit_s: float = IMAP_TIMEOUT_S
) -> aioimaplib.IMAP4:
    """Connected and logged in; ``ImapAuthError`` when the login is refused."""
    assert config.imap_host is not None, "the IMAP server is configured"
    if config.imap_security == "ssl":
        client: aioimaplib.IMAP4 = aioimaplib.IMAP4_SSL(
            config.imap_host,
            config.imap_port,
            timeout=limit_s,
            ssl_context=ssl.create_default_context(),
        )
    else:
        client = aioimaplib.IMAP4(config.imap_host, config.imap_port, timeout=limit_s)
    await client.wait_hello_from_server()
    response = await client.login(config.login or "", password or "")
    if response.result != "OK":
        await _quietly_logout(client)
        said = b" ".join(bytes(line) for line in response.lines).decode("utf-8", "replace")
        raise ImapAuthError(
            f"the IMAP server {config.imap_host} refused the login of {config.login} ({said})"
        )
    return client


class Inbox:
    def __init__(
        self,
        config: EmailConfig,
        password: str | None,
        handle: Handler,
        logger: logging.Logger,
        data_dir: Path,
    ) -> None:
        self._config = config
        self._password = password
        self._handle = handle
        self._logger = logger
        self.path = data_dir / STATE_FILE
        self._validity: int | None = None
        self._last_uid: int | None = None
        self._uid_next: int | None = None  # the mailbox's UIDNEXT when it was selected

    def load(self) -> None:
        if not self.path.exists():
            return
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
            self._validity, self._last_uid = int(state["uidvalidity"]), int(state["last_uid"])
        except (ValueError, KeyError, TypeError) as exc:
            self._logger.warning("%s is unreadable (%s): reading unread mail", self.path, exc)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        state = {"uidvalidity": self._validity, "last_uid": self._last_uid}
        temporary.write_text(json.dumps(state), encoding="utf-8")
        os.replace(temporary, self.path)

    async def run(self) -> None:
        """Fetch mail until cancelled; ``ImapAuthError`` when the login is refused."""
        await asyncio.to_thread(self.load)
        failures = RECONNECT_BACKOFF.delays()
        while True:
            try:
                client = await open_imap(self._config, self._password)
            except _NETWORK as exc:
                delay = failures.next()
                self._logger.warning(
                    "cannot reach the IMAP server %s (%s); retrying in %.1f s",
                    self._config.imap_host,
                    one_line(exc),
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            try:
                lost = asyncio.Event()
                client.protocol.conn_lost_cb = lambda _exc, event=lost: event.set()
                await self._select(client)
                failures = RECONNECT_BACKOFF.delays()
                while True:
                    await self._fetch_new(client)
                    await self._wait(client, lost)
            except _NETWORK as exc:
                delay = failures.next()
                self._logger.warning("IMAP: %s; reconnecting in %.1f s", one_line(exc), delay)
                await asyncio.sleep(delay)
            finally:
                await _quietly_logout(client)

    async def _select(self, client: aioimaplib.IMAP4) -> None:
        response = await client.select(self._config.mailbox)
        if response.result != "OK":
            raise aioimaplib.Abort(f"cannot select {self._config.mailbox}: {response.lines}")
        text = b" ".join(bytes(line) for line in response.lines)
        found = re.search(rb"UIDVALIDITY (\d+)", text)
        validity = int(found.group(1)) if found else None
        following = re.search(rb"UIDNEXT (\d+)", text)
        self._uid_next = int(following.group(1)) if following else None
        if validity != self._validity:
            if self._validity is not None:
                self._logger.warning("the mailbox's UIDVALIDITY changed: reading unread mail")
            self._validity, self._last_uid = validity, None

    async def _fetch_new(self, client: aioimaplib.IMAP4) -> None:
        last = self._last_uid
        criteria = "UNSEEN" if last is None else f"UID {last + 1}:*"
        response = await client.uid_search(criteria)
        if response.result != "OK":
            raise aioimaplib.Abort(f"UID SEARCH {criteria}: {response.lines}")
        uids = sorted(
            int(n) for line in response.lines[:-1] for n in bytes(line).split() if n.isdigit()
        )
        for uid in uids:
            if last is not None and uid <= last:
                continue  # "N:*" names the last message when none is newer
            raw = await self._fetch(client, uid)
            delete = await self._handle(uid, raw) if raw is not None else False
            flags = r"(\Seen \Deleted)" if delete else r"(\Seen)"
            await client.uid("store", str(uid), "+FLAGS", flags)
            if delete:
                await client.expunge()
            self._last_uid = max(uid, self._last_uid or 0)
            await asyncio.to_thread(self.save)
        if last is None and self._uid_next is not None:
            # the unread mail is handled: from now on, every mail past the mailbox's
            # last UID at the start is new, read by someone else meanwhile or not
            self._last_uid = max(self._uid_next - 1, self._last_uid or 0)
            await asyncio.to_thread(self.save)

    async def _fetch(self, client: aioimaplib.IMAP4, uid: int) -> bytes | None:
        response = await client.uid("fetch", str(uid), "(BODY.PEEK[])")
        if response.result != "OK":
            raise aioimaplib.Abort(f"UID FETCH {uid}: {response.lines}")
        for line in response.lines:
            if isinstance(line, bytearray):
                return bytes(line)
        self._logger.warning("mail %d vanished before it was read", uid)
        return None

    async def _wait(self, client: aioimaplib.IMAP4, lost: asyncio.Event) -> None:
        """Until there may be new mail: IDLE, else the poll interval; a connection the
        server closed meanwhile raises ``ConnectionError`` (the loop reconnects)."""
        if not (self._config.idle and client.has_capability("IDLE")):
            await _unless_lost(asyncio.sleep(self._config.poll_interval_s), lost)
            await client.noop()
            return
        refresh = self._config.idle_refresh_s
        idle = await client.idle_start(timeout=refresh)
        try:
            while True:
                push: Any = await _unless_lost(
                    client.wait_server_push(timeout=refresh + IMAP_TIMEOUT_S), lost
                )
                if push == aioimaplib.STOP_WAIT_SERVER_PUSH:
                    break  # renewed: a fetch costs little and keeps the connection alive
                if any(re.search(rb"EXISTS|RECENT", bytes(line)) for line in push):
                    break
        finally:
            if client.has_pending_idle() and not lost.is_set():
                client.idle_done()
        async with asyncio.timeout(IMAP_TIMEOUT_S):
            await idle


async def _unless_lost(waiting: Awaitable[T], lost: asyncio.Event) -> T:
    """``waiting``'s result, unless the connection is lost first (``ConnectionError``):
    aioimaplib tells of a closed connection only through its callback."""
    task = asyncio.ensure_future(waiting)
    watch = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
    if lost.is_set() and not task.done():
        raise ConnectionError("the IMAP server closed the connection")
    return task.result()


async def _quietly_logout(client: aioimaplib.IMAP4) -> None:
    """Say goodbye if the connection still listens (a dead one has nothing to hear)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(5.0):
            await client.logout()


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
