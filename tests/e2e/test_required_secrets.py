"""Required and optional secrets (seed 004 ``requiredSecrets``, issue 16).

A manifest lists secrets as bare names (required) or ``{name, optional: true}``.
A missing required secret leaves the extension ``skipped`` with the reason,
logged at INFO — it is the user's setup, not a failure — so a fresh install
with no secrets starts without a single ERROR line.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT, ext_code
from core.extensions.loading.manifest import ManifestError, load_manifest
from core.runtime import secret_file_names
from support.harness import running_kernel

READER = ext_code(
    """
    def token(self, name):
        return self.ctx.get_secret(name)
    """
)


def test_secrets_may_be_names_or_optional_entries(make_ext):
    ext_dir = make_ext(
        "weather", ext_code(), {"secrets": ["WEATHER_KEY", {"name": "EXTRA", "optional": True}]}
    )
    manifest = load_manifest(ext_dir)
    assert manifest.secret_names == ("WEATHER_KEY", "EXTRA")
    assert manifest.required_secrets == ("WEATHER_KEY",)


@pytest.mark.parametrize(
    ("secrets", "expected"),
    [
        ([{"name": "OK", "optinal": True}], "secrets.0.optinal: unknown key"),
        (["GOOD", {"name": "not a name"}], "secrets.1.name: 'not a name' is not an environment"),
        (["TWICE", {"name": "TWICE", "optional": True}], "secrets: TWICE listed more than once"),
        ([{"optional": True}], "secrets.0.name: Field required"),
    ],
)
def test_a_bad_secret_entry_names_the_file_and_the_field(make_ext, secrets, expected):
    ext_dir = make_ext("weather", ext_code(), {"secrets": secrets})
    with pytest.raises(ManifestError) as caught:
        load_manifest(ext_dir)
    assert str(ext_dir / "manifest.yaml") in str(caught.value)
    assert expected in caught.value.message


async def test_a_missing_required_secret_skips_the_extension_at_info(
    make_ext, settings_file, monkeypatch, caplog
):
    monkeypatch.delenv("NEEDED_TOKEN", raising=False)
    monkeypatch.delenv("NICE_TO_HAVE", raising=False)
    monkeypatch.setenv("PRESENT_TOKEN", "s3cret")
    make_ext("needy", READER, {"secrets": ["NEEDED_TOKEN"]})
    make_ext("dependent", ext_code(), {"depends_on": ["needy"]})
    make_ext("relaxed", READER, {"secrets": [{"name": "NICE_TO_HAVE", "optional": True}]})
    make_ext("supplied", READER, {"secrets": ["PRESENT_TOKEN"]})
    caplog.set_level(logging.INFO)
    async with running_kernel(settings_file()) as kernel:
        records = kernel.loader.records
        assert records["needy"].status.value == "skipped"
        assert records["needy"].error == (
            "missing secret NEEDED_TOKEN (set it in the environment or .env)"
        )
        assert records["needy"].instance is None  # none of its code ran
        assert records["dependent"].status.value == "skipped"
        assert "needy" in (records["dependent"].error or "")
        assert kernel.loader.instance("relaxed").token("NICE_TO_HAVE") is None
        assert kernel.loader.instance("supplied").token("PRESENT_TOKEN") == "s3cret"
    skipped = [r for r in caplog.records if "missing secret NEEDED_TOKEN" in r.getMessage()]
    assert skipped and all(r.levelno == logging.INFO for r in skipped)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_fresh_run_with_no_secrets_prints_no_error(tmp_path):
    """``make run`` on a fresh clone: default settings.yaml, an empty data dir, no secrets."""
    if "TELEGRAM_BOT_TOKEN" in secret_file_names():
        pytest.skip("this checkout's .env holds a Telegram token")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TELEGRAM_BOT_TOKEN", "OPENAI_API_KEY") and not k.startswith("HEARTH__")
    }
    env["HEARTH__PATHS__DATA"] = str(tmp_path / "data")
    result = subprocess.run(
        [sys.executable, "main.py"],
        cwd=PROJECT_ROOT,
        input="hello\n/status\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "kernel ready" in result.stderr
    assert "ERROR" not in result.stderr, result.stderr
    assert "telegram_channel: skipped — missing secret TELEGRAM_BOT_TOKEN" in result.stdout
