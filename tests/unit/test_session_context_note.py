"""The per-turn note says where the user is, without the channel's reply tag: the
tag is new random text in every request (HTTP API), which a model server would
have to read anew each turn and the model has no use for (ADR 0054)."""

from __future__ import annotations

import pytest

from core.extensions.contract import TurnContext, reply_address
from core.kernel.shaping.context_chain import ActiveChannelContext


@pytest.mark.asyncio
async def test_the_note_names_the_address_without_its_reply_tag():
    tagged = reply_address("http:default", "r7b9cf226a1")
    turn = TurnContext(channel_id="http_api", user_id=tagged)
    note = await ActiveChannelContext().get_context("hi", turn)
    assert note is not None
    assert "user: http:default." in note
    assert "r7b9cf226a1" not in note


@pytest.mark.asyncio
async def test_two_requests_of_one_conversation_get_the_same_note():
    notes = {
        await ActiveChannelContext().get_context(
            "hi", TurnContext(channel_id="http_api", user_id=reply_address("http:default", tag))
        )
        for tag in ("a1", "b2")
    }
    assert len(notes) == 1
