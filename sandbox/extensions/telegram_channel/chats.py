"""Which Telegram chat a reply or a proactive message goes to (ADR 0017).

The channel publishes every message with the *chat's* id as the kernel's
user id (the address): a private chat's id is the user's id, a group's id is
the group's. So the kernel keys a conversation by chat, and a reply, a
stream or a reminder addressed to it goes back to that very chat — nothing
here remembers "the last chat seen". A proactive message without an address
goes to ``default_chat_id``, else to the private chat of the first allowed
user. Only chats the configuration serves are written to, so a stale or
forged address never makes the bot talk somewhere else.
"""

from __future__ import annotations

from .config import PREFIX, TelegramConfig


class UnservedChatError(ValueError):
    """An address that is no chat this bot serves (names the address and the keys)."""


class ChatTargets:
    def __init__(self, config: TelegramConfig, paired: set[str] | None = None) -> None:
        self._config = config
        self._paired = paired if paired is not None else set()  # private chats /pair admitted
        served = set(config.allowed_user_ids) | set(config.allowed_group_chat_ids)
        if config.default_chat_id is not None:
            served.add(config.default_chat_id)
        self._served = frozenset(served)

    @staticmethod
    def address(chat_id: int) -> str:
        """The kernel's user id for a chat: its id as text."""
        return str(chat_id)

    def chat_for(self, address: str) -> int:
        """The chat an address names; ``UnservedChatError`` if this bot does not serve it."""
        try:
            chat_id = int(address)
        except ValueError:
            raise UnservedChatError(
                f"{address!r} is not a Telegram chat id (the channel's user ids are chat ids)"
            ) from None
        if chat_id not in self._served and address.strip() not in self._paired:
            raise UnservedChatError(
                f"Telegram chat {chat_id} is not served: it is not in "
                f"{PREFIX}.allowed_user_ids or {PREFIX}.allowed_group_chat_ids "
                f"(nor {PREFIX}.default_chat_id)"
            )
        return chat_id

    def default_chat(self) -> int:
        """Where a proactive message without an address goes."""
        if self._config.default_chat_id is not None:
            return self._config.default_chat_id
        if self._config.allowed_user_ids:
            return self._config.allowed_user_ids[0]
        raise UnservedChatError(
            f"no chat for a proactive message: set {PREFIX}.default_chat_id "
            f"or {PREFIX}.allowed_user_ids"
        )
