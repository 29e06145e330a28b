"""The channel's own setup (a ``SetupProvider``): mailbox, servers, password, allow-list.

``main.py setup`` loads the extension without its password and walks these
questions; the schema grows with the answers (ADR 0053). The password is
checked live before it is taken — an IMAP login and an SMTP connection
(with a login when the server offers one) — and a refused one is asked
again with the server's words. The last question is ``allowed_senders``,
offering whoever wrote to the mailbox lately (Enter takes them, as the chat
channels' setup offers who wrote to the bot);
the wizard keeps the settings in the local settings layer and the password
in ``.env``. A channel that is already running has nothing to ask: ``/pair``
admits people there.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from email.parser import BytesParser
from email.policy import default
from email.utils import parseaddr
from typing import Any

import aiosmtplib
import yaml

from .config import IMAP_SECURITY, SMTP_SECURITY, ConfigError, EmailConfig, normal_address
from .inbox import ImapAuthError, one_line, open_imap
from .sender import open_smtp

SETUP_TIMEOUT_S = 10.0
RECENT_MAILS = 20  # the mails whose senders setup offers for the allow-list
ALLOWED = "allowed_senders"
_PORTS = {"imap": {"ssl": 993, "none": 143}, "smtp": {"starttls": 587, "ssl": 465, "none": 25}}


class EmailSetup:
    """The answers so far (as a config), and what they lead to ask next."""

    def __init__(self, password_secret: str, password_now: str | None, config: EmailConfig) -> None:
        self._secret = password_secret
        self._password_now = password_now
        self._config = config
        self._asked: set[str] = set()
        self._checked = False
        self._wrote: list[str] = []  # the mailbox's recent senders, once the login works

    def schema(self, running: bool) -> list[dict[str, Any]]:
        if running:
            return []
        config = self._config
        domain = config.address.rpartition("@")[2] if config.address else None
        steps: list[dict[str, Any]] = [
            _field(
                "address", "Hearth's own e-mail address (a mailbox just for it)", config.address
            ),
            _field(
                "imap_host",
                "IMAP server",
                config.imap_host or (f"imap.{domain}" if domain else None),
            ),
            _choice(
                "imap_security",
                "IMAP security (ssl: port 993)",
                config.imap_security,
                IMAP_SECURITY,
            ),
            _field("imap_port", "IMAP port", str(config.imap_port)),
            _field(
                "smtp_host",
                "SMTP server",
                config.smtp_host or (f"smtp.{domain}" if domain else None),
            ),
            _choice("smtp_security", "SMTP security", config.smtp_security, SMTP_SECURITY),
            _field("smtp_port", "SMTP port", str(config.smtp_port)),
            _field("username", "Login name", config.login, required=False),
        ]
        fields: list[dict[str, Any]] = []
        for step in steps:
            fields.append(step)
            if step["name"] not in self._asked:
                return fields
        keeps = " (hidden; Enter keeps the one set now)" if self._password_now else " (hidden)"
        password: dict[str, Any] = {
            "name": self._secret,
            "prompt": f"The mailbox's password{keeps}",
            "secret": True,
            "required": False,
        }
        if self._password_now:
            password["default"] = self._password_now  # never shown: the field is secret
        fields.append(password)
        if not self._checked:
            return fields
        offered = list(config.allowed_senders) or self._wrote
        wrote = f"; Enter takes who wrote lately: {', '.join(self._wrote)}" if self._wrote else ""
        fields.append(
            {
                "name": ALLOWED,
                "prompt": f'Addresses Hearth answers (a list, e.g. ["alice@example.org"]{wrote})',
                "default": json.dumps(offered),
                "required": False,
            }
        )
        return fields

    async def apply(self, name: str, value: str) -> None:
        """Take one answer; ``ValueError`` refuses it (it is asked again)."""
        text = value.strip()
        config = self._config
        if name == "address":
            config = replace(config, address=normal_address(name, text))
        elif name in ("imap_host", "smtp_host"):
            if not text or any(c.isspace() for c in text):
                raise ValueError(f"{text!r} is not a host name")
            config = replace(config, **{name: text})
        elif name in ("imap_security", "smtp_security"):
            kind = name.split("_")[0]
            if text not in _PORTS[kind]:
                raise ValueError(f"{text!r} is not one of {', '.join(_PORTS[kind])}")
            config = replace(config, **{name: text, f"{kind}_port": _PORTS[kind][text]})
        elif name in ("imap_port", "smtp_port"):
            if not text.isdigit() or not 0 < int(text) < 65536:
                raise ValueError(f"{text!r} is not a port number (1-65535)")
            config = replace(config, **{name: int(text)})
        elif name == "username":
            config = replace(config, username=text or None)
        elif name == self._secret:
            refused, unreachable = await check_login(config, text)
            if refused or unreachable:
                raise ValueError("; ".join(refused + unreachable))
            self._checked = True
            self._wrote = await recent_senders(config, text or self._password_now)
        elif name == ALLOWED:
            config = replace(config, allowed_senders=tuple(address_list(value)))
        else:
            raise ValueError(f"unknown setup field {name!r}")
        self._config = config
        self._asked.add(name)

    async def complete(self, running: bool) -> tuple[bool, str]:
        if running:
            return True, f"{self._config.address} is running; /pair admits someone"
        if not self._checked:
            return False, "no working password: e-mail stays off"
        who = ", ".join(self._config.allowed_senders) or "nobody yet (/pair admits someone later)"
        return True, f"{self._config.address} answers {who}; start Hearth to use it"


async def check_login(config: EmailConfig, password: str | None) -> tuple[list[str], list[str]]:
    """An IMAP login and an SMTP connection (and login) with ``password``: what the
    servers refused, and which could not be reached, each in a sentence."""
    refused: list[str] = []
    unreachable: list[str] = []
    try:
        async with asyncio.timeout(SETUP_TIMEOUT_S):
            imap = await open_imap(config, password, limit_s=SETUP_TIMEOUT_S)
            await imap.logout()
    except ImapAuthError as exc:
        refused.append(str(exc))
    except Exception as exc:  # unreachable, a TLS failure, a server that is no IMAP server
        where = f"{config.imap_host}:{config.imap_port}"
        unreachable.append(f"cannot reach the IMAP server {where}: {one_line(exc)}")
    try:
        async with asyncio.timeout(SETUP_TIMEOUT_S):
            smtp = await open_smtp(config, password, limit_s=SETUP_TIMEOUT_S)
            await smtp.quit()
    except aiosmtplib.SMTPAuthenticationError as exc:
        said = f"{exc.code} {exc.message}"
        refused.append(f"the SMTP server {config.smtp_host} refused the login ({said})")
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        where = f"{config.smtp_host}:{config.smtp_port}"
        unreachable.append(f"cannot reach the SMTP server {where}: {one_line(exc)}")
    return refused, unreachable


async def recent_senders(config: EmailConfig, password: str | None) -> list[str]:
    """Who wrote the last ``RECENT_MAILS`` mails of the mailbox, newest first, each
    once, Hearth's own address left out; none when the mailbox cannot be read (the
    question then offers nothing, as before)."""
    try:
        async with asyncio.timeout(SETUP_TIMEOUT_S):
            imap = await open_imap(config, password, limit_s=SETUP_TIMEOUT_S)
            try:
                await imap.select(config.mailbox)
                found = await imap.uid_search("ALL")
                uids = [n for line in found.lines[:-1] for n in bytes(line).split() if n.isdigit()]
                fetched = []
                for uid in reversed(uids[-RECENT_MAILS:]):
                    headers = "(BODY.PEEK[HEADER.FIELDS (FROM)])"
                    answer = await imap.uid("fetch", uid.decode(), headers)
                    fetched += [bytes(line) for line in answer.lines if isinstance(line, bytearray)]
            finally:
                await imap.logout()
    except Exception:  # a convenience: the list is typed instead
        return []
    senders: list[str] = []
    for raw in fetched:
        _, address = parseaddr(BytesParser(policy=default).parsebytes(raw).get("From", ""))
        try:
            sender = normal_address(ALLOWED, address)
        except ConfigError:
            continue
        if sender != config.address and sender not in senders:
            senders.append(sender)
    return senders


def address_list(text: str) -> list[str]:
    """``["a@x.org", "b@y.org"]``: the addresses served, lowercased."""
    try:
        value = yaml.safe_load(text) if text.strip() else []
    except yaml.YAMLError:
        value = None
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, list):
        raise ValueError(f'not a list of e-mail addresses: {text!r} (e.g. ["alice@example.org"])')
    try:
        return list(dict.fromkeys(normal_address(ALLOWED, item) for item in value))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def _field(name: str, prompt: str, default: str | None, *, required: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "prompt": prompt, "required": required}
    if default:
        entry["default"] = default
    return entry


def _choice(name: str, prompt: str, default: str, choices: tuple[str, ...]) -> dict[str, Any]:
    return {"name": name, "prompt": prompt, "default": default, "choices": list(choices)}
