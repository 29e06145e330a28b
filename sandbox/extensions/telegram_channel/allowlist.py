"""Who may talk to the bot. Everyone else is ignored, and logged once per user."""

from __future__ import annotations

import logging

from .config import PREFIX


class AllowList:
    def __init__(self, user_ids: frozenset[int], logger: logging.Logger) -> None:
        self.user_ids = user_ids
        self._logger = logger
        self._reported: set[int] = set()

    def admits(self, user_id: int, who: str) -> bool:
        """True for allowed users; the first refusal of each user id is logged."""
        if user_id in self.user_ids:
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

    def announce(self) -> None:
        """Say at startup whom we serve (and how to find one's id when nobody)."""
        if self.user_ids:
            ids = ", ".join(str(i) for i in sorted(self.user_ids))
            self._logger.info("serving Telegram user ids: %s", ids)
            return
        self._logger.warning(
            "%s.allowed_user_ids is empty: the bot answers nobody. Send /start to the bot; "
            "this log then shows your user id to add there",
            PREFIX,
        )
