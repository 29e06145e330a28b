"""The turn's outcome is recorded before it is sent (issue 12 item 6): a
failed send is retried from the record, never by running the turn again; the
model is called once and the history holds the exchange once."""

from __future__ import annotations

from agents.testing import ScriptedModel, assistant_message

from conftest import ext_code
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    count_mentions,
    running_kernel,
    session_history,
    wait_for,
)

# A channel whose first `failures` sends raise, then records what it is sent.
FLAKY_CHANNEL = ext_code(
    """
    sent = None
    attempts = 0
    failures = 1
    def _log(self):
        if self.sent is None:
            self.sent = []
        return self.sent
    async def send_to_user(self, user_id, message):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError("channel is down")
        self._log().append(("reply", user_id, message))
    async def send_message(self, message):
        self._log().append(("notify", None, message))
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    """
)

# A streaming channel: records the live chunks and how each reply ended.
STREAM_CHANNEL = ext_code(
    """
    events = None
    def _log(self):
        if self.events is None:
            self.events = []
        return self.events
    async def send_to_user(self, user_id, message):
        self._log().append(("send", message))
    async def send_message(self, message):
        self._log().append(("notify", message))
    async def on_stream_start(self, user_id):
        self._log().append(("start", user_id))
    async def on_stream_chunk(self, user_id, chunk):
        self._log().append(("chunk", chunk))
    async def on_stream_status(self, user_id, status):
        self._log().append(("status", status))
    async def on_stream_end(self, user_id, full_text):
        self._log().append(("end", full_text))
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    """
)

FAST_RETRY = {"retry_base_s": 0.05, "retry_max_s": 0.2}


async def test_first_send_raises_reply_arrives_once_on_retry_model_called_once(
    make_ext, settings_file, tmp_path
):
    make_ext("flaky", FLAKY_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Hello there!")]])
    path = settings_file(channels={"default": "flaky"}, events=FAST_RETRY)
    async with running_kernel(path, model=model) as k:
        channel = k.loader.instance("flaky")
        await channel.say("hi")
        await wait_for(lambda: channel._log(), timeout=15)
        retries = await k.bus.journal.recent_events(topic="system.reply")
    assert channel._log() == [("reply", "u1", "Hello there!")]
    assert channel.attempts == 2
    assert len(model.calls) == 1
    assert len(retries) == 1 and retries[0].payload["text"] == "Hello there!"
    items = session_history(tmp_path / "data", "flaky:u1")
    assert count_mentions(items, "hi") == 1 and count_mentions(items, "Hello there!") == 1


async def test_failure_after_the_record_reuses_it_on_redelivery(make_ext, settings_file, tmp_path):
    """The step after recording fails once (as if the process died between the
    history write and the send): the redelivered message is answered from the
    record, without a second model call or a second copy in the history."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Recorded answer.")]])
    path = settings_file(channels={"default": "capture"}, events=FAST_RETRY)
    async with running_kernel(path, model=model) as k:
        outbox = k.router.outbox
        real_deliver = outbox.deliver
        calls = []

        async def deliver_failing_once(*args, **kwargs):
            calls.append(args)
            if len(calls) == 1:
                raise OSError("lost between record and send")
            await real_deliver(*args, **kwargs)

        outbox.deliver = deliver_failing_once
        await k.loader.instance("capture").say("remember this")
        await wait_for(lambda: k.loader.instance("capture")._log(), timeout=15)
    assert k.loader.instance("capture")._log() == [("reply", "u1", "Recorded answer.")]
    assert len(calls) == 2 and len(model.calls) == 1
    items = session_history(tmp_path / "data", "capture:u1")
    assert (
        count_mentions(items, "remember this") == 1
        and count_mentions(items, "Recorded answer.") == 1
    )


async def test_command_side_effects_are_not_repeated_when_its_reply_fails(make_ext, settings_file):
    make_ext("flaky", FLAKY_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "counter",
        ext_code(
            """
            runs = 0
            def get_commands(self):
                from core.extensions.contract import Command
                async def bump(args, turn):
                    self.runs += 1
                    return f"counter is {self.runs}"
                return [Command("bump", "count up", bump)]
            """
        ),
    )
    path = settings_file(channels={"default": "flaky"}, events=FAST_RETRY)
    async with running_kernel(path, model=ScriptedModel([])) as k:
        channel = k.loader.instance("flaky")
        await channel.say("/bump")
        await wait_for(lambda: channel._log(), timeout=15)
    assert channel._log() == [("reply", "u1", "counter is 1")]
    assert k.loader.instance("counter").runs == 1


async def test_streaming_channel_sees_chunks_live_and_ends_with_the_recorded_reply(
    make_ext, settings_file, tmp_path
):
    make_ext("streamer", STREAM_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Streamed answer.")]])
    path = settings_file(channels={"default": "streamer"})
    async with running_kernel(path, model=model) as k:
        channel = k.loader.instance("streamer")
        await channel.say("stream it")
        await wait_for(lambda: any(e[0] == "end" for e in channel._log()), timeout=15)
    log = channel._log()
    assert log[0] == ("start", "u1") and log[-1] == ("end", "Streamed answer.")
    assert "".join(e[1] for e in log if e[0] == "chunk") == "Streamed answer."
    assert not any(e[0] == "send" for e in log)
    items = session_history(tmp_path / "data", "streamer:u1")
    assert (
        count_mentions(items, "stream it") == 1 and count_mentions(items, "Streamed answer.") == 1
    )
