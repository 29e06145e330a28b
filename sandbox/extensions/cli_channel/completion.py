"""Tab completion in the REPL: ``/`` commands at the start of a line, ``#`` names anywhere.

The lists come from the kernel (``list_commands``, ``list_post_processors``)
and are refreshed before each prompt, so a ``/ext activate`` or a new
extension shows up at the next line. Completion itself never waits on the
kernel: prompt_toolkit asks synchronously, and the lists are already here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

_COMMAND_RE = re.compile(r"^/([\w-]*)$")
_TAG_RE = re.compile(r"(?:^|\s)#([\w-]*)$")


class HearthCompleter(Completer):
    """Completes ``/commands`` and ``#post-processors`` from the last lists it was given."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, str]] = []
        self.tags: list[tuple[str, str]] = []

    def update(self, commands: list[tuple[str, str]], tags: list[tuple[str, str]]) -> None:
        self.commands, self.tags = list(commands), list(tags)

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        before = document.text_before_cursor
        command = _COMMAND_RE.match(before.lstrip())
        if command is not None:
            yield from _matching("/", command.group(1), self.commands)
            return
        tag = _TAG_RE.search(before)
        if tag is not None:
            yield from _matching("#", tag.group(1), self.tags)


def _matching(sigil: str, typed: str, options: list[tuple[str, str]]) -> Iterable[Completion]:
    for name, description in options:
        if name.startswith(typed.lower()):
            yield Completion(
                f"{sigil}{name}",
                start_position=-(len(typed) + 1),
                display_meta=description,
            )
