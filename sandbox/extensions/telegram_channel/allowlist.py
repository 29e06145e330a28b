"""Who may talk to the bot, and in which group chats. Everything else is ignored,
and logged once per user or group.

Private chats with an allowed user are always served. A group is served only
when its chat id is in ``allowed_group_chat_ids`` (opt-in per group, ADR
0017), and even there only allowed users are heard.
"""

from __future__ import annotations

import logging

from .config import PREFIX


class AllowList:
    def __init__(
        self,
        user_ids: frozenset[int],
        group_ids: frozenset[int],
        logger: logging.Logger,
        paired: set[str] | None = None,
    ) -> None:
        self.user_ids = user_ids
        self.paired = paired if paired is not None else set()  # admitted by the owner's /pair
        self.group_ids = group_ids
        self._logger = logger
        self._reported: set[int] = set()
        self._reported_groups: set[int] = set()

    def admits(self, user_id: int, who: str) -> bool:
        """True for allowed and paired users; the first refusal of each user id is logged."""
        if user_id in self.user_ids or str(user_id) in self.paired:
            return True
        if user_id not in self._reported:
            self._reported.add(user_id)
            self._logger.warning(
                "ignoring Telegram user %d (%s): not in %s.allowed_user_ids; "
                "add %d there to let them use Hearth",
                user_id,
                who,
                PREFIX,
                user_id,
            )
        return False

    def admits_group(self, chat_id: int, title: str) -> bool:
        """True for opted-in group chats; the first message from any other group is logged."""
        if chat_id in self.group_ids:
            return True
        if chat_id not in self._reported_groups:
            self._reported_groups.add(chat_id)
            self._logger.warning(
                "ignoring Telegram group %d (%s): not in %s.allowed_group_chat_ids; "
                "add %d there to let allowed users talk to Hearth in this group",
                chat_id,
                title,
                PREFIX,
                chat_id,
            )
        return False

    def announce(self) -> None:
        """Say at startup whom we serve (and how to find one's id when nobody)."""
        if self.group_ids:
            ids = ", ".join(str(i) for i in sorted(self.group_ids))
            self._logger.info("serving allowed users in Telegram groups: %s", ids)
        if self.user_ids:
            ids = ", ".join(str(i) for i in sorted(self.user_ids))
            self._logger.info("serving Telegram user ids: %s", ids)
            return
        self._logger.warning(
            "%s.allowed_user_ids is empty: the bot answers nobody. Send /start to the bot; "
            "this log then shows your user id to add there",
            PREFIX,
        )
