"""End to end through ``main.py``, piped, with the real ``openai`` client against
the fake model server: ``#json:minimal #decision`` after a question (issue 15)."""

from __future__ import annotations

import pytest
from test_cli_e2e import cli_settings, run_main
from test_postprocess_turn import BOOM

from support.fake_openai import FakeOpenAIServer
from support.harness import CONVERSING

# the bundled post-processors (#json, #decision, …), as in a fresh install
pytestmark = pytest.mark.usefixtures("postprocessors")

ANSWER = "CPU usage is critical at 97% and the web tier is down. We recommend scaling out."
BRANCH = '  "branch_key": "threshold_exceeded_critical",'


@pytest.fixture
def fake_model():
    with FakeOpenAIServer() as srv:
        yield srv


def test_json_appended_decision_silent_and_kept_across_a_restart(
    make_ext, settings_file, ext_root, fake_model
):
    make_ext("boom", BOOM, CONVERSING)  # a custom post-processor that always fails
    fake_model.script(ANSWER)
    path = cli_settings(settings_file, ext_root, fake_model.base_url)
    first = run_main(
        path,
        "/ext activate boom\n"
        "What is the CPU usage? #json:minimal #decision #boom\n"
        "/last decision\n",
    )
    assert first.returncode == 0, first.stderr
    assert fake_model.requests[0]["messages"][-1] == {
        "role": "user",
        "content": "What is the CPU usage?",
    }
    lines = first.stdout.splitlines()
    assert lines[:12] == [
        "Activated #boom (boom).",
        ANSWER,
        "#json",
        "```json",
        "{",
        '  "query": "What is the CPU usage?",',
        f'  "answer": "{ANSWER}"',
        "}",
        "```",
        "",
        "▸ #boom failed: RuntimeError: exploded",
        "Results for “What is the CPU usage? #json:minimal #decision #boom”:",
    ]
    assert lines[12].startswith("#decision (silent, ok, ")
    assert BRANCH in lines
    assert first.stdout.count("branch_key") == 1  # the decision was only shown by /last

    again = run_main(path, "/last decision\n/last\n")  # a new process, the same data
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[1].startswith("#decision (silent, ok, ")
    assert BRANCH in again.stdout.splitlines()
    assert "#boom (chat_append, failed: RuntimeError: exploded" in again.stdout
    assert len(fake_model.requests) == 1


def test_an_unactivated_name_reaches_the_model_as_text_and_the_person_is_told(
    settings_file, ext_root, fake_model
):
    fake_model.script("Noted.")
    path = cli_settings(settings_file, ext_root, fake_model.base_url)
    result = run_main(path, "/ext deactivate json\nShip it #json #release\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Deactivated #json.",
        "Noted.",
        "▸ #json is not activated for you: /ext activate json",
        "▸ #release is not one of your post-processors, so nothing ran for it "
        "(it stayed in the message); /ext lists yours",
    ]
    assert fake_model.requests[0]["messages"][-1]["content"] == "Ship it #json #release"
