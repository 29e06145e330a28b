"""Questions in the terminal for ``main.py setup`` (prompt_toolkit).

Secrets are typed hidden (``is_password``) and no prompt keeps a history, so
a key never lands in a history file. Ctrl-C or Ctrl-D at any question stops
the wizard (``SetupCancelled``) before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence

from prompt_toolkit import PromptSession

from core.extensions.loading.setup_schema import SetupField
from core.runtime.errors import HearthError

__all__ = ["SetupCancelled", "TerminalAsker"]


class SetupCancelled(HearthError):
    """The user left the wizard (Ctrl-C / Ctrl-D)."""


class TerminalAsker:
    """One question at a time on the terminal; answers come back stripped."""

    def __init__(self) -> None:
        # made at the first question: a script that is asked none (``--yes``) runs
        # without a terminal, where making one warns
        self._session: PromptSession[str] | None = None

    def say(self, text: str) -> None:
        print(text, flush=True)

    async def line(self, prompt: str, default: str | None = None) -> str:
        """Free text; Enter gives ``default`` (shown in brackets) or ``""``."""
        shown = f"{prompt} [{default}]: " if default else f"{prompt}: "
        answer = (await self._prompt(shown, hidden=False)).strip()
        return answer or (default or "")

    async def secret(self, prompt: str) -> str:
        """Hidden input; ``""`` when the user just pressed Enter."""
        return (await self._prompt(f"{prompt}: ", hidden=True)).strip()

    async def confirm(self, prompt: str, default: bool) -> bool:
        hint = "Y/n" if default else "y/N"
        while True:
            answer = (await self._prompt(f"{prompt} [{hint}]: ", hidden=False)).strip().lower()
            if not answer:
                return default
            if answer in ("y", "yes"):
                return True
            if answer in ("n", "no"):
                return False
            self.say("Please answer y or n.")

    async def choose(self, prompt: str, options: Sequence[str], default: str | None) -> str:
        """One of ``options``, by number or by name; Enter gives ``default``."""
        for index, option in enumerate(options, 1):
            self.say(f"  [{index}] {option}")
        while True:
            answer = await self.line(prompt, default)
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return options[int(answer) - 1]
            if answer in options:
                return answer
            self.say(f"Type a number from 1 to {len(options)} or one of the names.")

    async def ask_field(self, field: SetupField) -> str | None:
        """An extension's setup question (``Asker``)."""
        if field.choices:
            return await self.choose(field.prompt, field.choices, field.default)
        if field.secret:
            return await self.secret(field.prompt) or None
        return await self.line(field.prompt, field.default) or None

    async def _prompt(self, message: str, *, hidden: bool) -> str:
        # a hidden answer gets a session of its own: the shared one's history
        # (up-arrow) never holds a secret
        if self._session is None:
            self._session = PromptSession()
        session: PromptSession[str] = PromptSession() if hidden else self._session
        try:
            return await session.prompt_async(message, is_password=hidden)
        except (EOFError, KeyboardInterrupt):
            raise SetupCancelled from None
