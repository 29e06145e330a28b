"""The extension library's ``EditedStream``: the throttle, the split past the
limit, the postponement after a rate limit, the fallback of a refused final
edit and the typing refresh, on a fake platform with a hand-driven clock (no
sleeping: a wait moves the clock)."""

from __future__ import annotations

import logging

import pytest

from core.extensions.sdk import EditedStream, split_text

LIMIT = 60
INTERVAL = 1.0


class Limited(Exception):
    """The fake platform's rate limit, with the wait it asks for."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"retry after {wait} s")
        self.wait = wait


class Refused(Exception):
    """The fake platform refusing an edit (``unchanged`` when the text was shown)."""

    def __init__(self, unchanged: bool = False) -> None:
        super().__init__("not modified" if unchanged else "message gone")
        self.unchanged = unchanged


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class FakeStream(EditedStream[str, int]):
    """Records every platform call as ``(call, where, message, text, preview)``."""

    preview_errors = (Limited, OSError)
    refused_edits = (Refused,)
    typing_refresh_s = 4.0

    def __init__(self, clock: Clock) -> None:
        super().__init__(
            logging.getLogger("test"),
            limit=LIMIT,
            interval_s=INTERVAL,
            clock=clock,
            sleep=clock.sleep,
        )
        self.calls: list[tuple[str, str, int | None, str, bool]] = []
        self.typings: list[tuple[str, bool]] = []
        self.fail_next: Exception | None = None
        self.next_id = 1

    async def target(self, address: str) -> str:
        if address == "nobody":
            raise ValueError("not served")
        return f"chat-{address}"

    async def send(self, where: str, text: str, *, preview: bool) -> int:
        self._maybe_fail()
        self.calls.append(("send", where, None, text, preview))
        self.next_id += 1
        return self.next_id - 1

    async def edit(self, where: str, message: int, text: str, *, preview: bool) -> None:
        self._maybe_fail()
        self.calls.append(("edit", where, message, text, preview))

    def retry_after(self, exc: Exception) -> float | None:
        return exc.wait if isinstance(exc, Limited) else None

    def unchanged(self, exc: Exception) -> bool:
        return isinstance(exc, Refused) and exc.unchanged

    async def typing(self, where: str, on: bool) -> None:
        self.typings.append((where, on))

    def _maybe_fail(self) -> None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def stream(clock: Clock) -> FakeStream:
    return FakeStream(clock)


async def _previewed(stream: FakeStream, clock: Clock, text: str) -> None:
    """A stream started to "a" that has run the interval, then ``text`` arrives."""
    await stream.start("a")
    clock.now += INTERVAL
    await stream.chunk("a", text)


async def test_a_quick_reply_is_sent_once_with_no_edit(stream: FakeStream) -> None:
    await stream.start("a")
    await stream.chunk("a", "Hello")
    await stream.chunk("a", " there")
    await stream.end("a", "Hello there")
    assert stream.calls == [("send", "chat-a", None, "Hello there", False)]


async def test_previews_wait_for_the_interval_then_edit_at_most_once_per_interval(
    stream: FakeStream, clock: Clock
) -> None:
    await _previewed(stream, clock, "one")  # first shown: sent
    clock.now += 0.4
    await stream.chunk("a", " two")  # within the interval: not shown
    clock.now += 0.6
    await stream.chunk("a", " three")  # the interval is over: edited
    await stream.chunk("a", "  ")  # the same text once trimmed: nothing
    assert stream.calls == [
        ("send", "chat-a", None, "one", True),
        ("edit", "chat-a", 1, "one two three", True),
    ]


async def test_the_final_text_waits_out_the_interval_and_replaces_the_preview(
    stream: FakeStream, clock: Clock
) -> None:
    await _previewed(stream, clock, "draft")
    clock.now += 0.25
    await stream.end("a", "final")
    assert clock.slept == [pytest.approx(0.75)]
    assert stream.calls[-1] == ("edit", "chat-a", 1, "final", False)


async def test_a_final_text_already_shown_is_not_edited_again(
    stream: FakeStream, clock: Clock
) -> None:
    await _previewed(stream, clock, "all of it")
    await stream.end("a", "")  # no full text given: the streamed one
    assert stream.calls == [("send", "chat-a", None, "all of it", True)]
    assert clock.slept == []


async def test_past_the_limit_the_preview_stays_and_the_rest_goes_in_new_messages(
    stream: FakeStream, clock: Clock
) -> None:
    await _previewed(stream, clock, "short start. ")
    clock.now += INTERVAL
    long_text = "short start. " + " ".join(f"word{i}" for i in range(30))
    await stream.chunk("a", long_text.removeprefix("short start. "))  # too long: not shown
    assert len(stream.calls) == 1
    await stream.end("a", long_text)
    pieces = split_text(long_text, LIMIT)
    assert len(pieces) > 1
    assert stream.calls[1:] == [("edit", "chat-a", 1, pieces[0], False)] + [
        ("send", "chat-a", None, piece, False) for piece in pieces[1:]
    ]


async def test_a_rate_limit_postpones_previews_and_the_final_text(
    stream: FakeStream, clock: Clock
) -> None:
    await stream.start("a")
    clock.now += INTERVAL
    stream.fail_next = Limited(5.0)
    await stream.chunk("a", "one")  # refused: held for 5 s
    clock.now += 2.0
    await stream.chunk("a", " two")  # still held
    assert stream.calls == []
    await stream.end("a", "one two")
    assert clock.slept == [pytest.approx(3.0)]
    assert stream.calls == [("send", "chat-a", None, "one two", False)]


async def test_another_preview_error_skips_only_that_preview(
    stream: FakeStream, clock: Clock
) -> None:
    await stream.start("a")
    clock.now += INTERVAL
    stream.fail_next = OSError("network")
    await stream.chunk("a", "one")
    await stream.chunk("a", " two")  # not held: tried again at once
    assert stream.calls == [("send", "chat-a", None, "one two", True)]


async def test_a_refused_final_edit_sends_the_text_anew(stream: FakeStream, clock: Clock) -> None:
    await _previewed(stream, clock, "draft")
    stream.fail_next = Refused()
    await stream.end("a", "final")
    assert stream.calls[-1] == ("send", "chat-a", None, "final", False)


async def test_an_unchanged_final_edit_is_not_sent_again(stream: FakeStream, clock: Clock) -> None:
    await _previewed(stream, clock, "draft")
    stream.fail_next = Refused(unchanged=True)
    await stream.end("a", "final")
    assert stream.calls == [("send", "chat-a", None, "draft", True)]


async def test_a_failing_final_send_raises_for_the_outbox_to_retry(stream: FakeStream) -> None:
    await stream.start("a")
    stream.fail_next = OSError("down")
    with pytest.raises(OSError):
        await stream.end("a", "final")


async def test_an_address_not_served_fails_at_the_end_not_the_start(stream: FakeStream) -> None:
    await stream.start("nobody")  # logged, not raised
    await stream.chunk("nobody", "text")
    with pytest.raises(ValueError):
        await stream.end("nobody", "text")
    assert stream.calls == []


async def test_typing_is_shown_refreshed_while_tools_run_and_withdrawn(
    stream: FakeStream, clock: Clock
) -> None:
    await stream.start("a")
    await stream.status("a", "running a tool")  # shown just now: not again
    clock.now += 4.0
    await stream.status("a", "running a tool")
    await stream.end("a", "done")
    assert stream.typings == [("chat-a", True), ("chat-a", True), ("chat-a", False)]


async def test_a_failing_typing_indicator_never_fails_the_turn(stream: FakeStream) -> None:
    async def broken(where: str, on: bool) -> None:
        raise RuntimeError("no typing today")

    stream.typing = broken  # type: ignore[method-assign]
    await stream.start("a")
    await stream.end("a", "done")
    assert stream.calls == [("send", "chat-a", None, "done", False)]


async def test_a_platform_without_typing_is_never_asked(clock: Clock) -> None:
    class Quiet(FakeStream):
        typing_refresh_s = None

    quiet = Quiet(clock)
    await quiet.start("a")
    clock.now += 10.0
    await quiet.status("a", "running a tool")
    await quiet.end("a", "done")
    assert quiet.typings == []
