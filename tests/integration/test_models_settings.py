"""The ``models`` settings of ADR 0061, hostile: a misspelled or impossible price,
budget or fallback is an error naming the key; a fallback that cannot be used
leaves the chain (the first model still serves) and ``doctor`` names it; a
price is found under ``provider/model`` or the bare id; the running kernel's
served and cooling models reach ``doctor`` through its metrics snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_doctor import doctor

from core.agents import ModelRouter
from core.agents.usage import TurnUsage
from core.config import ModelPrice, ModelsSettings, SettingsError, load_settings
from core.kernel.spending import UsageEntry, price_of, summarise


def write(tmp_path: Path, models: dict) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"models": models}))
    return path


@pytest.mark.parametrize(
    ("models", "named"),
    [
        (
            {"default": {"provider": "openai", "model": "m", "fallbacks": [{"provder": "x"}]}},
            "provder",
        ),
        ({"prices": {"m": {"input": -1, "output": 1}}}, "prices.m.input"),
        ({"prices": {"m": {"input": 1, "ouput": 1}}}, "ouput"),
        ({"budget": {"daily": 5, "monthly": 1}}, "monthly (1) is below daily (5)"),
        ({"budget": {"daily": 0}}, "budget.daily"),
        ({"budget": {"scope": "family"}}, "budget.scope"),
        ({"cooldown_s": 0}, "cooldown_s"),
    ],
)
def test_impossible_models_settings_name_the_key(tmp_path, models, named):
    with pytest.raises(SettingsError, match=named.replace("(", r"\(").replace(")", r"\)")):
        load_settings(write(tmp_path, models))


def test_an_unusable_fallback_leaves_the_chain_and_doctor_names_it(settings_file):
    models = {
        "default": {
            "provider": "local",
            "model": "fake-model",
            "fallbacks": [
                {"provider": "nowhere", "model": "x"},
                {"provider": "local", "model": "fake-model-mini"},
            ],
        },
        "providers": {
            "local": {"type": "openai_compatible", "base_url": "http://127.0.0.1:9/v1"},
        },
    }
    router = ModelRouter(ModelsSettings.model_validate(models), env={})
    assert [c.label for c in router.chain()] == ["local/fake-model", "local/fake-model-mini"]
    assert router.describe() == (
        "openai_compatible:local/fake-model, then openai_compatible:local/fake-model-mini"
    )
    result = doctor(settings_file(models=models))
    assert "FAIL fallback left out: models.default.fallbacks.0 (nowhere/x)" in result.stdout
    assert "provider 'nowhere'" in result.stdout and result.returncode == 1


def test_doctor_reads_the_running_kernels_models_from_its_snapshot(settings_file, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "metrics.prom").write_text(
        'hearth_model_calls_total{model="second/m",outcome="ok"} 3.0\n'
        'hearth_model_calls_total{model="first/m",outcome="failed"} 2.0\n'
        'hearth_model_cooling_seconds{model="first/m"} 25.0\n'
    )
    result = doctor(settings_file(models={"default": None}))
    assert "models served since the kernel started" in result.stdout
    assert "second/m 3" in result.stdout
    assert "model first/m was cooling down, 25 s left" in result.stdout


def test_prices_by_provider_and_model_or_by_id_and_missing_ones_shown():
    prices = {
        "gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.0),
        "local/llama": ModelPrice(input=0, output=0),
    }
    assert price_of(prices, "openai/gpt-5-mini") is prices["gpt-5-mini"]
    assert price_of(prices, "local/llama") is prices["local/llama"]
    assert price_of(prices, "other/llama") is None
    entries = [
        UsageEntry("ann", "openai/gpt-5-mini", TurnUsage(1_000_000, 400_000, 100_000, 1)),
        UsageEntry("ann", "other/llama", TurnUsage(10, 0, 5, 1)),
    ]
    summary = summarise(entries, prices)
    assert summary.cost == pytest.approx(0.6 * 0.25 + 0.4 * 0.025 + 0.1 * 2.0)
    assert summary.unpriced == {"other/llama"}
    assert "no price for other/llama" in summary.cost_text("EUR")
