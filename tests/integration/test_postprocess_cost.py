"""What a post-processor reports it spent counts like the turn's own model calls
(issue 46): in ``/usage``, ``main.py usage``, the HTTP ``usage`` and against
``models.budget``, under the model it names."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from agents.testing import ScriptedModel, assistant_message

from conftest import PROJECT_ROOT, ext_code
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, CONVERSING, running_kernel, wait_for
from support.http_api_support import TOKEN, client, install, serving

# a post-processor that "called" a model: 100k tokens in, 10k out, on ScriptedModel
# at the prices below: 100k * 10 + 10k * 40 per million = 1.00 + 0.40 = 1.40 USD
SUMMARY = ext_code(
    """
    name = "summary"
    output_target = "silent"
    def validate_param(self, param):
        return True, None
    async def execute(self, context, param):
        return PostProcessResult(
            self.name, {"summary": context.answer_text[:10]},
            metadata={"model": "ScriptedModel"},
            input_tokens=100_000, output_tokens=10_000, cost_usd=1.4,
        )
    """,
    "from core.extensions.contract import PostProcessResult",
)
PRICES = {"ScriptedModel": {"input": 10.0, "cached_input": 1.0, "output": 40.0}}


async def say(capture, text: str) -> str:
    before = len(capture.sent or [])
    await capture.say(text, "u1")
    await wait_for(lambda: any(k == "reply" for k, _, _ in (capture.sent or [])[before:]), 30)
    return next(m for k, _, m in (capture.sent or [])[before:] if k == "reply")


async def test_a_post_processors_tokens_count_in_usage_and_against_the_budget(
    make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("summary", SUMMARY, CONVERSING)
    path = settings_file(
        channels={"default": "capture"},
        models={"default": None, "prices": PRICES, "budget": {"daily": 2.0}},
    )
    model = ScriptedModel([[assistant_message(f"Answer {n}.")] for n in (1, 2, 3)])
    async with running_kernel(path, model=model) as kernel:
        capture = kernel.loader.instance("capture")
        await say(capture, "/ext activate summary")
        assert await say(capture, "Sum it up #summary") == "Answer 1."
        usage = await say(capture, "/usage")
        refused = await say(capture, "And again #summary")  # 1.40 spent + about 1.40 > 2.00
    assert "This conversation: 100,000 in (0 cached), 10,000 out — 1.40 USD" in usage
    assert "Budget daily: 1.40 of 2.00 USD (70%)" in usage
    assert refused.startswith("Sorry, the household's daily model budget has too little")
    report = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(PROJECT_ROOT / "main.py"), "usage", "--json", "--settings", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )  # main.py usage reads the same rows
    assert report.returncode == 0, report.stderr
    (row,) = json.loads(report.stdout)["rows"]
    assert (row["model"], row["input_tokens"], row["output_tokens"]) == (
        "ScriptedModel",
        100_000,
        10_000,
    )
    assert abs(row["cost"] - 1.4) < 1e-9


async def test_the_http_usage_includes_a_post_processors_tokens(
    monkeypatch, ext_root, make_ext, settings_file
):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    make_ext("summary", SUMMARY, CONVERSING)
    path = settings_file(
        models={"default": None},
        channels={"default": "http_api"},
        extensions={"http_api": {"listen": "127.0.0.1:0"}},
    )
    model = ScriptedModel([[assistant_message("Answer.")]])
    async with serving(path, model=model) as (kernel, base):
        await kernel.shaping.post.activations.activate("person:owner", "summary")
        reply = await client(base).chat.completions.create(
            model="hearth",
            messages=[{"role": "user", "content": "Sum it up"}],
            user="u9",
            extra_body={"extensions": [{"name": "summary"}]},
        )
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (100_000, 10_000)
    assert reply.model_extra["hearth"]["postprocess"]["summary"]["cost_usd"] == 1.4
