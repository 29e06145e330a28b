"""A turn's artifacts: kept for the person, then sent after the reply (ADR 0096).

``TurnFiles.collecting`` opens the turn's collection (``contract.COLLECTING``);
after the run the router hands what was attached to ``keep`` (only when
something was: a turn without files costs no call here), to ``send`` before
the reply ends (a ``FileChannel``) and to ``tell`` after it (any other: the
CLI gets a line with the kept file's path). A file that cannot be kept (too
large, a missing path) becomes a line in the reply naming why. A reply sent
again — its message delivered again after the kernel died between recording
the turn and sending — takes the turn's files again (``of_turn``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from core.extensions.contract import Artifact, FileChannel, KeptFile, TurnContext
from core.kernel.files.store import FileStore
from core.runtime import HearthError

__all__ = ["TurnFiles", "file_line"]

log = logging.getLogger("core.kernel.files")


def file_line(file: KeptFile) -> str:
    """How a channel without files shows one: its name, caption and where it is kept."""
    caption = f" — {file.caption}" if file.caption else ""
    return f"[file] {file.name}{caption}: {file.path}"


class TurnFiles:
    """Keeps a turn's artifacts and sends them to the channel it came from."""

    def __init__(self, store: FileStore) -> None:
        self.store = store

    async def keep(
        self, turn: TurnContext, artifacts: Sequence[Artifact]
    ) -> tuple[list[KeptFile], list[str]]:
        """Keep each artifact for the turn's person: the kept files, and a line per
        artifact that could not be kept (naming it and why)."""
        kept: list[KeptFile] = []
        problems: list[str] = []
        for artifact in artifacts:
            try:
                kept.append(
                    await asyncio.to_thread(
                        self.store.keep, turn.person_key, artifact, turn.turn_id
                    )
                )
            except (HearthError, OSError, ValueError) as exc:
                log.warning("artifact %r not kept: %s", artifact.name, exc)
                problems.append(f"(the file {artifact.name} could not be sent: {exc})")
        return kept, problems

    async def of_turn(self, turn: TurnContext) -> list[KeptFile]:
        """The files the turn kept (its reply is being sent again after a crash)."""
        if turn.turn_id is None:
            return []
        return await asyncio.to_thread(self.store.of_turn, turn.person_key, turn.turn_id)

    async def send(self, channel: object, user_id: str, files: Sequence[KeptFile]) -> None:
        """Each file on a ``FileChannel``, before the reply ends (a request-response
        channel answers with them). A failure is logged: the reply still goes."""
        if not isinstance(channel, FileChannel):
            return
        for file in files:
            try:
                await channel.send_file(user_id, file)
            except Exception as exc:
                log.warning("file %s to %s not sent: %s", file.name, user_id, exc)

    async def tell(self, channel: object, user_id: str, files: Sequence[KeptFile]) -> None:
        """After the reply, on a channel that cannot send files (the CLI): a line per
        file naming its kept path."""
        if channel is None or isinstance(channel, FileChannel):
            return
        for file in files:
            try:
                await channel.send_to_user(user_id, file_line(file))  # type: ignore[attr-defined]
            except Exception as exc:
                log.warning("file %s to %s not told: %s", file.name, user_id, exc)
