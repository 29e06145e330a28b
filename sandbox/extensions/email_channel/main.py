"""E-mail channel: Hearth in a mailbox of its own (issue 48, ADR 0092).

A ``ServiceProvider`` whose background loop reads the mailbox over IMAP,
waiting in IDLE (or polling) between fetches and acknowledging a mail only
after it is journaled (``inbox``); a ``ChannelProvider`` that answers over
SMTP in the mail's thread (``sender``: ``In-Reply-To``, ``References``,
``Re:``). Each thread is its own conversation (``threads``: the kernel's
address is ``PERSON#THREAD``), so a reply in a thread continues it and a new
subject starts another; each mail carries its sender (identity
``email:alice@example.org`` in ``people:``). Only the addresses in
``allowed_senders`` (and those the owner paired with ``/pair``) are served;
a stranger gets one mail with a pairing code and nothing else, and mail
sent by machines is never answered. HTML mail is read as text
(``reading``). An ``InteractiveChannel``: a question is a mail in the
thread, answered by replying with the option or yes / no (``questions``).
A ``SetupProvider``: ``main.py setup`` asks for the mailbox and its
servers, and checks the password live (``setup``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from core.extensions.contract import ExtensionContext, KeptFile, UserRequest
from core.extensions.sdk import CODE_TTL_S, BaseExtension, Pairings

from .config import PREFIX, EmailConfig, parse_config
from .files import Held, attach, keep_attached, with_lines
from .inbox import ImapAuthError, Inbox
from .questions import QuestionBoard
from .reading import Incoming, read_mail
from .sender import Sender, compose
from .setup import EmailSetup, check_login
from .threads import Thread, Threads, split_address

PASSWORD_SECRET = "EMAIL_PASSWORD"
VERIFY_TIMEOUT_S = 10.0
SUBJECT_CHARS = 70
MAX_STRANGERS = 100


class EmailSetupError(Exception):
    """The channel cannot run: no password or server, or a server refuses the login."""


class EmailChannel(BaseExtension):
    def __init__(self) -> None:
        self._ctx: ExtensionContext | None = None
        self._config: EmailConfig | None = None
        self._password: str | None = None
        self._threads: Threads | None = None
        self._sender: Sender | None = None
        self._board: QuestionBoard | None = None
        self._pairings: Pairings | None = None
        self._auth_error: str | None = None
        self._setup: EmailSetup | None = None
        self._running = False
        self._saving = asyncio.Lock()
        self._strangers: dict[str, Incoming] = {}  # stranger's address -> the mail they sent
        self._held = Held()  # a turn's files, until its reply mail carries them

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        self._ctx = context
        config = self._config = parse_config(context.get_config)
        password = self._password = context.get_secret(PASSWORD_SECRET)
        if not password or not config.complete:
            return  # only the setup loads it so (a normal start needs both): start() refuses
        self._pairings = Pairings(context.data_dir, label="E-mail", prefix="email")
        await asyncio.to_thread(self._pairings.load)
        self._threads = Threads(context.data_dir)
        await asyncio.to_thread(self._threads.load)
        self._sender = Sender(config, password, context.logger)
        self._board = QuestionBoard(self._post)
        await self._verify_login()

    async def start(self) -> None:
        if self._sender is None:
            missing = (
                PASSWORD_SECRET if self._cfg().complete else f"{PREFIX}.address/imap_host/smtp_host"
            )
            raise EmailSetupError(f"{missing} not set (`main.py setup` asks for it)")
        self._running = True
        if self._pairings is not None:
            self._pairings.register(self._greet)
        if self._auth_error is not None:
            await self._verify_login()

    async def destroy(self) -> None:
        if self._pairings is not None:
            self._pairings.unregister()

    def health_check(self) -> bool:
        return self._auth_error is None

    async def status_lines(self) -> list[str]:
        """What ``doctor`` and ``/status`` show: the mailbox, both servers (the login
        was checked live when the extension loaded) and whom it serves."""
        if self._sender is None:
            return ["not set up: `main.py setup` asks for the mailbox, its servers and password"]
        config = self._cfg()
        paired = self._pairings.admitted if self._pairings else set()
        served = len(set(config.allowed_senders) | paired)
        waiting = "IDLE" if config.idle else f"polling every {config.poll_interval_s:g} s"
        return [
            f"{config.address}: reads {config.mailbox} on {config.imap_host}:{config.imap_port} "
            f"({waiting}), sends through {config.smtp_host}:{config.smtp_port}",
            f"serving {served} sender(s); strangers get a pairing code",
        ]

    async def _verify_login(self) -> None:
        """An IMAP login and an SMTP connection: a refused login fails the extension;
        an unreachable server does not (the inbox keeps retrying, the outbox too)."""
        config, log = self._cfg(), self._context().logger
        refused, unreachable = await check_login(config, self._password)
        for problem in unreachable:
            log.warning("%s (retried)", problem)
        if refused:
            self._auth_error = "; ".join(refused) + " (`main.py setup` asks for the password)"
            raise EmailSetupError(self._auth_error)
        self._auth_error = None
        log.info("e-mail channel ready as %s", config.address)

    # ------------------------------------------------------------ input

    async def run_background(self) -> None:
        inbox = Inbox(
            self._cfg(),
            self._password,
            self._on_mail,
            self._context().logger,
            self._context().data_dir,
        )
        try:
            await inbox.run()
        except ImapAuthError as exc:
            self._auth_error = str(exc)
            raise EmailSetupError(str(exc)) from None

    async def _on_mail(self, uid: int, raw: bytes) -> bool:
        """Journal a served sender's mail in its thread; whether to delete it (a
        secret answer). A stranger gets a pairing code; machines get nothing."""
        log = self._context().logger
        try:
            mail = read_mail(raw, uid)
        except Exception as exc:  # a mail no parser can read is skipped, not retried forever
            log.warning("mail %d is unreadable (%s): skipped", uid, exc)
            return False
        if mail.sender == self._cfg().address:
            return False  # a copy of our own mail
        if mail.automatic:
            log.info("not answering automatic mail from %s (%r)", mail.sender or "?", mail.subject)
            return False
        if mail.forged:
            log.warning("dropping mail claiming to be from %s: DMARC failed", mail.sender)
            return False
        if not self._serves(mail.sender):
            await self._offer_pairing(mail)
            return False
        if not (mail.text or mail.subject or mail.files):
            log.info("ignoring an empty mail from %s", mail.sender)
            return False
        threads = self._thread_store()
        thread = threads.place(mail.sender, mail.subject, mail.message_id, mail.parents)
        await self._save_threads()
        answer = self._questions().answer_in(thread, mail.sender, mail.text, mail.parents)
        if answer is not None:
            await self._context().answer_request(
                answer.request.id, answer.value, thread.address, sender_id=mail.sender
            )
            return answer.request.kind == "secret"  # not left readable in the mailbox
        files = await keep_attached(self._context(), mail.files, mail.sender, self._refuser(thread))
        if mail.files and not files and not (mail.text or mail.subject):
            return False
        await self._context().on_user_message(
            mail.text or mail.subject,
            thread.address,
            message_id=mail.message_id,
            idempotency_key=f"email:{mail.message_id}",
            sender_id=mail.sender,
            files=files,
        )
        return False

    def _refuser(self, thread: Thread) -> Callable[[str], Awaitable[object]]:
        """Mails into ``thread`` why a file it carried was not taken."""
        return lambda note: self._post(thread, thread.next_subject(), note)

    def _serves(self, sender: str) -> bool:
        paired = self._pairings.admitted if self._pairings else set()
        return sender in self._cfg().allowed_senders or sender in paired

    async def _offer_pairing(self, mail: Incoming) -> None:
        """A stranger's mail: one code for the owner's ``/pair``, while it lives, and
        nothing else."""
        assert self._pairings is not None
        code = self._pairings.offer(mail.sender)
        if code is None:
            return
        self._strangers[mail.sender] = mail
        while len(self._strangers) > MAX_STRANGERS:  # codes expire: the oldest are stale
            del self._strangers[next(iter(self._strangers))]
        minutes = round(CODE_TTL_S / 60)
        text = (
            f"Hearth does not know you yet. Ask its owner to send /pair {code} "
            f"(the code works once, for {minutes} minutes)."
        )
        self._context().logger.info("e-mail sender %s was given a pairing code", mail.sender)
        subject = f"Re: {mail.subject}" if mail.subject else "Hearth"
        message = compose(
            self._cfg(),
            mail.sender,
            subject,
            text,
            in_reply_to=mail.message_id,
            references=[*mail.references, mail.message_id],
            automatic=True,
        )
        try:
            await self._send().send(message)
        except Exception as exc:  # a stranger's reply must not stop the inbox
            self._context().logger.warning(
                "the pairing code for %s was not sent: %s", mail.sender, exc
            )

    async def _greet(self, sender: str) -> None:
        """The owner's ``/pair`` admitted this address: told so in the thread they began."""
        mail = self._strangers.pop(sender, None)
        threads = self._thread_store()
        if mail is not None:
            thread = threads.place(sender, mail.subject, mail.message_id, mail.parents)
        else:
            thread = threads.start(sender, "Hearth")
        await self._post(thread, thread.next_subject(), "You are in: Hearth answers you now.")

    # ------------------------------------------------------------ output

    async def send_to_user(self, user_id: str, message: str) -> None:
        thread = self._thread_for(user_id, message)
        files = self._held.of(user_id)
        await self._post(thread, thread.next_subject(), message, files)
        self._held.sent(user_id, files)

    async def send_file(self, user_id: str, file: KeptFile) -> None:
        """A file a tool returned (ADR 0096): held for the reply mail, which carries it."""
        self._held.hold(user_id, file)

    async def send_message(self, message: str) -> None:
        """A proactive message with no address: ``default_to``, else the first allowed sender."""
        config = self._cfg()
        to = config.default_to or next(iter(config.allowed_senders), None)
        if to is None:
            raise ValueError(f"{PREFIX}: no default_to and no allowed_senders to write to")
        await self.send_to_user(to, message)

    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        await self._questions().ask(self._thread_for(user_id, request.prompt), request)

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        self._questions().close(request_id)

    def _thread_for(self, user_id: str, text: str) -> Thread:
        """The thread an address names; a bare address (or a forgotten thread) starts
        a new one, with the first line of ``text`` as its subject."""
        person, key = split_address(user_id)
        thread = self._thread_store().get(key) if key else None
        if thread is not None:
            return thread
        if not self._serves(person) and person != self._cfg().default_to:
            raise ValueError(f"{person} is not an address this channel serves")
        first = next((line.strip() for line in text.splitlines() if line.strip()), "Hearth")
        subject = first if len(first) <= SUBJECT_CHARS else first[: SUBJECT_CHARS - 1] + "…"
        return self._thread_store().start(person, subject)

    async def _post(
        self, thread: Thread, subject: str, text: str, files: Sequence[KeptFile] = ()
    ) -> str:
        """Mail ``text`` (and ``files``) into ``thread`` as its latest message; its Message-ID."""
        message = compose(
            self._cfg(),
            thread.peer,
            subject,
            with_lines(text, files),
            in_reply_to=thread.last_id,
            references=thread.references(),
        )
        await attach(message, files)
        await self._send().send(message)
        message_id = str(message["Message-ID"])
        self._thread_store().record(thread, message_id)
        await self._save_threads()
        return message_id

    async def _save_threads(self) -> None:
        async with self._saving:
            await asyncio.to_thread(self._thread_store().save)

    # ------------------------------------------------------------ setup

    def get_setup_schema(self) -> list[dict[str, object]]:
        return self._setup_flow().schema(self._running)

    async def apply_config(self, name: str, value: str) -> None:
        await self._setup_flow().apply(name, value)

    async def on_setup_complete(self) -> tuple[bool, str]:
        return await self._setup_flow().complete(self._running)

    def _setup_flow(self) -> EmailSetup:
        if self._setup is None:
            self._setup = EmailSetup(PASSWORD_SECRET, self._password, self._cfg())
        return self._setup

    # ------------------------------------------------------------ accessors

    def _context(self) -> ExtensionContext:
        assert self._ctx is not None, "initialize() was not called"
        return self._ctx

    def _cfg(self) -> EmailConfig:
        assert self._config is not None, "initialize() was not called"
        return self._config

    def _thread_store(self) -> Threads:
        assert self._threads is not None, "initialize() was not called"
        return self._threads

    def _send(self) -> Sender:
        assert self._sender is not None, "initialize() was not called"
        return self._sender

    def _questions(self) -> QuestionBoard:
        assert self._board is not None, "initialize() was not called"
        return self._board
