"""A channel's way to its people's files (``ExtensionContext.kept_file`` /
``keep_file``, ADR 0096): the person is resolved from the channel and the user
id, as for a turn, so one person never reaches another's files."""

from __future__ import annotations

import asyncio

from core.extensions.contract import Artifact, KeptFile
from core.kernel.conversations.people import Household
from core.kernel.files.store import FileStore

__all__ = ["PersonFiles"]


class PersonFiles:
    """Finds and keeps files for whoever ``(channel id, user id)`` is."""

    def __init__(self, store: FileStore, household: Household) -> None:
        self.store = store
        self.household = household

    async def find(self, channel_id: str, user_id: str, file_id: str) -> KeptFile | None:
        """The person's file ``file_id``; ``None`` when it is not theirs."""
        person = self.household.key_of(channel_id, user_id)
        return await asyncio.to_thread(self.store.find, person, file_id)

    async def keep(
        self, channel_id: str, user_id: str, name: str, mime_type: str, path: str
    ) -> KeptFile:
        """Keep the upload at ``path`` for the person (``FileTooLarge``, a ``ValueError``,
        over the limit)."""
        person = self.household.key_of(channel_id, user_id)
        upload = Artifact(name, mime_type, path=path)
        return await asyncio.to_thread(self.store.keep, person, upload)
