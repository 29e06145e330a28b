"""Sending mail over SMTP (aiosmtplib), as answers in their thread.

Every mail has its own ``Message-ID`` (on the bot's domain), and an answer
names the mail it answers (``In-Reply-To``) and its thread (``References``),
with the thread's subject after ``Re:``, so every mail client shows it in
the conversation. One SMTP connection per mail: a household's mail is a few
a day, and a connection kept open would be dropped by the server anyway.

The login is the mailbox's (the same as IMAP's) whenever the server offers
``AUTH``; a local relay that offers none gets the mail unauthenticated.
Network failures and the server's temporary refusals (4xx) are retried with
backoff, ``max_attempts`` times; then, and at once for a permanent refusal
(5xx, a refused login), the error is raised so the kernel's outbox retries
the delivery later and logs why.
"""

from __future__ import annotations

import asyncio
import logging
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

import aiosmtplib

from core.extensions.sdk import Backoff

from .config import EmailConfig

SEND_BACKOFF = Backoff(0.5, 30.0)
SMTP_TIMEOUT_S = 30.0
_TRANSIENT = (
    aiosmtplib.SMTPConnectError,
    aiosmtplib.SMTPServerDisconnected,
    aiosmtplib.SMTPTimeoutError,
    OSError,
)


def compose(
    config: EmailConfig,
    to: str,
    subject: str,
    text: str,
    *,
    in_reply_to: str | None = None,
    references: list[str] | None = None,
    automatic: bool = False,
) -> EmailMessage:
    """A plain-text mail from the bot's address; ``automatic`` marks a reply no
    person wrote (RFC 3834), which other robots do not answer."""
    assert config.address is not None, "the channel's address is configured"
    message = EmailMessage()
    message["From"] = config.address
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain=config.address.rpartition("@")[2])
    if in_reply_to:
        message["In-Reply-To"] = in_reply_to
    if references:
        message["References"] = " ".join(references)
    if automatic:
        message["Auto-Submitted"] = "auto-replied"
    message.set_content(text)
    return message


def smtp_client(config: EmailConfig, *, limit_s: float = SMTP_TIMEOUT_S) -> aiosmtplib.SMTP:
    """A client for the configured server (not connected yet)."""
    return aiosmtplib.SMTP(
        hostname=config.smtp_host,
        port=config.smtp_port,
        use_tls=config.smtp_security == "ssl",
        start_tls=config.smtp_security == "starttls",
        timeout=limit_s,
    )


async def open_smtp(
    config: EmailConfig, password: str | None, *, limit_s: float = SMTP_TIMEOUT_S
) -> aiosmtplib.SMTP:
    """Connected and, when the server offers ``AUTH``, logged in."""
    client = smtp_client(config, limit_s=limit_s)
    await client.connect()
    try:
        await client.ehlo()  # what the server offers (after STARTTLS: offered anew)
        if client.supports_extension("auth") and config.login and password:
            await client.login(config.login, password)
    except BaseException:
        client.close()
        raise
    return client


class Sender:
    def __init__(
        self,
        config: EmailConfig,
        password: str | None,
        logger: logging.Logger,
        *,
        max_attempts: int = 4,
    ) -> None:
        self._config = config
        self._password = password
        self._logger = logger
        self.max_attempts = max_attempts

    async def send(self, message: EmailMessage) -> None:
        """Hand ``message`` to the SMTP server, retrying what is worth retrying."""
        failures = SEND_BACKOFF.delays()
        attempt = 1
        while True:
            try:
                await self._send_once(message)
                return
            except aiosmtplib.SMTPResponseException as exc:
                if not 400 <= exc.code < 500 or attempt >= self.max_attempts:
                    raise
                problem = f"{exc.code} {exc.message}"
            except aiosmtplib.SMTPRecipientsRefused as exc:
                if attempt >= self.max_attempts or not all(
                    400 <= r.code < 500 for r in exc.recipients
                ):
                    raise
                problem = str(exc)
            except _TRANSIENT as exc:
                if attempt >= self.max_attempts:
                    raise
                problem = str(exc) or type(exc).__name__
            wait = failures.next()
            self._logger.warning(
                "sending mail to %s failed (%s); retrying in %.1f s", message["To"], problem, wait
            )
            attempt += 1
            await asyncio.sleep(wait)

    async def _send_once(self, message: EmailMessage) -> None:
        client = await open_smtp(self._config, self._password)
        try:
            await client.send_message(message)
        finally:
            try:
                await client.quit()
            except (aiosmtplib.SMTPException, OSError):
                client.close()
