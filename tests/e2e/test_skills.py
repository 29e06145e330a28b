"""Agent Skills read and checked per the specification (agentskills.io): errors name the
file and the field and the other skills still load; files are read from inside the
skill's folder only (no ``..``, no symlink out); ``main.py skills`` and ``skills check``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ext_code
from core.config import PROJECT_ROOT
from core.skills import (
    SkillError,
    SkillFileError,
    SkillRoot,
    discover,
    list_files,
    read_skill,
    read_text,
)
from support.skills_kit import public_layout, write_skill


def test_the_public_layout_loads_sorted_with_every_field(tmp_path):
    catalog = discover([SkillRoot(public_layout(tmp_path))])
    assert catalog.names() == ["brand-voice", "pdf-forms", "word-count"]
    assert catalog.problems == ()
    pdf = catalog.get("pdf-forms")
    assert pdf.metadata == (("author", "tests"), ("version", "1.0"))
    assert catalog.get("brand-voice").license == "Apache-2.0"
    assert catalog.get("word-count").compatibility == "Python 3"
    assert list_files(pdf) == ["references/fields.md"]
    text = catalog.prompt_text()
    assert "- pdf-forms: Fill PDF forms." in text and "load_skill" in text
    assert "Read references/fields.md" not in text  # the body is not in the catalog
    assert discover([SkillRoot(tmp_path)]).prompt_text() == text  # same bytes each time


@pytest.mark.parametrize(
    ("folder", "front", "field", "detail"),
    [
        ("bad_name", "name: Bad_Name\ndescription: x", "name", "lowercase"),
        ("skill", "name: other\ndescription: x", "name", "folder's name"),
        ("-dash", "name: -dash\ndescription: x", "name", "not at either end"),
        ("a--b", "name: a--b\ndescription: x", "name", "single hyphens"),
        ("a" * 65, f"name: {'a' * 65}\ndescription: x", "name", "1 to 64"),
        ("skill", "description: x", "name", "missing"),
        ("skill", "name: skill", "description", "missing"),
        ("skill", "name: skill\ndescription: ''", "description", "empty"),
        ("skill", f"name: skill\ndescription: {'d' * 1025}", "description", "at most 1024"),
        (
            "skill",
            f"name: skill\ndescription: x\ncompatibility: {'c' * 501}",
            "compatibility",
            "500",
        ),
        ("skill", "name: skill\ndescription: x\nmetadata: {a: 1}", "metadata.a", "strings"),
        ("skill", "name: skill\ndescription: x\nallowed-tools: [a, b]", "allowed-tools", "spaces"),
        ("skill", "name: skill\ndescription: x\nversion: 2", "version", "unknown field"),
    ],
)
def test_each_invalid_field_is_named_with_the_file(tmp_path, folder, front, field, detail):
    path = write_skill(tmp_path, folder, front=front)
    with pytest.raises(SkillError) as caught:
        read_skill(path)
    assert caught.value.field == field
    assert caught.value.path == path / "SKILL.md"
    assert str(path / "SKILL.md") in str(caught.value) and detail in str(caught.value)


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("no front matter\n", "must start with YAML front matter"),
        ("---\nname: x\n", "no closing"),
        ("---\nname: [unclosed\n---\n", "not valid YAML"),
        ("---\n- a list\n---\n", "mapping"),
    ],
)
def test_a_broken_skill_file_is_reported_and_the_others_still_load(tmp_path, text, detail):
    write_skill(tmp_path, "good")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text(text)
    catalog = discover([SkillRoot(tmp_path)])
    assert catalog.names() == ["good"]
    [problem] = catalog.problems
    assert problem.path == tmp_path / "broken" / "SKILL.md" and detail in problem.detail


def test_the_first_source_of_a_name_wins_and_the_other_is_reported(tmp_path):
    first = write_skill(tmp_path / "a", "notes", "first")
    write_skill(tmp_path / "b", "notes", "second")
    catalog = discover([SkillRoot(tmp_path / "a"), SkillRoot(tmp_path / "b", "extension:x")])
    assert catalog.get("notes").folder == first and catalog.get("notes").body == "first"
    [problem] = catalog.problems
    assert problem.source == "extension:x" and "ignored" in problem.detail


def test_missing_folders_hold_no_skills(tmp_path):
    assert discover([SkillRoot(tmp_path / "nowhere")]).skills == ()


def test_files_are_read_from_inside_the_skill_only(tmp_path):
    public_layout(tmp_path / "skills")
    (tmp_path / "secret.txt").write_text("the owner's secret")
    skill = discover([SkillRoot(tmp_path / "skills")]).get("pdf-forms")
    assert "first_name" in read_text(skill, "references/fields.md")
    os.symlink("references/fields.md", skill.folder / "alias.md")  # a link inside: fine
    assert "first_name" in read_text(skill, "alias.md")
    os.symlink(tmp_path / "secret.txt", skill.folder / "references" / "leak.md")
    os.symlink(tmp_path, skill.folder / "up")
    hostile = [
        ("../../secret.txt", "'..' is not allowed"),
        ("references/../../../secret.txt", "'..' is not allowed"),
        (str(tmp_path / "secret.txt"), "must be relative"),
        ("references/leak.md", "leads outside the skill's folder"),
        ("up/secret.txt", "leads outside the skill's folder"),
        ("references/none.md", "no such file"),
        ("references", "no such file"),
    ]
    for path, detail in hostile:
        with pytest.raises(SkillFileError, match=detail):
            read_text(skill, path)


def test_a_long_file_is_cut_and_says_so_and_a_binary_one_is_refused(tmp_path):
    folder = write_skill(tmp_path, "big", files={"references/long.md": "x" * 300})
    (folder / "assets").mkdir()
    (folder / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00" * 10)
    skill = read_skill(folder)
    text = read_text(skill, "references/long.md", max_chars=100)
    assert text.startswith("x" * 100) and "[cut: the file is longer than 100" in text
    with pytest.raises(SkillFileError, match="not a text file"):
        read_text(skill, "assets/logo.png")


def _main(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT_ROOT,
    )


def test_skills_check_validates_a_folder_and_names_the_field(tmp_path):
    public_layout(tmp_path)
    done = _main("skills", "check", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "ok: word-count" in done.stdout
    write_skill(tmp_path, "bad", front="name: bad\ndescription: x\ntriggers: [a]")
    done = _main("skills", "check", str(tmp_path))
    assert done.returncode == 1
    assert f"error: {tmp_path / 'bad' / 'SKILL.md'}: triggers: unknown field" in done.stdout
    assert _main("skills", "check", str(tmp_path / "bad")).returncode == 1  # one skill folder
    assert _main("skills", "check", str(tmp_path / "pdf-forms" / "references")).returncode == 2


def test_main_skills_lists_settings_and_extension_skills_with_errors(
    tmp_path, make_ext, settings_file
):
    skill_file = "---\nname: from-extension\ndescription: The extension's own skill.\n---\nHi."
    make_ext("helper", ext_code("pass"), files={"skills/from-extension/SKILL.md": skill_file})
    public_layout(tmp_path / "mine")
    write_skill(tmp_path / "mine", "broken", front="name: broken")
    path = settings_file(skills={"paths": [str(tmp_path / "mine")]})
    done = _main("skills", "--json", "--settings", str(path))
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["from-extension"]["source"] == "extension:helper"
    assert rows["word-count"]["source"] == "settings" and rows["word-count"]["error"] is None
    assert rows["broken"]["error"].endswith("SKILL.md: description: missing")
    done = _main("skills", "--settings", str(path))
    assert "from-extension (extension:helper): The extension's own skill." in done.stdout
    assert "not loaded:" in done.stdout and "description: missing" in done.stdout


def test_the_default_paths_are_the_project_and_the_user_folder():
    from core.config import Settings

    paths = [str(p) for p in Settings().skills.paths]
    assert paths == ["skills", "~/.config/hearth/skills"]
    assert Path(PROJECT_ROOT / "settings.yaml").read_text().count("skills:") >= 1
