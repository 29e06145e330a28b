"""The seams for optional features (ADR 0052): a single-process turn runs no
scale-out code and journals one replay record; the kernel is whole once built."""

from __future__ import annotations

import sys
from pathlib import Path

from agents.testing import ScriptedModel, assistant_message

from core.events.topics import RecordTopics
from core.kernel.phases import declarative_agent
from core.kernel.scale.seam import LocalScale
from core.kernel.shaping.tool_pipeline import layers_on
from support.bus_helpers import eventually
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

SCALE_OUT_MODULES = ("scale_out.py", "turn_lock.py", "placement.py")


def replies(kernel):
    return kernel.loader.instance("capture")._log()


async def test_a_single_process_turn_runs_no_scale_out_code(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Hello!")]])
    entered: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.parent.name == "kernel" and path.name in SCALE_OUT_MODULES:
                entered.add(f"{path.name}:{frame.f_code.co_name}")

    async with running_kernel(settings_file(channels={"default": "capture"}), model=model) as k:
        assert isinstance(k.router.scale, LocalScale)
        sys.setprofile(profile)
        try:
            await k.loader.instance("capture").say("hi there")
            await wait_for(lambda: len(replies(k)) == 1)
        finally:
            sys.setprofile(None)
        # the turn's record is written when the turn ends, after the reply (ADR 0065)
        records = await eventually(
            lambda: k.bus.journal.recent_events(10, topic=RecordTopics.REPLAY_TURN), 10
        )
        models = await k.bus.journal.recent_events(10, topic=RecordTopics.REPLAY_MODEL)
    assert replies(k) == [("reply", "u1", "Hello!")]
    assert entered == set()  # no placement branch, no turn lock, no waiting for other nodes
    assert len(records) == 1 and not models  # one record for the turn, none per call
    (call,) = records[0].payload["calls"]
    assert call["topic"] == RecordTopics.REPLAY_MODEL and call["response"]["output"]


async def test_the_kernel_is_whole_once_built(make_ext, settings_file):
    """Built in phases: the router, its consent stage and the agent factory exist
    before anything starts; nothing is attached to them later."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    async with running_kernel(settings_file(channels={"default": "capture"})) as k:
        assert await k.router.consent.holds("no-such-message") is False
        assert k.loader.agent_factory is declarative_agent
        assert k.model_router.model_wrapper == k.recorder.wrap_model
        # a tool that ran runs once, inside the recorder (ADR 0061, 0079)
        layers = [row.name for row in layers_on(k.tool_features())]
        assert layers == ["hooks", "replay", "tool_runs"]  # the fixture: full_auto
