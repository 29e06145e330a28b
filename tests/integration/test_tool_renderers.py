"""Tool renderers (seed 003, issue 45, ADR 0096): an extension renders a tool's
call and result as hints a streaming channel shows; a failing renderer falls
back to the default line; the hints shown are recorded."""

from __future__ import annotations

from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from conftest import ext_code
from core.extensions.contract import RenderHint, hint_text
from support.harness import CAPTURE_MANIFEST, conversing, running_kernel, wait_for

STREAMING_CHANNEL = ext_code(
    """
    shown = None
    def _log(self):
        if self.shown is None:
            self.shown = []
        return self.shown
    async def send_to_user(self, user_id, message):
        self._log().append(("reply", message))
    async def send_message(self, message):
        self._log().append(("notify", message))
    async def on_stream_start(self, user_id):
        return True
    async def on_stream_chunk(self, user_id, chunk):
        pass
    async def on_stream_status(self, user_id, status):
        self._log().append(("status", status))
    async def on_stream_end(self, user_id, full_text):
        self._log().append(("reply", full_text))
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    """
)
WEATHER_TOOL = """
    def get_tools(self):
        @function_tool
        def weather(city: str) -> str:
            "The weather in a city."
            return f"{city}: sunny, 21 C"

        return [side_effects(weather, False)]

    async def render_tool(self, tool, phase, arguments, result):
        if tool != "weather":
            return None
        if self.ctx.get_config("broken"):
            raise RuntimeError("renderer bug")
        if phase == "call":
            return RenderHint("card", title="Weather", fields=(("city", json.loads(arguments)["city"]),))
        return RenderHint("markdown", f"**{result}**")
"""
WEATHER_HEADER = """
    import json

    from agents import function_tool

    from core.extensions.contract import RenderHint
    from core.extensions.sdk import side_effects
"""


def weather_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ModelStep(output=[function_call("weather", {"city": "Oslo"}, call_id="c1")]),
            ModelStep(output=[assistant_message("Sunny in Oslo.")]),
        ]
    )


async def run(make_ext, settings_file, **config) -> tuple[list, list]:
    make_ext("screen", STREAMING_CHANNEL, CAPTURE_MANIFEST)
    make_ext("weather", ext_code(WEATHER_TOOL, WEATHER_HEADER), conversing({"config": config}))
    settings = settings_file(channels={"default": "screen"})
    async with running_kernel(settings, model=weather_model()) as k:
        channel = k.loader.instance("screen")
        await channel.say("weather in Oslo?")
        await wait_for(lambda: ("reply", "Sunny in Oslo.") in channel._log())
        frames = await k.bus.journal.recent_events(20, topic="hook.tool_render")
        recorded = [f.payload["after"] for f in sorted(frames, key=lambda f: f.id)]
        assert recorded == list(k.router.hints.shown)  # journaled, for a replay
        return channel._log(), recorded


async def test_a_renderer_shows_the_call_as_a_card_and_the_result_as_markdown(
    make_ext, settings_file
):
    shown, recorded = await run(make_ext, settings_file)
    assert [s for s in shown if s[0] == "status"] == [
        ("status", "Weather · city: Oslo"),
        ("status", "**Oslo: sunny, 21 C**"),
    ]
    assert [(r["phase"], r["by"], r["kind"]) for r in recorded] == [
        ("call", "weather", "card"),
        ("result", "weather", "markdown"),
    ]


async def test_a_failing_renderer_falls_back_to_the_default_line(make_ext, settings_file):
    shown, recorded = await run(make_ext, settings_file, broken=True)
    assert [s for s in shown if s[0] == "status"] == [("status", "using weather…")]
    assert [(r["phase"], r["by"], r["kind"]) for r in recorded] == [
        ("call", "default", "text"),
        ("result", "default", "hidden"),
    ]


def test_hints_as_channels_show_them():
    card = RenderHint("card", title="Weather", fields=(("city", "Oslo"), ("sky", "clear")))
    assert hint_text(card) == "Weather · city: Oslo · sky: clear"
    assert hint_text(card, markdown=True) == "**Weather**\n- **city**: Oslo\n- **sky**: clear"
    assert hint_text(RenderHint("hidden", "x")) == ""
    assert hint_text(RenderHint("text", "plain")) == "plain"
