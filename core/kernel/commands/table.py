"""Slash commands: answered by the kernel with no model call (SPEC §8).

Built-ins are ``/help``, ``/new`` and ``/status``; extensions add theirs
through ``CommandProvider``. A duplicate name is reported; who keeps it is
the ``NamePolicy``'s call (the established provider, unless the newcomer's
grant says it replaces it), or the first registration without a policy.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from core.extensions.access.state_scope import serving
from core.extensions.contract import Command, TurnContext
from core.extensions.loading.lifecycle import describe_exception
from core.extensions.loading.names import NamePolicy

log = logging.getLogger("core.kernel.commands.table")

# administration belongs to the household's owner (SPEC §11); ``/policy revoke``
# is checked by its handler, ``/policy`` alone being anyone's
OWNER_ONLY = frozenset({"grant", "reload", "setup", "pair"})
NOT_OWNER = "/{name} is for the household's owner only; ask them."
TOO_SLOW = "{what} took too long (over {seconds:g} s) and was stopped. Please try again."

_COMMAND_RE = re.compile(r"^/([A-Za-z][\w-]*)(?:@\S+)?(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class AskingCommand(Command):
    """A kernel command that waits for the user's answers (``/setup``): each
    question has its own deadline, so ``turns.command_timeout_s`` would cut it
    short; ``deadline_s`` replaces it (``None``: the questions' deadlines only)."""

    deadline_s: float | None = None


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    name: str
    args: str


def parse_command(text: str) -> ParsedCommand | None:
    """``/remind 10m tea`` → (remind, "10m tea"); ``/help@my_bot`` → (help, "")."""
    match = _COMMAND_RE.match(text.strip())
    if match is None:
        return None
    return ParsedCommand(match.group(1).lower(), (match.group(2) or "").strip())


class CommandRegistry:
    """Every command by name, with the extension that provides it."""

    def __init__(self, policy: NamePolicy | None = None) -> None:
        self._commands: dict[str, tuple[str, Command]] = {}
        self.policy = policy

    def add(self, owner: str, command: Command) -> None:
        name = command.name.lstrip("/").lower()
        existing = self._commands.get(name)
        if existing is not None and existing[0] != owner:
            holder = existing[0]
            if self.policy is None:
                log.warning(
                    "duplicate command /%s from %s ignored; %s provides it", name, owner, holder
                )
                return
            keeper = self.policy.keeper(f"/{name}", holder, owner)
            loser = owner if keeper == holder else holder
            log.warning("%s", self.policy.warning(f"/{name}", keeper, loser))
            if keeper == holder:
                return
        self._commands[name] = (owner, command)

    def owner_of(self, name: str) -> str | None:
        """The extension (or ``kernel``) that answers ``/name``."""
        entry = self._commands.get(name.lstrip("/").lower())
        return None if entry is None else entry[0]

    def remove_owner(self, owner: str) -> None:
        """Take away every command ``owner`` registered (its extension was unwired)."""
        for name in [n for n, (o, _) in self._commands.items() if o == owner]:
            del self._commands[name]

    def entries(self) -> list[tuple[str, Command]]:
        return [self._commands[name] for name in sorted(self._commands)]

    def names_and_descriptions(self) -> list[tuple[str, str]]:
        return [(command.name.lstrip("/"), command.description) for _, command in self.entries()]

    def help_text(self) -> str:
        lines = ["Commands:"]
        for _, command in self.entries():
            lines.append(f"/{command.name.lstrip('/')} — {command.description}")
        return "\n".join(lines)

    async def run(
        self, parsed: ParsedCommand, turn: TurnContext, *, timeout_s: float | None = None
    ) -> str:
        """Every command gets an answer (``Done.`` when the handler has none).

        A handler still running after ``timeout_s`` (``turns.command_timeout_s``)
        is cancelled and the answer says so: a hung handler never holds a
        worker of the chat path."""
        entry = self._commands.get(parsed.name)
        if entry is None:
            return f"Unknown command /{parsed.name}. Type /help to see the commands."
        owner, command = entry
        if parsed.name in OWNER_ONLY and turn.role != "owner":
            log.warning("/%s refused to %s, a member", parsed.name, turn.person)
            return NOT_OWNER.format(name=parsed.name)
        if isinstance(command, AskingCommand):
            timeout_s = command.deadline_s
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                with serving(turn):  # a handler's session-scoped state is this turn's
                    reply = await command.handler(parsed.args, turn)
            return "Done." if reply is None else reply
        except TimeoutError as exc:
            if not deadline.expired():
                log.exception("command /%s of %s failed", parsed.name, owner)
                return f"/{parsed.name} failed: {describe_exception(exc)}"
            log.error("command /%s of %s timed out after %s s", parsed.name, owner, timeout_s)
            return TOO_SLOW.format(what=f"/{parsed.name}", seconds=timeout_s)
        except Exception as exc:
            log.exception("command /%s of %s failed", parsed.name, owner)
            return f"/{parsed.name} failed: {describe_exception(exc)}"
