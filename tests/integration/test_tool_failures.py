"""Tool failures reach the model as a short useful message (issue 12 item 10a):
``Type: message``, no traceback, known secrets redacted, capped — for extension
tools in-process and isolated, raw ``FunctionTool``s, and declarative agents' tools.
Driven by ScriptedModel through the real Runner."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from agents import FunctionTool, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from core.agents.declarative import DeclarativeAgentAdapter
from core.agents.model_router import ModelRouter
from core.config import ModelsSettings
from core.extensions.loading.manifest import load_manifest
from core.extensions.tool_failures import MAX_TOOL_ERROR_CHARS
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

SECRET = "flaky-secret-0123456789"

FLAKY = ext_code(
    header="""
    from agents import FunctionTool, function_tool
    """,
    body="""
    def get_tools(self):
        token = self.ctx.get_secret("FLAKY_TOKEN")

        @function_tool
        def book_table(date: str) -> str:
            "Book a table for a date."
            raise ValueError("date must be ISO 8601")

        @function_tool
        def log_in() -> str:
            "Log in to the booking site."
            raise PermissionError(f"token {token} was refused " + "x" * 2000)

        return [book_table, log_in]
    """,
)
FLAKY_MANIFEST = {"secrets": ["FLAKY_TOKEN"]}


def tool_outputs(call) -> dict[str, str]:
    """``call_id -> output`` of the tool results in one model call's input."""
    return {
        item["call_id"]: str(item["output"])
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def replies(kernel) -> list[str]:
    return [entry[2] for entry in kernel.loader.instance("capture")._log()]


@pytest.fixture(params=["inprocess", "process"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_raising_tool_tells_the_model_what_went_wrong(
    mode, make_ext, settings_file, monkeypatch
):
    monkeypatch.setenv("FLAKY_TOKEN", SECRET)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("flaky", FLAKY, {**FLAKY_MANIFEST, "isolation": mode})
    model = ScriptedModel(
        [
            [function_call("book_table", {"date": "next friday"}, call_id="c1")],
            [function_call("log_in", {}, call_id="c2")],
            [assistant_message("I could not book it.")],
        ]
    )
    path = settings_file(isolation={"call_timeout_s": 20})
    async with running_kernel(path, model=model) as kernel:
        await kernel.loader.instance("capture").say("book a table for next friday")
        await wait_for(lambda: replies(kernel), timeout=30)
    assert replies(kernel) == ["I could not book it."]
    book = tool_outputs(model.calls[1])["c1"]
    assert book == "error: tool book_table failed: ValueError: date must be ISO 8601"
    assert "Traceback" not in str(model.calls[1].input)
    login = tool_outputs(model.calls[2])["c2"]
    assert login.startswith("error: tool log_in failed: PermissionError: token *** was refused xx")
    assert SECRET not in str(model.calls[2].input)
    assert len(login) == MAX_TOOL_ERROR_CHARS and login.endswith("…")
    model.assert_complete()


async def test_a_raw_function_tool_that_raises_does_not_fail_the_turn(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "rawtool",
        ext_code(
            header="""
            from agents import FunctionTool
            """,
            body="""
            def get_tools(self):
                async def invoke(ctx, args):
                    raise LookupError("no such city: Atlantis")
                schema = {"type": "object", "properties": {}, "additionalProperties": False}
                return [FunctionTool(name="weather", description="Weather.",
                                     params_json_schema=schema, on_invoke_tool=invoke)]
            """,
        ),
    )
    model = ScriptedModel(
        [[function_call("weather", {}, call_id="c1")], [assistant_message("No such city.")]]
    )
    async with running_kernel(settings_file(), model=model) as kernel:
        await kernel.loader.instance("capture").say("weather in Atlantis?")
        await wait_for(lambda: replies(kernel))
    assert replies(kernel) == ["No such city."]  # not the apology for a failed turn
    weather = tool_outputs(model.calls[1])["c1"]
    assert weather == "error: tool weather failed: LookupError: no such city: Atlantis"
    model.assert_complete()


async def test_a_declarative_agents_tool_failure_reaches_its_model(tmp_path: Path):
    ext_dir = tmp_path / "helper"
    ext_dir.mkdir()
    manifest = {"id": "helper", "name": "Helper", "agent": {"uses_tools": ["kv"]}}
    (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")

    def kv_get(key: str) -> str:
        """Look a key up."""
        raise KeyError(f"no key {key!r}")

    tools: dict[str, list[FunctionTool]] = {"kv": [function_tool(kv_get)]}
    model = ScriptedModel(
        [[function_call("kv_get", {"key": "color"}, call_id="c1")], [assistant_message("Unset.")]]
    )
    router = ModelRouter(ModelsSettings(), env={}, overrides={"*": model})
    agent = DeclarativeAgentAdapter(
        load_manifest(ext_dir), ext_dir, router, lambda uses: [t for u in uses for t in tools[u]]
    )
    response = await agent.invoke("what is my color?")
    assert response.status == "success" and response.content == "Unset."
    kv = tool_outputs(model.calls[1])["c1"]
    assert kv == "error: tool kv_get failed: KeyError: \"no key 'color'\""
