"""A workflow's definition is checked before it is kept (issue 44): each mistake is
named by its field, and the manifest's error names the file too."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.extensions.loading.manifest import ManifestError, load_manifest
from core.extensions.loading.workflow_section import WorkflowDefinition, parse_duration, step_ids
from core.kernel.workflows.service import describe_errors


def problem(data: dict) -> str:
    with pytest.raises(ValidationError) as caught:
        WorkflowDefinition.model_validate(data)
    return describe_errors(caught.value)


def test_each_mistake_is_named_by_its_field() -> None:
    steps = [{"id": "a", "tool": "x", "agent": "y"}]
    assert problem({"name": "w", "steps": steps}) == (
        "steps.0: a step does exactly one of tool, agent, ask, wait, until, notify, parallel "
        "(found: tool, agent)"
    )
    later = [{"id": "a", "notify": "{{b}}"}, {"id": "b", "agent": "hi"}]
    assert problem({"name": "w", "steps": later}) == "steps.0: {{b}} names no earlier step"
    twice = [{"id": "a", "agent": "x"}, {"id": "a", "agent": "y"}]
    assert problem({"name": "w", "steps": twice}) == "steps.1: step id 'a' is used twice"
    cron = {"name": "w", "trigger": {"cron": "at nine"}, "steps": [{"id": "a", "agent": "x"}]}
    assert problem(cron) == "trigger: invalid cron expression 'at nine'"
    wait = [{"id": "a", "wait": "soon"}]
    assert "steps.0.wait: 'soon' is not a duration" in problem({"name": "w", "steps": wait})
    side = [{"id": "g", "parallel": [{"id": "a", "ask": "ok?"}]}]
    assert "steps.0: a parallel group holds tool, agent and notify steps only" in problem(
        {"name": "w", "steps": side}
    )
    when = [{"id": "a", "agent": "x", "when": {"step": "z", "equals": "yes"}}]
    assert problem({"name": "w", "steps": when}) == "steps.0.when: 'z' is no earlier step"
    assert problem({"name": "Bad Name", "steps": [{"id": "a", "agent": "x"}]}).startswith("name:")
    system = {
        "name": "w",
        "trigger": {"event": "system.user.message"},
        "steps": [{"id": "a", "agent": "x"}],
    }
    assert "system topics cannot start a workflow" in problem(system)


def test_a_good_definition_reads_in_the_order_it_runs() -> None:
    definition = WorkflowDefinition.model_validate(
        {
            "name": "morning",
            "trigger": {"cron": "0 7 * * 1-5", "timezone": "Europe/Berlin"},
            "steps": [
                {
                    "id": "both",
                    "parallel": [{"id": "w", "agent": "weather"}, {"id": "r", "tool": "reminders"}],
                },
                {"id": "tell", "notify": "{{w}} / {{r}}", "when": {"step": "r", "not_equals": ""}},
                {"id": "later", "until": "09:30"},
            ],
        }
    )
    assert step_ids(definition) == ["both", "w", "r", "tell", "later"]
    assert parse_duration("90s") == 90 and parse_duration("2h") == 7200
    assert definition.steps[1].when is not None and definition.steps[1].when.holds("two items")


def test_the_manifests_error_names_the_file_and_the_field(tmp_path) -> None:
    (tmp_path / "manifest.yaml").write_text(
        "id: bad\nname: Bad\nworkflows:\n  - name: w\n    steps:\n      - {id: a, tool: x, agent: y}\n"
    )
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'manifest.yaml'}: workflows.0.steps.0: ")
