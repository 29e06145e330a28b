"""Who answers a question: the one comparison every answer passes (ADR 0043).

An approval, an extension's question, ``/approve``, a typed yes, a button —
every answer names its conversation and sender as a ``Responder``, and counts
only when ``was_asked`` says it is who the question went to.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.extensions.contract import split_reply_address

__all__ = ["Responder"]


@dataclass(frozen=True, slots=True)
class Responder:
    """Who answers: the conversation (channel, address) and the sender in it."""

    channel_id: str
    user_id: str
    sender_id: str | None = None

    @property
    def who(self) -> str:
        return self.sender_id or self.user_id

    def was_asked(self, channel_id: str, user_id: str, owner_id: str) -> bool:
        """Whether this is who a question went to: the channel that asked, the
        conversation there, and the person in it (in a group, the member who asked).

        The one comparison behind every answer — an approval, an extension's
        question, ``/approve``, a typed yes — so an answer from another channel,
        even one naming the same user id, never counts (ADR 0043). Addresses are
        compared without their reply tags: a tag tells one request of the
        conversation from another (ADR 0024), so the HTTP API's next request
        answers the question its earlier one was asked (ADR 0057)."""
        mine = (self.channel_id, _untagged(self.user_id), _untagged(self.who))
        return mine == (channel_id, _untagged(user_id), _untagged(owner_id))


def _untagged(user_id: str) -> str:
    return split_reply_address(user_id)[0]
