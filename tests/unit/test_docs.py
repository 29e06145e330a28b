"""Docs stay true: every file or directory the README and docs link to exists."""

from __future__ import annotations

import re

from conftest import PROJECT_ROOT

LINK = re.compile(r"\]\(([^)#\s]+)\)")
TOP_DIRS = "core|sandbox|tests|bench|docs|deploy|prompts|\\.ci"
CODE_PATH = re.compile(rf"`((?:{TOP_DIRS})/(?:[\w.-]+/)*[\w.-]*)`")
GENERATED = ("sandbox/data/", ".venv/")


def _referenced(text: str) -> set[str]:
    found = set(LINK.findall(text))
    found.update(p for p in CODE_PATH.findall(text) if not p.startswith(("http", "<")))
    return {p for p in found if "://" not in p and not p.startswith(GENERATED)}


def test_paths_named_in_docs_exist():
    missing = []
    docs = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
    for doc in docs:
        for ref in _referenced(doc.read_text(encoding="utf-8")):
            base = doc.parent if ref.startswith(".") else PROJECT_ROOT
            if not (base / ref).exists() and not (doc.parent / ref).exists():
                missing.append(f"{doc.relative_to(PROJECT_ROOT)}: {ref}")
    assert not missing, "\n".join(sorted(missing))
