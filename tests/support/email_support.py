"""Real mail servers for the e-mail channel tests: Debian's Dovecot (IMAP, with
IDLE) started as a foreground process with its own configuration on a free
loopback port, and aiosmtpd (SMTP, with a login) in a thread; people who write
to the bot by IMAP ``APPEND`` into its inbox and read what it sent them from
the SMTP server's list.

Dovecot refuses to run its login process as root, and a mail user with uid 0
("userdb returned 0 as uid"): run as root (CI), the login process runs as
``dovenull`` and mail is kept as ``dovecot``, both created by the Debian
package; run as anyone else, every process runs as that user. Its files are
in a directory of their own under the system's temp dir (readable by those
users, which pytest's 0700 temp dirs are not), removed on ``stop``.
"""

from __future__ import annotations

import asyncio
import grp
import imaplib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import make_msgid
from pathlib import Path
from typing import Any

from conftest import PROJECT_ROOT

EXTENSION_ID = "email_channel"
SOURCE_DIR = PROJECT_ROOT / "sandbox" / "extensions" / EXTENSION_ID
BOT = "hearth@home.test"
PASSWORD = "s3cret-pass"
START_TIMEOUT_S = 30.0


def servers_missing() -> str | None:
    """Why the tests cannot run the mail servers here (``None``: they can)."""
    if shutil.which("dovecot") is None:
        return "dovecot not installed (apt-get install dovecot-imapd)"
    try:
        import aioimaplib  # noqa: F401
        import aiosmtpd  # noqa: F401
        import aiosmtplib  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} not installed (pip install -e '.[dev,email]')"
    if os.geteuid() == 0 and not all(_user_exists(u) for u in ("dovecot", "dovenull")):
        return "the dovecot and dovenull users are missing (the Debian package makes them)"
    return None


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Dovecot:
    """One IMAP server; ``port`` on 127.0.0.1, users with ``PASSWORD``."""

    def __init__(self, users: Sequence[str] = (BOT,)) -> None:
        self.port = free_port()
        self.users = list(users)
        self.root = Path(tempfile.mkdtemp(prefix="hearth-dovecot-"))
        self.start_s = 0.0
        self._proc: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        root = self.root
        if os.geteuid() == 0:
            internal, login, mail_user, group = "dovecot", "dovenull", "dovecot", "dovecot"
        else:
            internal = login = mail_user = pwd.getpwuid(os.geteuid()).pw_name
            group = grp.getgrgid(os.getegid()).gr_name
        return f"""
protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_failure_delay = 0
auth_mechanisms = plain login
login_trusted_networks = 127.0.0.0/8
default_internal_user = {internal}
default_internal_group = {group}
default_login_user = {login}
first_valid_uid = 1
mail_location = maildir:{root}/mail/%n
mailbox_idle_check_interval = 1 secs
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={mail_user} gid={group} home={root}/mail/%n
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
}}
service anvil {{
  chroot =
}}
"""

    def start(self) -> Dovecot:
        root = self.root
        root.chmod(0o755)
        for name in ("run", "state", "mail"):
            (root / name).mkdir()
        if os.geteuid() == 0:
            shutil.chown(root / "mail", "dovecot", "dovecot")
        (root / "passwd").write_text("".join(f"{u}:{{PLAIN}}{PASSWORD}\n" for u in self.users))
        (root / "dovecot.conf").write_text(self.config())
        self._launch()
        return self

    def kick(self, user: str = BOT) -> None:
        """Close every connection of ``user`` (``doveadm kick``), as a server restart would."""
        done = subprocess.run(
            ["doveadm", "-c", str(self.root / "dovecot.conf"), "kick", user],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr + self.log_tail()

    def _launch(self) -> None:
        began = time.monotonic()
        self._proc = subprocess.Popen(
            ["dovecot", "-F", "-c", str(self.root / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "stderr.log").open("ab"),
        )
        while time.monotonic() - began < START_TIMEOUT_S:
            if self._proc.poll() is not None:
                raise RuntimeError(f"dovecot exited: {self.log_tail()}")
            try:
                client = self.client(self.users[0])
            except OSError:
                time.sleep(0.05)
                continue
            client.logout()
            self.start_s = time.monotonic() - began
            return
        raise RuntimeError(f"dovecot did not answer in {START_TIMEOUT_S} s: {self.log_tail()}")

    def client(self, user: str) -> imaplib.IMAP4:
        client = imaplib.IMAP4("127.0.0.1", self.port, timeout=10)
        client.login(user, PASSWORD)
        return client

    def stop(self) -> None:
        self._terminate()
        shutil.rmtree(self.root, ignore_errors=True)

    def _terminate(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)

    def log_tail(self) -> str:
        parts = [
            p.read_text(errors="replace")
            for p in (self.root / "dovecot.log", self.root / "stderr.log")
            if p.exists()
        ]
        return "\n".join(parts)[-3000:]

    def deliver(self, message: EmailMessage | bytes, user: str = BOT) -> None:
        """Put a mail in ``user``'s inbox (IMAP APPEND), as if it had arrived."""
        raw = message if isinstance(message, bytes) else message.as_bytes()
        client = self.client(user)
        try:
            status, said = client.append("INBOX", None, None, raw)
            assert status == "OK", said
        finally:
            client.logout()

    def inbox_count(self, user: str = BOT) -> int:
        client = self.client(user)
        try:
            status, data = client.select("INBOX")
            assert status == "OK", data
            return int(data[0] or 0)
        finally:
            client.logout()


class SmtpSink:
    """aiosmtpd on a free port, with a login (``BOT`` / ``PASSWORD``); keeps every mail."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.port = free_port()
        self.received: list[tuple[list[str], EmailMessage]] = []
        self.logins: list[str] = []
        self._lock = threading.Lock()
        self._controller = Controller(
            self,
            hostname="127.0.0.1",
            port=self.port,
            authenticator=self._authenticate,
            auth_require_tls=False,
        )

    def start(self) -> SmtpSink:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def _authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any
    ) -> Any:
        from aiosmtpd.smtp import AuthResult, LoginPassword

        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode() == BOT
            and data.password.decode() == PASSWORD
        )
        if ok:
            with self._lock:
                self.logins.append(BOT)
        return AuthResult(success=ok, handled=False)  # refused: 535 (handled: silence)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = BytesParser(policy=policy.default).parsebytes(envelope.content)
        with self._lock:
            self.received.append((list(envelope.rcpt_tos), message))  # type: ignore[arg-type]
        return "250 OK"

    def to(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [m for rcpt, m in self.received if address in rcpt]


def mail(
    sender: str,
    text: str,
    *,
    subject: str = "Hello",
    reply_to: EmailMessage | None = None,
    html: str | None = None,
    headers: dict[str, str] | None = None,
) -> EmailMessage:
    """A mail from ``sender`` to the bot; ``reply_to``: the bot's mail it answers
    (``In-Reply-To``, ``References``, ``Re:`` subject, the quote below the text)."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = BOT
    message["Message-ID"] = make_msgid(domain=sender.partition("@")[2])
    if reply_to is not None:
        message["Subject"] = f"Re: {reply_to['Subject']}".replace("Re: Re: ", "Re: ")
        message["In-Reply-To"] = reply_to["Message-ID"]
        message["References"] = f"{reply_to.get('References', '')} {reply_to['Message-ID']}".strip()
        quoted = "\n".join(f"> {line}" for line in str(reply_to.get_content()).splitlines())
        text = f"{text}\n\nOn Sunday, {BOT} wrote:\n{quoted}\n"
    else:
        message["Subject"] = subject
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message


def html_only(sender: str, html: str, subject: str = "Hello") -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = BOT
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain=sender.partition("@")[2])
    message.set_content(html, subtype="html")
    return message


def body(message: EmailMessage) -> str:
    return str(message.get_content()).strip()


async def until(condition: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Call ``condition()`` until truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.05)


def install_extension(ext_root: Path, ext_id: str = EXTENSION_ID) -> Path:
    """Copy a bundled extension into the test's extension directory."""
    target = ext_root / ext_id
    shutil.copytree(
        PROJECT_ROOT / "sandbox" / "extensions" / ext_id,
        target,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return target


def email_config(
    imap_port: int, smtp_port: int, allowed: Sequence[str], **extra: Any
) -> dict[str, Any]:
    return {
        "address": BOT,
        "imap_host": "127.0.0.1",
        "imap_port": imap_port,
        "imap_security": "none",
        "smtp_host": "127.0.0.1",
        "smtp_port": smtp_port,
        "smtp_security": "none",
        "allowed_senders": list(allowed),
        **extra,
    }


def write_settings(
    settings_file: Callable[..., Path],
    dovecot: Dovecot,
    smtp: SmtpSink,
    allowed: Sequence[str],
    *,
    sections: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    return settings_file(
        channels={"default": EXTENSION_ID},
        extensions={EXTENSION_ID: email_config(dovecot.port, smtp.port, allowed, **extra)},
        **(sections or {}),
    )
