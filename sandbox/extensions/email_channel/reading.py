"""An incoming mail as the channel needs it: who, which thread, and the new text.

The body is the ``text/plain`` part when there is one, else the ``text/html``
part turned into text (``HtmlText``, the standard library's parser: block
elements become lines, lists get dashes, scripts and styles are dropped,
links keep their address). What the writer quoted is cut off — ``>`` lines,
the "On ... wrote:" line and everything under it, an "Original Message"
block, a ``-- `` signature — so the model reads what is new. Mail sent by a
machine (``Auto-Submitted``, ``Precedence: bulk``, mailing lists, bounces)
is marked ``automatic``: it is never answered, so two robots never write to
each other forever.
"""

from __future__ import annotations

import email.policy
import re
from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses
from html.parser import HTMLParser

from .files import Attached, attached_files

_BLOCKS = frozenset(
    "address article aside dd div dl dt fieldset figcaption figure footer form "
    "header hr main nav ol section tr ul".split()
)
_PARAGRAPHS = frozenset("blockquote h1 h2 h3 h4 h5 h6 p pre table".split())
_SKIPPED = frozenset(("script", "style", "head", "title", "template"))
_ATTRIBUTION = re.compile(r"^\s*(On\s.+wrote:|Le\s.+a écrit\s?:|Am\s.+schrieb.*:)\s*$", re.I)
_ORIGINAL = re.compile(r"^\s*-{2,}\s*(Original Message|Forwarded message)\s*-{2,}", re.I)
_MACHINE_SENDERS = re.compile(r"^(mailer-daemon|postmaster|no-?reply|do-?not-?reply)@", re.I)


@dataclass(frozen=True, slots=True)
class Incoming:
    sender: str  # the From address, lowercased
    subject: str
    message_id: str  # with its angle brackets
    in_reply_to: str | None
    references: tuple[str, ...]  # oldest first
    text: str  # the new text, quotes cut off
    automatic: bool  # sent by a machine: never answered
    forged: bool  # the receiving server's checks say the From address is not the sender's
    files: tuple[Attached, ...] = ()  # its attachments (ADR 0096)

    @property
    def parents(self) -> tuple[str, ...]:
        """The ids this mail answers, nearest first."""
        ids = ([self.in_reply_to] if self.in_reply_to else []) + list(reversed(self.references))
        return tuple(dict.fromkeys(ids))


def read_mail(raw: bytes, uid: int) -> Incoming:
    """Parse one raw message (``uid`` names it when it has no Message-ID)."""
    message = BytesParser(policy=email.policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    senders = getaddresses([str(message.get("From", ""))])
    sender = senders[0][1].strip().lower() if senders else ""
    message_id = _one_id(message.get("Message-ID")) or f"<uid-{uid}@hearth.invalid>"
    return Incoming(
        sender=sender,
        subject=" ".join(str(message.get("Subject", "")).split()),
        message_id=message_id,
        in_reply_to=_one_id(message.get("In-Reply-To")),
        references=tuple(re.findall(r"<[^<>\s]+>", str(message.get("References", "")))),
        text=new_text(body_text(message)),
        automatic=_automatic(message, sender),
        forged=_forged(message),
        files=attached_files(message),
    )


def body_text(message: EmailMessage) -> str:
    """The plain text of a message: its text part, else its HTML part as text."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = str(part.get_content())
    except (LookupError, ValueError):  # an unknown charset: read what can be read
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return html_to_text(content) if part.get_content_type() == "text/html" else content


def new_text(text: str) -> str:
    """What the writer wrote, without what they quoted or their signature."""
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if _ATTRIBUTION.match(line) or _ORIGINAL.match(line) or line == "-- ":
            break
        if line.lstrip().startswith(">"):
            continue
        kept.append(line.rstrip())
    result = "\n".join(kept).strip()
    return result or text.strip()


class HtmlText(HTMLParser):
    """HTML to readable text: lines for blocks, a blank line after paragraphs,
    dashes for list items."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._out: list[str] = []
        self._skip = 0
        self._pre = 0
        self._href: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skip += 1
        elif tag == "br":
            self._out.append("\n")
        elif tag == "li":
            self._out.append("\n- ")
        elif tag in _BLOCKS or tag in _PARAGRAPHS:
            self._out.append("\n")
            if tag == "pre":
                self._pre += 1
        elif tag == "a":
            self._href.append(dict(attrs).get("href"))
        elif tag in ("td", "th"):
            self._out.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag in _PARAGRAPHS:
            self._out.append("\n\n")
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
        elif tag in _BLOCKS:
            self._out.append("\n")
        elif tag == "a" and self._href:
            href = self._href.pop()
            if href and href.startswith(("http://", "https://")) and href not in self._tail():
                self._out.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self._out.append(data if self._pre else re.sub(r"\s+", " ", data))

    def _tail(self) -> str:
        return "".join(self._out[-3:])

    def text(self) -> str:
        lines = (line.strip() for line in "".join(self._out).split("\n"))
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(html: str) -> str:
    parser = HtmlText()
    parser.feed(html)
    parser.close()
    return parser.text()


def _one_id(value: object) -> str | None:
    found = re.findall(r"<[^<>\s]+>", str(value or ""))
    return found[0] if found else None


def _automatic(message: EmailMessage, sender: str) -> bool:
    auto = str(message.get("Auto-Submitted", "no")).strip().lower()
    precedence = str(message.get("Precedence", "")).strip().lower()
    return (
        auto != "no"
        or precedence in ("bulk", "junk", "list", "auto_reply")
        or message.get("List-Id") is not None
        or message.get("X-Autoreply") is not None
        or not sender
        or bool(_MACHINE_SENDERS.match(sender))
    )


def _forged(message: EmailMessage) -> bool:
    """``Authentication-Results`` of the receiving server say DMARC failed."""
    results = " ".join(str(v) for v in message.get_all("Authentication-Results", []))
    return bool(re.search(r"\bdmarc=fail\b", results, re.I))
