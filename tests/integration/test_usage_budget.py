"""Usage and budgets in a running kernel (SPEC §11, ADR 0061): every turn's tokens
are recorded with it, ``/usage`` shows this conversation, today and this month
with their cost, per person; at 80 % of a budget the owner is told once, at
100 % new turns are refused with a line that says why and until when, while
commands still answer. On both storage backends."""

from __future__ import annotations

import asyncio

from agents.testing import ModelStep, ScriptedModel, assistant_message
from agents.usage import Usage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.http_api_support import TOKEN, client, install, serving

# one model call: 100k tokens in (20k of them cached), 10k out; at the prices below
# 80k * 10 + 20k * 1 + 10k * 40 per million = 0.8 + 0.02 + 0.4 = 1.22 USD
USAGE = Usage(
    requests=1,
    input_tokens=100_000,
    input_tokens_details=InputTokensDetails(cached_tokens=20_000, cache_write_tokens=0),
    output_tokens=10_000,
    output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    total_tokens=110_000,
)
PRICES = {"ScriptedModel": {"input": 10.0, "cached_input": 1.0, "output": 40.0}}
TURN_COST = 1.22


def scripted(turns: int) -> ScriptedModel:
    model = ScriptedModel([[assistant_message(f"Answer {n}.")] for n in range(1, turns + 1)])
    model.set_default_usage(USAGE)
    return model


def replies(capture, kind: str = "reply", user: str | None = None) -> list[str]:
    return [m for k, u, m in capture.sent or [] if k == kind and (user is None or u == user)]


async def say(capture, text: str, user: str = "u1") -> str:
    before = len(replies(capture, user=user))
    await capture.say(text, user)
    await wait_for(lambda: len(replies(capture, user=user)) > before, timeout=30)
    return replies(capture, user=user)[-1]


async def test_usage_and_a_household_budget(make_ext, settings_file, storage_backend):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(
        channels={"default": "capture"},
        models={"default": None, "prices": PRICES, "budget": {"daily": 2.5, "currency": "EUR"}},
        storage=storage_backend,
    )
    async with running_kernel(path, model=scripted(3)) as kernel:
        capture = kernel.loader.instance("capture")
        assert await say(capture, "first") == "Answer 1."
        usage = await say(capture, "/usage")
        assert "This conversation: 100,000 in (20,000 cached), 10,000 out — 1.22 EUR" in usage
        assert "Today" in usage and "This month" in usage
        assert "Budget daily: 1.22 of 2.50 EUR (49%)" in usage
        assert replies(capture, "notify") == []  # 49 %: nobody is told yet

        assert await say(capture, "second") == "Answer 2."  # 2.44 of 2.50: over 80 %
        await wait_for(lambda: replies(capture, "notify"))
        (notice,) = replies(capture, "notify")
        assert "daily model budget is 98% used: 2.44 EUR of 2.50 EUR" in notice

        # a third answer (about 1.22, the turns so far) would go past the limit (ADR 0075)
        refused = await say(capture, "third")
        assert refused.startswith("Sorry, the household's daily model budget has too little")
        assert "2.44 EUR of 2.50 EUR" in refused and "about 1.22 EUR" in refused
        assert "tomorrow" in refused
        assert "models.budget.daily" in refused
        assert "Commands and reminders still work" in refused
        assert "Budget daily" in await say(capture, "/usage")  # commands still answer
        assert len(replies(capture, "notify")) == 1  # told once
        assert len(kernel.spending.meter._tallies) == 0  # nothing left behind


async def test_per_person_budgets_and_usage(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(
        channels={"default": "capture"},
        models={
            "default": None,
            "prices": PRICES,
            "budget": {"daily": 1.5, "scope": "person"},
        },
        people={
            "ann": {"role": "owner", "identities": ["capture:u1"]},
            "bob": {"role": "member", "identities": ["capture:u2"]},
        },
    )
    async with running_kernel(path, model=scripted(3)) as kernel:
        capture = kernel.loader.instance("capture")
        assert await say(capture, "hi from bob", "u2") == "Answer 1."
        refused = await say(capture, "more from bob", "u2")  # 1.22 + about 1.22 > 1.50
        assert refused.startswith("Sorry, your daily model budget has too little left")
        assert await say(capture, "hi from ann", "u1") == "Answer 2."  # her own budget
        bob = await say(capture, "/usage", "u2")
        assert "Today" in bob and "1.22 USD" in bob and "per person" not in bob
        ann = await say(capture, "/usage", "u1")
        assert "This month per person:" in ann
        assert "  ann: " in ann and "  bob: " in ann


async def test_concurrent_turns_hold_their_estimate_against_the_budget(
    monkeypatch, ext_root, settings_file, storage_backend
):
    """Eight requests at once with room for three more turns (issue 41): a turn in
    flight holds its estimated cost (ADR 0075), so three run and five are refused;
    before, all eight ran past the budget."""
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    path = settings_file(
        models={"default": None, "prices": PRICES, "budget": {"daily": 5.0}},
        channels={"default": "http_api"},
        extensions={"http_api": {"listen": "127.0.0.1:0"}},
        storage=storage_backend,
    )
    gate, asked = asyncio.Event(), []

    async def held_answer(call):
        asked.append(call)
        await gate.wait()
        return [assistant_message("Answered.")]

    model = ScriptedModel(
        [[assistant_message("Warm.")], *(ModelStep.respond(held_answer) for _ in range(8))]
    )
    model.set_default_usage(USAGE)
    async with serving(path, model=model) as (kernel, base):
        api = client(base)

        async def ask(text: str) -> str:
            messages = [{"role": "user", "content": text}]
            answer = await api.chat.completions.create(model="hearth", messages=messages)
            return answer.choices[0].message.content or ""

        assert await ask("warm up") == "Warm."  # 1.22 spent; a turn's estimate is 1.22
        asks = [asyncio.create_task(ask(f"question {n}")) for n in range(8)]
        # every request has reached the model or has its answer: then the model answers
        await wait_for(lambda: len(asked) + sum(t.done() for t in asks) >= 8, timeout=60)
        gate.set()
        answers = await asyncio.gather(*asks)
        usage = await ask("/usage")
        answered = [a for a in answers if a == "Answered."]
        refused = [a for a in answers if a.startswith("Sorry, the household's daily model")]
        assert len(answered) == 3, answers  # 1.22 + 3 x 1.22 = 4.88 of 5.00; a 4th: 6.10
        assert len(refused) == 5, answers
        assert "held by answers in progress" in refused[0]
        assert "Budget daily: 4.88 of 5.00 USD (98%)" in usage
        assert len(kernel.spending.budget.holds) == 0  # every hold went with its turn


async def test_a_failed_turn_gives_back_what_it_held(make_ext, settings_file):
    """A turn whose model fails ends with an apology and its hold goes with it: the
    next turn is admitted against what was spent, not against a leftover hold."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(
        channels={"default": "capture"},
        models={"default": None, "prices": PRICES, "budget": {"daily": 2.5}},
    )
    model = ScriptedModel(
        [
            [assistant_message("Answer 1.")],
            ModelStep.raise_error(RuntimeError("the model fell over")),
            [assistant_message("Answer 2.")],
        ]
    )
    model.set_default_usage(USAGE)
    async with running_kernel(path, model=model) as kernel:
        capture = kernel.loader.instance("capture")
        assert await say(capture, "first") == "Answer 1."
        failed = await say(capture, "second")
        assert not failed.startswith("Sorry, the household's") and "Answer" not in failed
        assert len(kernel.spending.budget.holds) == 0
        assert await say(capture, "third") == "Answer 2."  # 1.22 + about 1.22 <= 2.50


async def test_after_a_restart_the_estimate_comes_from_the_recorded_turns(make_ext, settings_file):
    """A restarted kernel holds nothing (holds live in memory), and reads what the
    recorded turns cost for its estimate: with 1.22 spent of 2.00, a turn of about
    1.22 more is refused at once, not let through as a first, unknown turn."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(
        channels={"default": "capture"},
        models={"default": None, "prices": PRICES, "budget": {"daily": 2.0}},
    )
    async with running_kernel(path, model=scripted(1)) as kernel:
        assert await say(kernel.loader.instance("capture"), "first") == "Answer 1."
    async with running_kernel(path, model=scripted(1)) as kernel:
        refused = await say(kernel.loader.instance("capture"), "second")
    assert refused.startswith("Sorry, the household's daily model budget has too little")
    assert "1.22 USD of 2.00 USD; an answer costs about 1.22 USD" in refused
