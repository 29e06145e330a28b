"""Parts of the Matrix channel that a homeserver will not show on demand: the
rate limit honoured as the server names it, and settings errors that name the
key and the value (the channel against a real Synapse: tests/e2e/test_matrix_channel.py)."""

from __future__ import annotations

import logging
import time

import pytest

pytest.importorskip("nio", reason="matrix-nio not installed (pip install -e '.[matrix]')")

from nio import RoomSendError, RoomSendResponse

from sandbox.extensions.matrix_channel.config import ConfigError, parse_config
from sandbox.extensions.matrix_channel.sender import MatrixSendError, Sender


class _LimitedClient:
    """Answers ``M_LIMIT_EXCEEDED`` (``retry_after_ms``) ``limited`` times, then sends."""

    def __init__(self, limited: int, retry_after_ms: int) -> None:
        self.limited = limited
        self.retry_after_ms = retry_after_ms
        self.sent_at: list[float] = []

    async def room_send(self, room_id: str, event_type: str, content: dict) -> object:
        self.sent_at.append(time.monotonic())
        if len(self.sent_at) <= self.limited:
            return RoomSendError.from_dict(
                {
                    "errcode": "M_LIMIT_EXCEEDED",
                    "error": "Too Many Requests",
                    "retry_after_ms": self.retry_after_ms,
                },
                room_id,
            )
        return RoomSendResponse(f"$event{len(self.sent_at)}", room_id)


async def test_a_rate_limited_send_waits_as_told_then_goes_through(caplog):
    client = _LimitedClient(limited=2, retry_after_ms=300)
    sender = Sender(client, logging.getLogger("test.matrix"))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        event_id = await sender.send_piece("!room:x", "hello")
    assert event_id == "$event3"
    gaps = [b - a for a, b in zip(client.sent_at, client.sent_at[1:], strict=False)]
    # asyncio may wake a timer up to its clock resolution early: 0.29, not 0.3
    assert len(gaps) == 2 and all(gap >= 0.29 for gap in gaps), gaps
    assert "the homeserver asks to wait 0.3 s (M_LIMIT_EXCEEDED)" in caplog.text


async def test_a_send_still_limited_after_its_attempts_fails_for_the_bus_to_retry():
    client = _LimitedClient(limited=10, retry_after_ms=1)
    sender = Sender(client, logging.getLogger("test.matrix"), max_attempts=3)  # type: ignore[arg-type]
    with pytest.raises(MatrixSendError, match="M_LIMIT_EXCEEDED"):
        await sender.send_piece("!room:x", "hello")
    assert len(client.sent_at) == 3


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("allowed_user_ids", ["alice"], "extensions.matrix_channel.allowed_user_ids: 'alice'"),
        ("allowed_room_ids", "#room:x", "extensions.matrix_channel.allowed_room_ids: '#room:x'"),
        ("homeserver_url", "matrix.org", "extensions.matrix_channel.homeserver_url: 'matrix.org'"),
        ("edit_interval_s", "-1", "extensions.matrix_channel.edit_interval_s: '-1' must be"),
        ("sync_timeout_s", 0, "extensions.matrix_channel.sync_timeout_s: 0 must be at least 1"),
        ("default_room_id", "room", "extensions.matrix_channel.default_room_id: 'room'"),
    ],
)
def test_a_bad_setting_names_its_key_and_value(key, value, said):
    settings = {key: value}
    with pytest.raises(ConfigError) as raised:
        parse_config(lambda name, default: settings.get(name, default))
    assert str(raised.value).startswith(said)


def test_ids_from_the_environment_are_read_as_lists():
    settings = {"allowed_user_ids": "@a:x.org, @b:y.org", "allowed_room_ids": '["!r:x.org"]'}
    config = parse_config(lambda name, default: settings.get(name, default))
    assert config.allowed_user_ids == ("@a:x.org", "@b:y.org")
    assert config.allowed_room_ids == frozenset({"!r:x.org"})
